"""agent_node's endings against the strict stand-in for a stock ros2_control stack (jtc_double.py),
each in its own process over real DDS: the operator is asked only at the end of a task attempt;
SIGTERM while waiting for an instruction and Ctrl-C mid-episode leave a summary with the documented
fields and the log's counts; an e-stop closes an open question; video frames come at the stated
rate while the arms move, whatever the camera's rate."""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.ros2.conftest import double_config
from tests.ros2.doc_commands import exit_table, summary_fields

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

AGENT = "pear_agent.ros2.agent_node"
UP = {"left_arm": {"move_cm": [0.0, 0.0, 2.0]}}
DOWN = {"left_arm": {"move_cm": [0.0, 0.0, -2.0]}}


def _replay(tmp_path: Path, replies: list[dict[str, Any]]) -> Path:
    """Shaped like a recorded episode.jsonl: one turn line per reply that made a turn (a bare part
    dict is the action of its reply)."""
    path = tmp_path / "replay.jsonl"
    lines = [
        {"kind": "turn", "turn": i + 1, "reply": json.dumps(r if "action" in r else {"action": r})}
        | {"outcome": {"status": "reached"}}
        for i, r in enumerate(replies)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _agent(start_node: Any, tmp_path: Path, replies: list[dict[str, Any]], **extra: Any) -> Any:
    params = {
        "policy": "replay",
        "replay_path": str(_replay(tmp_path, replies)),
        "instruction": "Move the left arm.",
        "task": "endings",
        "task_status_topic": "",
        "operator_terminal": False,
        "operator_timeout_s": 60.0,
        "max_turns": len(replies),
        "runs_dir": str(tmp_path / "runs"),
        "wait_for_joint_states_s": 20.0,
        "wait_for_controllers_s": 20.0,
        "wait_for_images_s": 20.0,
    } | extra
    return start_node(AGENT, "pear_agent", params)


def _summary(tmp_path: Path) -> dict[str, Any]:
    files = list((tmp_path / "runs").glob("*/summary.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def _logged_turns(summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (Path(summary["run_dir"]) / "episode.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, rows) if r.get("kind") == "turn" and "outcome" in r]


def _documented(summary: dict[str, Any], code: int) -> None:
    assert set(summary) == summary_fields(), set(summary) ^ summary_fields()
    assert summary["end_reason"] in exit_table()[code], (code, summary["end_reason"])
    assert summary["turns"] == len(_logged_turns(summary)) == len(summary["latencies_s"]), summary


def test_sigterm_while_waiting_for_an_instruction_still_writes_the_summary(
    tmp_path: Path, start_node, start_double, yam
) -> None:
    start_double(double_config(yam))
    agent = _agent(start_node, tmp_path, [UP], instruction="", instruction_timeout_s=300.0)
    deadline = time.monotonic() + 60
    while "waiting for an instruction" not in agent.log():
        assert time.monotonic() < deadline and agent.proc.poll() is None, agent.log()
        time.sleep(0.1)
    agent.proc.send_signal(signal.SIGTERM)
    assert agent.wait(20) == 143, agent.log()
    summary = _summary(tmp_path)
    _documented(summary, 143)
    assert summary["end_reason"] == "interrupted" and "SIGTERM" in summary["detail"]
    assert summary["turns"] == 0 and summary["success"] is False and summary["operator"] is None
    assert "Traceback" not in agent.log()


def test_a_policy_error_is_not_put_to_the_operator(tmp_path: Path, start_node, start_double, yam) -> None:
    """The replay has one reply for three turns: turn 2 is a policy error. No "success?" is asked
    (it would wait 60 s), no answer could turn it into a success, and it exits 1 at once."""
    start_double(double_config(yam))
    t0 = time.monotonic()
    agent = _agent(start_node, tmp_path, [UP], max_turns=3)
    assert agent.wait(50) == 1, agent.log()
    assert time.monotonic() - t0 < 50
    summary = _summary(tmp_path)
    _documented(summary, 1)
    assert summary["end_reason"] == "policy_error" and "only 1 replies" in summary["detail"]
    assert [t["outcome"]["status"] for t in _logged_turns(summary)] == ["reached"]
    assert summary["success"] is False and summary["operator"] is None and summary["judged"] is False
    assert "success?" not in agent.log() and "operator:" not in agent.log(), agent.log()


def test_ctrl_c_mid_episode_holds_and_counts_the_turns_logged(
    tmp_path: Path, start_node, start_double, probe, yam
) -> None:
    double = start_double(double_config(yam))
    agent = _agent(start_node, tmp_path, [UP, DOWN] * 10, replay_delay_s=0.4)
    probe.wait_for(lambda: len([e for e in probe.status if e.get("event") == "turn"]) >= 2, 60, "two turns")
    t_int = time.monotonic()
    agent.proc.send_signal(signal.SIGINT)
    assert agent.wait(20) == 130, agent.log()
    summary = _summary(tmp_path)
    _documented(summary, 130)
    assert summary["end_reason"] == "interrupted" and "SIGINT" in summary["detail"]
    assert 2 <= summary["turns"] < 20 and summary["decisions"] == summary["turns"]
    assert all(t["outcome"]["status"] == "reached" for t in _logged_turns(summary))
    stops = [e for e in double.trajectories() if e["t"] > t_int]
    per_controller = Counter(e["controller"] for e in stops)
    assert stops and set(per_controller.values()) == {1}, stops  # one stop each, nothing more
    assert all(e["accepted"] and not e["over_cap"] for e in stops), stops
    # a stop brakes to rest near where the arm was (docs/ros2.md): it never carries it on to a target
    assert all(max(abs(a - b) for a, b in zip(e["last"], e["actual"], strict=True)) < 0.3 for e in stops)


def test_an_estop_while_the_operator_is_asked_ends_it_stopped(
    tmp_path: Path, start_node, start_double, probe, yam
) -> None:
    start_double(double_config(yam))
    agent = _agent(start_node, tmp_path, [{"action": UP, "done": True}])
    probe.estop_subscribed()
    probe.wait_for(lambda: probe.event("question"), 60, "the success question")
    probe.estop_topic()
    assert agent.wait(20) == 3, agent.log()
    summary = _summary(tmp_path)
    _documented(summary, 3)
    assert summary["end_reason"] == "stopped" and "after the episode ended done" in summary["detail"]
    assert summary["operator"]["success"] is None and "not asked any more" in summary["operator"]["by"]
    answer = probe.wait_for(lambda: probe.event("answer"), 10, "the question's end")
    assert answer["answer"] is None


def test_video_frames_come_at_the_stated_rate_while_the_arms_move(
    tmp_path: Path, start_node, start_double, yam
) -> None:
    """Cameras at 2 Hz, video at 10 fps: the mp4 holds ~10 frames per second of motion (the last
    image repeated), so it plays the motion at its real speed."""
    import cv2

    big_down = {"left_arm": {"move_cm": [0.0, 0.0, -8.0]}}
    big_up = {"left_arm": {"move_cm": [0.0, 0.0, 8.0]}}
    start_double(double_config(yam, image_rate_hz=2.0))
    agent = _agent(
        start_node,
        tmp_path,
        [big_down, big_up],
        video_camera="top",
        video_fps=10.0,
        image_max_age_s=3.0,
        operator_timeout_s=1.0,
    )
    assert agent.wait(60) == 1, agent.log()  # the turn limit, nobody answered
    summary = _summary(tmp_path)
    moving_s = sum(float(t["outcome"]["duration_s"]) for t in _logged_turns(summary))
    video = cv2.VideoCapture(summary["video"])
    frames = int(video.get(cv2.CAP_PROP_FRAME_COUNT))
    fps = video.get(cv2.CAP_PROP_FPS)
    video.release()
    print(f"video: {frames} frames at {fps:g} fps for {moving_s:.2f} s of motion")
    assert fps == pytest.approx(10.0)
    assert moving_s > 1.0, "the moves were too short to tell"
    assert 0.8 * 10 * moving_s <= frames <= 10 * moving_s + 10, (frames, moving_s)
