"""Infrastructure faults are not model failures. Against a model server that misbehaves
in a process of its own (tests/fault_server.py: HTTP 500s and 429s, streams cut mid-way, stream
events that are not JSON, hangs past the timeout) and through the real openai client: a garbage
event is retried like a cut stream and named in plain words when retries run out; an episode that
ends because the endpoint failed after its retries ends `endpoint_error`, is left out of the success
rate and its interval (counted apart), is run again by a resumed bench (unless
--keep-endpoint-errors), and `compare` pairs only episodes both runs completed."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from pear_agent.bench.compare import compare
from pear_agent.bench.report import format_table, scored, summarize
from pear_agent.bench.runner import BenchConfig, read_results, run_bench
from pear_agent.policies.base import TurnContext
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy
from tests.servers import free_port

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]
CTX = TurnContext(turn=1, task="pick_cube", state={}, observation=None)
ISSUE_MIX = [
    *("ok", "500", "ok", "429", "ok", "garbage", "ok", "cut", "ok", "500"),
    *("ok", "hang", "ok", "429", "ok", "ok", "ok", "ok", "ok", "ok"),
]
"""20 requests: 10 % HTTP 500, 10 % 429, 5 % cut streams, 5 % garbage events, 5 % hangs (the
issue's server), interleaved with good replies, cycled over the requests in arrival order."""
TIMEOUT_S = 30.0
"""The client's timeout where a hang is not the fault under test: far above a good reply's time
with 16 episodes served by one expert process on a loaded machine (2 s cut good replies short there
and ended them `endpoint_error`)."""
HANG_S, HANG_TIMEOUT_S = 24.0, 6.0
"""A hang outlasts the client's timeout four times over, and that timeout still holds a good reply
on a loaded machine: a timeout is the hang's, not the load's."""


@contextmanager
def fault_server(
    faults: list[str], port: int | None = None, hang_s: float = HANG_S
) -> Iterator[tuple[str, Path]]:
    """tests/fault_server.py in its own process; yields (base URL, its stats file)."""
    port = port or free_port()
    stats = Path(f"/tmp/pear_fault_stats_{port}.json")
    stats.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "tests.fault_server", "--port", str(port), "--faults", ",".join(faults)]
    proc = subprocess.Popen(
        [*cmd, "--hang-s", str(hang_s), "--stats", str(stats)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:] if proc.stderr else ""
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline, "the fault server did not start within 60 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1", stats
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _settings(url: str, **extra: Any) -> ModelSettings:
    base = {
        "model": "expert",
        "base_url": url,
        "send_privileged": True,
        "timeout_s": TIMEOUT_S,
        "max_retries": 6,
        "backoff_s": 0.05,
        "backoff_max_s": 0.2,
    }
    return ModelSettings(**(base | extra))


def _bench(out: Path, url: str, seeds: int, **settings: Any) -> BenchConfig:
    return BenchConfig(
        ["pick_cube"],
        list(range(seeds)),
        {"kind": "openai", "settings": asdict(_settings(url, **settings))},
        str(out),
        concurrency=seeds,  # every episode in flight at once, on one event loop
        video=False,
        render=False,
        max_turns=3,
    )


def test_a_garbage_event_is_a_transport_fault_retried_and_named_when_retries_run_out() -> None:
    with fault_server(["garbage"]) as (url, stats):
        policy = OpenAIPolicy(_settings(url, max_retries=2, send_privileged=False))
        reply = policy.act([{"role": "user", "content": "move"}], CTX)
    assert reply.error is not None
    assert reply.error.startswith("the server sent a stream event that is not JSON: '{not json'"), reply.error
    assert reply.error.endswith("after 3 attempts") and "JSONDecodeError" not in reply.error
    assert reply.info["end_reason"] == "endpoint_error"
    assert json.loads(stats.read_text())["garbage"] == 3  # asked three times: two retries


def test_a_garbage_event_then_a_good_reply_is_a_reply() -> None:
    with fault_server(["garbage", "cut", "ok"]) as (url, _stats):
        policy = OpenAIPolicy(_settings(url, send_privileged=False))
        reply = policy.act([{"role": "user", "content": "open the gripper"}], CTX)
    first, second, third = (a.get("error", "") for a in reply.info["attempts"])
    assert first.startswith("the server sent a stream event that is not JSON"), first
    assert second.startswith("the stream was cut before its end"), second
    # the third attempt reached the expert behind the faults: it answers (HTTP 400, no simulator
    # facts in this request), a final answer, not retried
    assert third.startswith("HTTP 400") and reply.error and reply.info.get("end_reason") is None


def test_sixteen_episodes_in_flight_against_a_misbehaving_server(tmp_path) -> None:
    """The issue's server (10 % 500, 10 % 429, 5 % cut, 5 % garbage, 5 % hangs) with 16 episodes in
    flight: every episode recorded once, none ends on a fault a retry would have passed."""
    with fault_server(ISSUE_MIX, hang_s=HANG_S) as (url, stats):
        recs = run_bench(_bench(tmp_path / "bench", url, 16, timeout_s=HANG_TIMEOUT_S), progress=False)
        seen = json.loads(stats.read_text())
    keys = [r["key"] for r in read_results(tmp_path / "bench" / "results.jsonl")]
    assert sorted(keys) == sorted(f"pick_cube/s{s}" for s in range(16))  # each exactly once
    lines = (tmp_path / "bench" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 16
    assert all(seen[k] >= 1 for k in ("500", "429", "cut", "garbage", "hang")), seen
    for r in recs:
        assert r["end_reason"] != "policy_error", r  # no fault ends an episode as the model's
        if r["end_reason"] == "endpoint_error":  # only once every retry failed
            log = [
                json.loads(x)
                for x in (tmp_path / "bench" / r["run_dir"] / "episode.jsonl").read_text().splitlines()
            ]
            last = [x for x in log if x.get("error")][-1]
            assert len(last["policy_info"]["attempts"]) == 7, last
    assert sum(r["turns"] for r in recs) > 0 and sum(int(r.get("retries") or 0) for r in recs) > 0


def test_endpoint_errors_are_not_scored_and_a_resume_runs_them_again(tmp_path) -> None:
    out = tmp_path / "bench"
    port = free_port()
    with fault_server(["500"], port=port) as (url, _stats):  # the endpoint is down
        recs = run_bench(_bench(out, url, 16, max_retries=1), progress=False)
    assert len(recs) == 16 and {r["end_reason"] for r in recs} == {"endpoint_error"}
    assert all("HTTP 500: injected HTTP 500 after 2 attempts" in r["detail"] for r in recs), recs[0]["detail"]
    (row,) = summarize(recs)
    assert (row["episodes"], row["successes"], row["not_scored"], row["ci95"]) == (0, 0, 16, [0.0, 1.0])
    table = format_table([row])
    assert "0/0" in table and "not scored: endpoint_error:16" in table and "runs them again" in table
    # kept when the user asks (nothing runs: the endpoint is not even up)
    cfg = _bench(out, url, 16, max_retries=1)
    assert len(run_bench(cfg, progress=False, keep_endpoint_errors=True)) == 16
    with fault_server(["ok"], port=port) as (url2, _stats):  # the endpoint is back
        assert url2 == url  # the same bench: the endpoint is part of its identity
        again = run_bench(_bench(out, url, 16, max_retries=1), progress=False)
    assert len(again) == 16 and not [r["detail"] for r in again if r["end_reason"] == "endpoint_error"]
    assert len(read_results(out / "results.jsonl")) == 16  # each episode once, its last result standing
    assert len((out / "results.jsonl").read_text().splitlines()) == 32  # the file keeps both
    (row,) = summarize(again)
    assert row["episodes"] == 16 and row["not_scored"] == 0


def test_compare_pairs_only_episodes_both_runs_completed(tmp_path) -> None:
    def write(name: str, rows: list[tuple[int, bool, str]]) -> Path:
        d = tmp_path / name
        d.mkdir()
        lines = [
            json.dumps({"key": f"t/s{s}", "task": "t", "seed": s, "success": ok, "end_reason": why})
            for s, ok, why in rows
        ]
        (d / "results.jsonl").write_text("\n".join(lines) + "\n")
        return d

    a = write(
        "a",
        [(0, True, "success"), (1, True, "success"), (2, False, "endpoint_error"), (3, False, "turn_limit")],
    )
    b = write(
        "b",
        [(0, False, "turn_limit"), (1, False, "endpoint_error"), (2, True, "success"), (3, True, "success")],
    )
    c = compare(a, b)
    assert c["shared"] == 2 and c["not_completed_by_both"] == 2
    assert (c["a_only_success"], c["b_only_success"]) == (1, 1)
    assert scored(read_results(a / "results.jsonl")) == [
        r for r in read_results(a / "results.jsonl") if r["seed"] != 2
    ]
