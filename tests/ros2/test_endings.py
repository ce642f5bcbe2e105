"""agent_node's endings without ROS: the exit-code table, and a summary rebuilt from the log the loop
flushed (true counts after a signal or a crash) with the same fields as one the loop wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pear_agent.loop.episode import EpisodeResult, latency_summary
from pear_agent.records.log import RunWriter
from pear_agent.ros2.endings import exit_code, result_from_log, summary_fields, write_summary


@pytest.mark.parametrize(
    ("success", "reason", "signal_name", "code"),
    [
        (True, "done", "", 0),
        (False, "done", "", 1),
        (False, "turn_limit", "", 1),
        (False, "policy_error", "", 1),
        (False, "error", "", 1),
        (False, "configuration", "", 2),
        (False, "stopped", "", 3),
        (False, "refused", "", 3),
        (False, "interrupted", "SIGINT", 130),
        (False, "interrupted", "SIGTERM", 143),
    ],
)
def test_exit_codes(success: bool, reason: str, signal_name: str, code: int) -> None:
    assert exit_code(success, reason, signal_name) == code


def _log(path: Path) -> None:
    rows = [
        {"kind": "header", "policy": "openai", "mode": "realtime", "observation": "state", "max_invalid": 2},
        {"kind": "images", "time_s": 0.1},
        {
            "kind": "turn",
            "turn": 1,
            "reply": "...",
            "latency_s": 1.5,
            "usage": {"prompt_tokens": 100, "completion_tokens": 20},
            "outcome": {"status": "reached"},
            "sim_time_s": 2.0,
        },
        {"kind": "turn", "turn": 2, "reply": "no json", "latency_s": 0.5, "outcome": {"status": "invalid"}},
        {"kind": "turn", "turn": 3, "reply": "", "latency_s": 9.0, "error": "timeout"},  # no reply came
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"kind": "turn", "tur')  # cut mid-write


def test_counts_come_from_the_log_the_loop_flushed(tmp_path: Path) -> None:
    _log(tmp_path / "episode.jsonl")
    res = result_from_log(tmp_path / "episode.jsonl", "interrupted", "SIGTERM", task="t", robot="r", seed=3)
    assert res.turns == 2 and res.latencies_s == [1.5, 0.5] and res.invalid_replies == 1
    assert res.policy_failures == 1 and res.failed_latencies_s == [9.0]
    assert res.prompt_tokens == 100 and res.completion_tokens == 20
    assert (res.policy, res.mode, res.observation, res.max_invalid) == ("openai", "realtime", "state", 2)
    assert res.sim_time_s == pytest.approx(2.0) and res.end_reason == "interrupted"


def test_no_log_is_zero_turns(tmp_path: Path) -> None:
    res = result_from_log(tmp_path / "missing.jsonl", "refused", "no joint states", task="t")
    assert res.turns == 0 and res.latencies_s == [] and res.detail == "no joint states"


def test_every_ending_writes_the_fields_of_a_finished_episode(tmp_path: Path) -> None:
    finished = EpisodeResult(True, 4, "done", "the model declared the task done", task="t", robot="r")
    loop_dir, cut_dir = tmp_path / "loop", tmp_path / "cut"
    loop = RunWriter(loop_dir, video_fps=None)
    loop.finish(finished.to_json() | latency_summary(finished))  # as Episode.run does
    a = write_summary(loop, finished, {"success": True, "by": "the terminal", "end_reason": "done"}, True)
    cut = RunWriter(cut_dir, video_fps=None)
    _log(cut.log_path)
    b = write_summary(
        cut, result_from_log(cut.log_path, "interrupted", "SIGINT sk-secret123456789"), None, False
    )
    assert set(a) == set(b) == set(summary_fields(finished)) | {"operator", "video"}
    assert (
        a["operator"]["by"] == "the terminal" and b["operator"] is None and a["video"] is b["video"] is None
    )
    on_disk = json.loads((cut_dir / "summary.json").read_text())
    assert on_disk["turns"] == 2 and on_disk["decisions"] == 2 and "sk-secret" not in json.dumps(on_disk)
