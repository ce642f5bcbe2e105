"""`--history K` and `--observation compact` as settings of the loop: what reaches the policy at turn
N, what the records say, and the same window through the HTTP client's request."""

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.policies.openai_wire import wire_messages
from pear_agent.records.log import RunWriter

pytest.importorskip("mujoco")


class Seen:
    """Wraps a policy; keeps the messages it was given at each turn."""

    def __init__(self, policy):
        self.policy, self.name, self.seen = policy, policy.name, []

    def reset(self, seed):
        self.seen = []
        self.policy.reset(seed)

    def act(self, messages, ctx):
        self.seen.append([dict(m) for m in messages])
        return self.policy.act(messages, ctx)


def fly(tmp_path, **cfg):
    from sim_adapters.roadster.environment import RoadsterEnvironment
    from sim_adapters.roadster.pilot import PilotPolicy

    env = RoadsterEnvironment(
        "roadster_ramp_flip", "light", render=False, observation=cfg.get("observation", "both")
    )
    policy = Seen(PilotPolicy())
    writer = RunWriter(tmp_path / "run", video_fps=None)
    episode = Episode(env, policy, EpisodeConfig(**cfg), writer=writer)
    result = episode.run(20001)
    return result, policy.seen, episode.messages, tmp_path / "run" / "episode.jsonl"


def test_turn_5_with_history_2_gets_two_full_turns_and_older_ones_as_one_line(tmp_path):
    result, seen, full, log = fly(tmp_path, history=2)
    assert result.success and result.history == 2 and result.history_older == "line"
    at5 = seen[4]
    assert at5[0] == full[0]  # the briefing
    for n in (1, 2):  # turns 1-2: one line each, the compact row and the action as JSON
        user, reply = at5[2 * n - 1], at5[2 * n]
        assert user == {"role": "user", "content": full[2 * n - 1]["_line"]}
        assert user["content"].startswith("t=") and "\n" not in user["content"]
        assert reply["content"] == json.dumps(json.loads(reply["content"]), separators=(",", ":"))
        assert "```" not in reply["content"]
    assert at5[5:9] == full[5:9]  # turns 3 and 4, in full
    assert at5[9] == full[9] and len(at5) == 10  # turn 5's observation
    assert "telemetry t_s=" in at5[9]["content"]
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    header = lines[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert header["history"] == 2 and header["history_older"] == "line" and summary["history"] == 2
    assert all(t["line"].startswith("t=") for t in lines if t.get("kind") == "turn")


def test_drop_sends_the_briefing_the_window_and_the_turn(tmp_path):
    _, seen, full, _ = fly(tmp_path, history=1, history_older="drop")
    assert seen[4] == [full[0], *full[7:10]]
    # the HTTP client sends the same messages (private keys dropped, strings kept)
    body = wire_messages(seen[4], None)
    assert body == [{"role": m["role"], "content": m["content"]} for m in seen[4]]


def test_without_a_window_every_turn_is_sent_append_only(tmp_path):
    result, seen, full, _ = fly(tmp_path)
    assert result.history is None
    for n, msgs in enumerate(seen):
        assert msgs == full[: 2 * n + 2]


def test_a_compact_flight_sends_integer_rows_and_bare_json_and_lands(tmp_path):
    result, _, full, log = fly(tmp_path, observation="compact")
    assert result.success and result.observation == "compact"
    assert "stunt: ramp_flip" in full[0]["content"] and len(full[0]["content"]) < 1400
    users = [m["content"] for m in full if m["role"] == "user"]
    assert all(u.startswith("t=") and "\n" not in u and "cmd" not in u for u in users)  # no echo
    replies = [m["content"] for m in full if m["role"] == "assistant"]
    assert all(r.startswith("{") and r.endswith("}") for r in replies)
    header = json.loads(log.read_text().splitlines()[0])
    assert header["observation"] == "compact"


def test_loop_settings_are_typed_and_checked():
    with pytest.raises(ValueError, match="--history must be an integer >= 0"):
        EpisodeConfig(history=-1)
    with pytest.raises(ValueError, match="--history-older"):
        EpisodeConfig(history=2, history_older="summary")
    with pytest.raises(ValueError, match="observation must be one of"):
        EpisodeConfig(observation="tiny")


def test_bench_loop_options_carry_the_window_only_when_set():
    """A bench's identity gains the window only when one is set: benches recorded before it resume."""
    from pear_agent.cli import build_parser
    from pear_agent.cli.loop_options import loop_options_from_args

    parser = build_parser()
    plain = loop_options_from_args(parser.parse_args(["bench", "--tasks", "pick_cube"]))
    assert "history" not in plain and "history_older" not in plain
    args = parser.parse_args(["bench", "--tasks", "pick_cube", "--history", "2", "--history-older", "drop"])
    windowed = loop_options_from_args(args)
    assert windowed["history"] == 2 and windowed["history_older"] == "drop"
    assert EpisodeConfig(**windowed).history == 2
