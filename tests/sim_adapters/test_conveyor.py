"""The conveyor task: the belt really carries the cube, and decision latency really matters."""

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("conveyor_pick", panda, render=False)
    yield be
    be.close()


def test_belt_carries_the_cube_at_its_speed(backend) -> None:
    obs = backend.reset(3)
    y0 = obs.privileged["object"]["position_cm"][1]
    v = obs.privileged["belt"]["velocity_cm_s"][1]
    assert -3.6 < v < -2.4
    backend.advance(2.0)
    obs = backend.observe(render=False)
    dy = obs.privileged["object"]["position_cm"][1] - y0
    assert dy == pytest.approx(2.0 * v, rel=0.1)
    assert not obs.success  # riding the belt is not lifting


def test_seeds_differ(backend) -> None:
    a = backend.reset(0).privileged["object"]["position_cm"]
    b = backend.reset(1).privileged["object"]["position_cm"]
    assert not np.allclose(a, b)


def test_expert_succeeds_paused_and_fails_with_2s_realtime_latency(backend, panda_kin) -> None:
    # the experts' contract: >= 90% of seeds 0-49 (paused); with 2 s per decision it must collapse
    paused = [arm_episode(backend, panda_kin, scripted_policy("conveyor_pick")).run(s) for s in range(50)]
    cfg = EpisodeConfig(mode="realtime", latency_s=2.0)
    late = [arm_episode(backend, panda_kin, scripted_policy("conveyor_pick"), cfg).run(s) for s in range(5)]
    assert sum(r.success for r in paused) >= 45, [(r.seed, r.end_reason) for r in paused if not r.success]
    assert sum(r.success for r in late) <= 1
    assert all(r.mode == "realtime" and r.advanced_s == pytest.approx(2.0 * (r.turns - 1)) for r in late)
