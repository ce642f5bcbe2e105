"""Replay of recorded episodes, and of logs recorded with protocol v1 (an earlier wire format)."""

import json
from pathlib import Path

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.protocol.convert_v1 import convert_log, convert_reply, main
from pear_agent.records.log import RunWriter

V1_LOG = Path(__file__).parent / "data" / "v1_pick_cube_s0.jsonl"
"""A real v1 log: the scripted expert on pick_cube seed 0, recorded by the pre-issue-13 runtime."""


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def test_a_recorded_episode_replays_to_the_same_end(backend, panda_kin, tmp_path) -> None:
    first = arm_episode(
        backend, panda_kin, scripted_policy("pick_cube"), writer=RunWriter(tmp_path / "a", None)
    ).run(3)
    log = tmp_path / "a" / "episode.jsonl"
    assert json.loads(log.read_text().splitlines()[0])["protocol"] == 2
    again = arm_episode(backend, panda_kin, ReplayPolicy(log)).run(3)
    assert (
        again.success and again.turns == first.turns and again.sim_time_s == pytest.approx(first.sim_time_s)
    )


def test_a_v1_log_is_refused_with_the_way_to_convert_it() -> None:
    with pytest.raises(ValueError, match="protocol v1") as exc:
        ReplayPolicy(V1_LOG)
    assert "python -m pear_agent.protocol.convert_v1" in str(exc.value)


def test_a_converted_v1_log_replays_as_it_ran(backend, panda_kin, tmp_path, capsys) -> None:
    out = tmp_path / "v2.jsonl"
    assert main([str(V1_LOG), str(out)]) == 0 and "9 replies converted" in capsys.readouterr().out
    header = json.loads(out.read_text().splitlines()[0])
    assert header["protocol"] == 2 and header["converted_from_protocol"] == 1
    recorded = [json.loads(x) for x in V1_LOG.read_text().splitlines()][1:]
    res = arm_episode(backend, panda_kin, ReplayPolicy(out)).run(0)
    assert res.success and res.turns == len(recorded) == 9  # the same episode, step for step


def test_convert_reply_keeps_the_reasoning_and_leaves_non_actions_alone() -> None:
    new = convert_reply('Lower.\n```json\n{"arm": {"position": [0, 0, -2], "gripper": 0}}\n```')
    assert new is not None and new.startswith("Lower.")
    assert '{"action": {"arm": {"move_cm": [0, 0, -2], "gripper": 0}}}' in new
    assert convert_reply("no idea") is None and convert_reply('{"action": {"arm": {}}}') is None
    assert main(["only-one-arg"]) == 2


def test_convert_log_refuses_a_missing_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        convert_log(tmp_path / "nope.jsonl", tmp_path / "out.jsonl")
    assert main([str(tmp_path / "nope.jsonl"), str(tmp_path / "out.jsonl")]) == 2


def test_invalid_and_empty_replies_replay_in_their_turns(backend, panda_kin, tmp_path) -> None:
    from tests.loop.test_episode import ListPolicy

    script = [
        "",
        '{"action": {"arm": {"move_cm": [0, 0, 1]}}}',
        "no idea",
        '{"action": {"arm": {"gripper": 0}}}',
    ]
    writer = RunWriter(tmp_path / "a", None)
    first = arm_episode(backend, panda_kin, ListPolicy(script), EpisodeConfig(max_turns=4), writer).run(0)
    assert first.invalid_replies == 2 and first.turns == 4
    log = tmp_path / "a" / "episode.jsonl"
    replayed = []

    class Spy(ReplayPolicy):
        def act(self, messages, ctx):
            reply = super().act(messages, ctx)
            replayed.append(reply.text)
            return reply

    again = arm_episode(backend, panda_kin, Spy(log), EpisodeConfig(max_turns=4)).run(0)
    assert (
        replayed == script
        and again.invalid_replies == 2
        and again.sim_time_s == pytest.approx(first.sim_time_s)
    )
