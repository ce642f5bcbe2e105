"""The roadster through the ONE turn loop: prompts, correction turns, realtime advance, records."""

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.policies.base import PolicyReply
from pear_agent.protocol.actions import ActionError
from pear_agent.records.log import RunWriter
from sim_adapters.roadster.environment import RoadsterEnvironment

pytest.importorskip("mujoco")


class Fixed:
    """Replies a fixed list of texts, then coasts."""

    name = "fixed"

    def __init__(self, texts, latency_s=0.0):
        self.texts, self.latency_s, self.i = list(texts), latency_s, 0

    def reset(self, seed):
        self.i = 0

    def act(self, messages, ctx):
        text = self.texts[self.i] if self.i < len(self.texts) else '{"mode": "coast"}'
        self.i += 1
        return PolicyReply(text=text, latency_s=self.latency_s)


def test_briefing_and_first_row():
    env = RoadsterEnvironment("roadster_kickflip", "storm", render=False)
    env.reset(20000)
    sp = env.system_prompt()
    assert "stunt: kickflip" in sp and "Wind band: storm" in sp and '"mode": "rotate"' in sp
    prompt = env.observe(1, 80, None)
    assert prompt.text.startswith("telemetry t_s=0 ") and "time_to_truck_s=" in prompt.text
    assert prompt.context.response_schema["discriminator"]["propertyName"] == "mode"


def test_parse_raises_action_error_only():
    env = RoadsterEnvironment("roadster_ramp_flip", render=False)
    with pytest.raises(ActionError, match="'mode' must be one of"):
        env.parse('{"mode": "teleport"}')


def test_invalid_replies_get_correction_turns_and_the_car_keeps_its_command(tmp_path):
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    writer = RunWriter(tmp_path / "run", video_fps=None)
    policy = Fixed(['{"mode": "rotate", "axis": "roll", "to": 360}', "roll!", '{"mode": "land"}'])
    result = Episode(env, policy, EpisodeConfig(max_invalid=2), writer=writer).run(20000)
    assert result.invalid_replies >= 1
    lines = [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]
    turns = [x for x in lines if x.get("kind") == "turn"]
    assert turns[1]["outcome"]["status"] == "invalid" and "no JSON object" in turns[1]["error"]
    assert turns[2]["prompt"].startswith("Last: invalid reply")
    assert "telemetry" in turns[0] and turns[0]["rows"]


def test_realtime_advance_flies_the_old_command_while_thinking():
    env = RoadsterEnvironment("roadster_ramp_flip", "light", mode="realtime", render=False)
    policy = Fixed(['{"mode": "coast"}', '{"mode": "land"}'], latency_s=0.0)
    result = Episode(env, policy, EpisodeConfig(mode="realtime", latency_s=2.0)).run(20000)
    # upside down and coasting for 2 s from 10+ m: it hits the road before the "land" takes effect
    assert not result.success and result.end_reason == "crashed"
    assert result.turns == 2 and result.advanced_s == 2.0


def test_success_ends_with_the_reward_recorded(tmp_path):
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    policy = Fixed(['{"mode": "rotate", "axis": "roll", "to": 360}'] * 4 + ['{"mode": "land"}'] * 60)
    writer = RunWriter(tmp_path / "run", video_fps=None)
    result = Episode(env, policy, EpisodeConfig(), writer=writer).run(20001)
    assert result.success and result.end_reason == "success"
    lines = [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]
    last = [x for x in lines if x.get("kind") == "turn"][-1]
    assert last["end"] == "success" and last["reward"] >= 0.9 and last["reward_parts"]["landing"] == 0.4


def test_unknown_wind_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown wind band 'breeze'; bands are: light, gale, storm"):
        RoadsterEnvironment("roadster_kickflip", "breeze")


@pytest.mark.parametrize("lag_s, intervals", [(0.09, 0), (0.2, 1), (0.39, 1), (0.4, 2), (2.0, 10)])
def test_study_clock_rule_counts_whole_intervals(lag_s, intervals):
    from sim_adapters.roadster.environment import late_intervals

    assert late_intervals(lag_s) == intervals


def _flight(latency_s: float | None, clock: str = "intervals", seed: int = 20003):
    """The scripted pilot's light ramp flip, paused or realtime with an injected latency."""
    from sim_adapters.roadster.pilot import PilotPolicy

    mode = "paused" if latency_s is None else "realtime"
    env = RoadsterEnvironment("roadster_ramp_flip", "light", mode=mode, render=False, clock=clock)
    cfg = EpisodeConfig(mode=mode, latency_s=latency_s)
    result = Episode(env, PilotPolicy(noise=0.0, seed=0), cfg).run(seed)
    return result, env


def test_a_reply_within_the_interval_flies_exactly_as_paused():
    paused, p_env = _flight(None)
    fast, f_env = _flight(0.09)
    assert fast.success == paused.success and fast.turns == paused.turns
    assert fast.sim_time_s == pytest.approx(paused.sim_time_s, abs=1e-9)
    assert f_env.result_fields()["reward"] == pytest.approx(p_env.result_fields()["reward"], abs=1e-9)
    assert f_env.result_fields()["clock"] == {"rule": "intervals", "late_intervals": 0, "lag_flown_s": 0.0}
    assert p_env.result_fields()["clock"]["rule"] is None  # paused: no rule ran


def test_each_full_interval_of_lag_is_one_interval_on_the_old_command():
    one, env1 = _flight(0.2)
    ten, env10 = _flight(2.0)
    decisions = one.turns - 1  # the first decision is untimed
    assert env1.intervals_late == decisions and env1.lag_flown_s == pytest.approx(0.2 * decisions)
    assert env10.intervals_late == 10 * (ten.turns - 1)
    # the continuous rule flies the measured lag itself: 0.09 s already shifts the flight
    cont, env_c = _flight(0.09, clock="continuous")
    assert env_c.lag_flown_s == pytest.approx(0.09 * (cont.turns - 1))
    assert env_c.result_fields()["clock"]["rule"] == "continuous"


def test_unknown_clock_rule_is_one_clear_error():
    with pytest.raises(ValueError, match="unknown clock rule 'wall'; rules are: intervals, continuous"):
        RoadsterEnvironment("roadster_kickflip", "light", clock="wall")
