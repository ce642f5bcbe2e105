"""Realtime mode: simulated time advances by each decision's latency, except the first's."""

import json

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.records.log import RunWriter


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def test_injected_latency_advances_sim_time_after_the_first_decision(backend, panda_kin, tmp_path) -> None:
    paused = arm_episode(backend, panda_kin, scripted_policy("pick_cube")).run(0)
    cfg = EpisodeConfig(mode="realtime", latency_s=0.5)
    rt = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), cfg, RunWriter(tmp_path, None)).run(0)
    assert paused.mode == "paused" and paused.advanced_s == 0.0
    assert rt.mode == "realtime" and rt.latency_injected_s == 0.5
    assert rt.advanced_s == pytest.approx(0.5 * (rt.turns - 1))
    # a static task: the same actions, each turn started 0.5 s later in simulated time
    assert rt.success and rt.turns == paused.turns
    assert rt.sim_time_s == pytest.approx(paused.sim_time_s + rt.advanced_s, abs=0.05)
    lines = [json.loads(x) for x in (tmp_path / "episode.jsonl").read_text().splitlines()]
    assert lines[0]["mode"] == "realtime" and lines[0]["latency_injected_s"] == 0.5
    turns = [x for x in lines if x["kind"] == "turn"]
    assert "advanced_s" not in turns[0] and all(t["advanced_s"] == 0.5 for t in turns[1:])
    assert json.loads((tmp_path / "summary.json").read_text())["mode"] == "realtime"


@pytest.mark.wallclock  # the decision time is measured on the clock
def test_measured_latency_is_used_without_injection(backend, panda_kin) -> None:
    rt = arm_episode(backend, panda_kin, scripted_policy("pick_cube"), EpisodeConfig(mode="realtime")).run(1)
    assert rt.latency_injected_s is None
    assert rt.advanced_s == pytest.approx(sum(rt.latencies_s[1:]))


@pytest.mark.parametrize(
    "kw", [{"mode": "fast"}, {"latency_s": 1.0}, {"mode": "realtime", "latency_s": -1.0}]
)
def test_bad_clock_settings_are_refused(kw) -> None:
    with pytest.raises(ValueError):
        EpisodeConfig(**kw)
