"""Recorded episodes as training examples: a run folder's log gives back the conversation."""

from __future__ import annotations

import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.records.log import RunWriter
from pear_agent.train.data import load_examples
from sim_adapters.roadster.environment import RoadsterEnvironment
from sim_adapters.roadster.pilot import PilotPolicy


def test_run_and_bench_folders_give_back_the_conversation(tmp_path):
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    episode = Episode(
        env, PilotPolicy(), EpisodeConfig(), RunWriter(tmp_path / "bench" / "ep1", video_fps=None)
    )
    result = episode.run(3)
    [ex] = load_examples([tmp_path / "bench"])  # a folder of run folders, as bench writes them
    assert ex.messages == episode.messages
    assert ex.success == result.success and ex.task == "roadster_ramp_flip:light" and ex.seed == 3
    assert ex.traces == [None] * result.turns  # the scripted pilot samples no tokens


def test_a_folder_without_episodes_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match=r"no episode\.jsonl or trajectories\.jsonl"):
        load_examples([tmp_path])
    with pytest.raises(FileNotFoundError, match="no recorded episodes at"):
        load_examples([tmp_path / "missing"])


def test_expert_rows_can_carry_the_executed_clipped_action(tmp_path):
    import json

    from pear_agent.loop.registry import make_backend
    from pear_agent.loop.task_experts import scripted_policy
    from pear_agent.protocol.actions import parse_reply
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    robot = load_robot("panda")
    backend = make_backend("pick_cube", robot, render=False)
    try:
        writer = RunWriter(tmp_path / "run", video_fps=None)
        cfg = EpisodeConfig(observation="state", max_turns=4)
        arm_episode(backend, Kinematics(robot), scripted_policy("pick_cube"), cfg, writer).run(0)
    finally:
        backend.close()
    turns = [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]
    executed = [t["executed"] for t in turns if t.get("kind") == "turn" and t.get("executed")]
    [ex] = load_examples([tmp_path / "run"], executed_actions=True)
    replies = [m["content"] for m in ex.messages if m["role"] == "assistant"]
    assert executed and len(replies) >= len(executed)
    for reply, done in zip(replies, executed, strict=False):
        got = parse_reply(reply, robot).to_json()["action"]
        for part, q in done.items():
            for key in ("move_cm", "turn_rad"):
                if key in q:
                    assert got[part][key] == pytest.approx(q[key], abs=1e-6)
