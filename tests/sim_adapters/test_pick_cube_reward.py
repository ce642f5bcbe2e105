"""`pick_cube`'s shaped reward (the arm family's RL reward beside binary success), read off the
real MuJoCo scene: low at the start, higher with the tool point at the cube, higher again with the
cube partly lifted, 1 on success; a task without one gives None (binary success only)."""

import numpy as np
import pytest

from pear_agent.loop.arm_environment import ArmEnvironment, arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import family_of, make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.protocol.actions import parse_reply
from pear_agent.protocol.state import parse_compact_relative

mujoco = pytest.importorskip("mujoco")


@pytest.fixture
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def test_closer_then_lifted_then_success_pays_more(backend, panda_kin):
    """Mutation seen to fail: `lift = 0.0` in `PickCube.shaped_reward` (the lift ignored) failed the
    raised-cube assertion (0.28 is not above 0.5)."""
    env = ArmEnvironment(backend, panda_kin, observation="compact", scene_facts=True, scene_relative=True)
    env.reset(0)
    start = backend.shaped_reward()
    assert 0.0 <= start < 0.3
    for _ in range(6):  # straight at the cube's centre, capped per turn
        rel = parse_compact_relative(env.observe(1, 25, None).text.splitlines()[-1])[("object", "arm")]
        step = np.clip([rel["dx"], rel["dy"], rel["dz"] + 4], -8, 8).tolist()  # stop 4 cm above the centre
        env.execute(parse_reply(f'{{"action":{{"arm":{{"move_cm":{step}}}}}}}', env.robot))
    near = backend.shaped_reward()
    assert start + 0.05 < near <= 0.3
    # the cube raised 6 cm (teleported, read before the simulation steps again): most of the lift term
    m, d = backend.model, backend.data
    adr = m.joint("cube_free").qposadr[0]
    d.qpos[adr + 2] += 0.06
    mujoco.mj_forward(m, d)
    assert backend.shaped_reward() > 0.5 and not backend.observe(render=False).success


def test_a_successful_episode_gets_one_through_the_family(backend, panda_kin):
    cfg = EpisodeConfig(observation="compact", scene_facts=True)
    episode = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), cfg)
    result = episode.run(1)
    assert result.success
    assert family_of("pick_cube").rewards(episode.env, result) == (1.0, 1.0)


def test_a_task_without_one_gives_none(panda, panda_kin):
    be = make_backend("place_in_bowl", panda, render=False)
    try:
        be.reset(0)
        assert be.shaped_reward() is None
        env = ArmEnvironment(be, panda_kin, observation="compact")
        env.reset(0)
        from pear_agent.loop.episode import EpisodeResult

        assert family_of("place_in_bowl").rewards(env, EpisodeResult(False, 1, "turn_limit")) == (0.0, None)
    finally:
        be.close()
