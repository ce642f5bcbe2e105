"""How an agent_node episode ends: its exit code, and a `summary.json` with the same fields and true
counts on every ending (success, failure, stop, refusal, Ctrl-C, SIGTERM, a crash).

The loop writes the summary when it finishes an episode; when it cannot (a signal or a crash in the
middle of a turn, a refusal before the first one), the counts are rebuilt from `episode.jsonl`,
which the loop flushes turn by turn, so the summary never contradicts the log.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pear_agent.loop.episode import EpisodeResult, latency_summary

EXIT_SUCCESS, EXIT_FAILURE, EXIT_CONFIG, EXIT_STOPPED = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 130, 143
"""128 + the signal's number, as a shell reports a process ended by it."""

STOPPED_ENDINGS = ("stopped", "refused")
AGENT_ENDINGS = ("interrupted", "configuration")
"""end_reason values only agent_node writes (the loop's are pear_agent.loop.episode.END_REASONS)."""


def exit_code(success: bool, end_reason: str, signal_name: str = "") -> int:
    """The documented table: 0 success, 1 failure, 2 configuration, 3 stopped or refused, 130 / 143
    interrupted by SIGINT / SIGTERM."""
    if success:
        return EXIT_SUCCESS
    if end_reason in STOPPED_ENDINGS:
        return EXIT_STOPPED
    if end_reason == "configuration":
        return EXIT_CONFIG
    if end_reason == "interrupted":
        return EXIT_SIGTERM if signal_name == "SIGTERM" else EXIT_SIGINT
    return EXIT_FAILURE


def _records(log_path: Path) -> list[dict[str, Any]]:
    if not log_path.is_file():
        return []
    out = []
    for line in log_path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by a crash mid-write
            continue
    return out


def result_from_log(log_path: Path, end_reason: str, detail: str, **fields: Any) -> Any:
    """An EpisodeResult for an episode the loop did not finish: turns, decision times, invalid
    replies, policy failures and tokens counted from the turns logged so far (a turn in flight when
    the episode ended is not in the log and is not counted)."""

    result = EpisodeResult(False, 0, end_reason, detail, **fields)  # type: ignore[arg-type]
    for rec in _records(log_path):
        if rec.get("kind") == "header":
            for key in ("policy", "mode", "observation", "scene_facts", "max_invalid"):
                if key in rec:
                    setattr(result, key, rec[key])
            continue
        if rec.get("kind") != "turn" or "reply" not in rec:
            continue
        usage = rec.get("usage") or {}
        result.prompt_tokens += int(usage.get("prompt_tokens", 0))
        result.completion_tokens += int(usage.get("completion_tokens", 0))
        if "outcome" not in rec:  # no reply came (a failed request): not a turn
            result.policy_failures += 1
            result.failed_latencies_s.append(float(rec.get("latency_s") or 0.0))
            continue
        result.turns = int(rec["turn"])
        result.latencies_s.append(float(rec.get("latency_s") or 0.0))
        if (rec.get("outcome") or {}).get("status") == "invalid":
            result.invalid_replies += 1
        result.sim_time_s = float(rec.get("sim_time_s") or result.sim_time_s)
    return result


def summary_fields(result: Any) -> dict[str, Any]:
    """The loop's summary: the EpisodeResult's fields and the decision-time figures."""

    return result.to_json() | latency_summary(result)


def write_summary(
    writer: Any, result: Any, operator: dict[str, Any] | None, loop_finished: bool
) -> dict[str, Any]:
    """summary.json with every field on every ending: the loop's fields, `operator` (who judged, or
    null) and `video` (the mp4's path, or null). `writer` is the episode's RunWriter; when the loop did
    not finish the episode, its video frames so far are encoded here first."""
    if not loop_finished:
        writer.finish(summary_fields(result))
    path = Path(writer.run_dir) / "summary.json"
    on_disk: dict[str, Any] = {}
    if path.is_file():
        try:
            on_disk = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            on_disk = {}
    summary = (
        on_disk | summary_fields(result) | {"run_dir": str(writer.run_dir), "operator": operator or None}
    )
    video = Path(writer.run_dir) / "episode.mp4"
    summary["video"] = str(video) if video.is_file() else None
    path.write_text(writer.redact(json.dumps(summary, indent=2, default=_plain)), encoding="utf-8")
    return summary


def _plain(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.floating | np.integer):
        return obj.item()
    return str(obj)
