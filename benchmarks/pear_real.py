"""The PEAR paper's real-robot protocol in simulation (`bench --preset pear_real`): the scripted
expert in process, and the same expert as a served model (`pear-agent serve`, HTTP, the openai
client), then `compare` pairing the two runs trial by trial.

    PEAR_BENCH_TAG=issue28 .venv/bin/python benchmarks/pear_real.py [--workers 2] [--no-served]

Per run: the 30 result lines (task, seed, success, turns, end reason, token cap), the paper's table
(per task group, total, 95% Wilson interval) and the comparison.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine

from pear_agent.bench import pear_real
from pear_agent.bench.compare import compare

KEEP = ("task", "seed", "success", "turns", "end_reason", "reasoning_token_cap", "max_turns", "policy")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bench(out: Path, workers: int, extra: list[str]) -> list[dict[str, Any]]:
    cmd = [sys.executable, "-m", "pear_agent", "bench", "--preset", "pear_real", "--no-video", "--quiet"]
    cmd += ["--workers", str(workers), "--out", str(out), *extra]
    subprocess.run(cmd, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]
    return sorted(lines, key=lambda r: (r["task"], r["seed"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-served", action="store_true", help="only the in-process expert")
    args = ap.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        runs["expert"] = _bench(Path(tmp) / "expert", args.workers, [])
        wall = {"expert": time.perf_counter() - t0}
        if not args.no_served:
            port = _free_port()
            server = subprocess.Popen(
                [sys.executable, "-m", "pear_agent", "serve", "--port", str(port)],
                cwd=REPO_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                time.sleep(3.0)
                t0 = time.perf_counter()
                url = f"http://127.0.0.1:{port}/v1"
                model = ["--base-url", url, "--model", "expert", "--send-privileged"]
                runs["served"] = _bench(Path(tmp) / "served", args.workers, model)
                wall["served"] = time.perf_counter() - t0
            finally:
                server.terminate()
                server.wait(10)
            comparison = compare(Path(tmp) / "expert", Path(tmp) / "served")
        else:
            comparison = None
    tables = {name: pear_real.table(lines) for name, lines in runs.items()}
    rows = []
    for name, table in tables.items():
        for group, row in table.items():
            lo, hi = row["ci95"]
            rows.append((name, group, f"{row['successes']}/{row['trials']}", f"[{lo:.2f}, {hi:.2f}]"))
    emit(
        "pear_real",
        {
            "machine": machine(),
            "tables": tables,
            "wall_s": wall,
            "compare": comparison,
            "trials": {name: [{k: r.get(k) for k in KEEP} for r in lines] for name, lines in runs.items()},
        },
        rows,
        ("run", "task group", "success", "95% Wilson CI"),
    )


if __name__ == "__main__":
    main()
