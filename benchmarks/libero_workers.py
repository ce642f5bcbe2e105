"""LIBERO results are a function of task, init state and seed: the scripted expert through
`pear-agent bench`, once with `--workers 1` and once with `--workers 2`, on libero_10 task 9 (the
microwave, a fixture LIBERO places at every reset) init states 0-5 and on one task of every other
suite. Every episode's replies (and prompts) must be byte-identical between the two benches, and
its outcome the same.

    PYTHONPATH=$PWD .venv-libero/bin/python benchmarks/libero_workers.py [--inits 0-5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import REPO_ROOT, emit, machine, verdict

OTHER_SUITES = {"libero_spatial": "0", "libero_object": "0", "libero_goal": "0"}


def bench(out: Path, suite: str, tasks: str, seeds: str, workers: int) -> float:
    """One `pear-agent bench` in its own process (as a user runs it); its wall time."""
    cmd = [sys.executable, "-m", "pear_agent", "bench", "--suite", suite, "--suite-tasks", tasks]
    cmd += ["--seeds", seeds, "--workers", str(workers), "--no-video", "--quiet", "--out", str(out)]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)  # stdout: our JSON only
    return time.monotonic() - t0


def episodes(out: Path) -> dict[str, dict[str, Any]]:
    """task/seed -> outcome and the sha256 of its replies and of its prompts, turn by turn."""
    rows = {}
    for line in (out / "results.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows[f"{r['task']}#{r['seed']}"] = r
    found: dict[str, dict[str, Any]] = {}
    for log in out.glob("episodes/*/episode.jsonl"):
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        head = next(x for x in lines if x.get("kind") == "header" or "seed" in x)
        turns = [x for x in lines if x.get("kind") == "turn"]
        key = f"{head.get('task')}#{head.get('seed')}"
        replies = json.dumps([t.get("reply") for t in turns]).encode()
        prompts = json.dumps([t.get("prompt") for t in turns]).encode()
        r = rows[key]
        found[key] = {
            "success": r["success"],
            "end_reason": r["end_reason"],
            "turns": r["turns"],
            "replies_sha256": hashlib.sha256(replies).hexdigest(),
            "prompts_sha256": hashlib.sha256(prompts).hexdigest(),
            "first_reply": turns[0].get("reply") if turns else None,
        }
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inits", default="0-5", help="init states of libero_10/9")
    args = ap.parse_args()
    runs: dict[int, dict[str, dict[str, Any]]] = {}
    wall: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="pear_libero_workers_") as d:
        for workers in (1, 2):
            found: dict[str, dict[str, Any]] = {}
            wall[workers] = 0.0
            jobs = [("libero_10", "9", args.inits)] + [(s, t, "0") for s, t in OTHER_SUITES.items()]
            for suite, tasks, seeds in jobs:
                out = Path(d) / f"w{workers}-{suite}"
                wall[workers] += bench(out, suite, tasks, seeds, workers)
                found |= episodes(out)
            runs[workers] = found
    keys = sorted(runs[1])
    same_replies = [
        k for k in keys if runs[2].get(k, {}).get("replies_sha256") == runs[1][k]["replies_sha256"]
    ]
    same_prompts = [
        k for k in keys if runs[2].get(k, {}).get("prompts_sha256") == runs[1][k]["prompts_sha256"]
    ]
    same_outcome = [
        k
        for k in keys
        if k in runs[2]
        and (runs[2][k]["success"], runs[2][k]["end_reason"], runs[2][k]["turns"])
        == (runs[1][k]["success"], runs[1][k]["end_reason"], runs[1][k]["turns"])
    ]
    ok = (
        len(keys) > 0 and set(runs[1]) == set(runs[2]) and len(same_replies) == len(same_outcome) == len(keys)
    )
    result = {
        "episodes": len(keys),
        "identical_replies": len(same_replies),
        "identical_prompts": len(same_prompts),
        "same_outcome": len(same_outcome),
        "successes": {w: sum(r["success"] for r in runs[w].values()) for w in runs},
        "wall_s": wall,
        "per_episode": {w: runs[w] for w in runs},
        "verdict": verdict(ok),
        "machine": machine(),
    }
    rows = [
        [k, f"{runs[1][k]['end_reason']} ({runs[1][k]['turns']})",
         f"{runs[2].get(k, {}).get('end_reason')} ({runs[2].get(k, {}).get('turns')})",
         "yes" if k in same_replies else "NO"]
        for k in keys
    ]  # fmt: skip
    rows.append(["verdict (replies identical, outcomes equal)", result["verdict"], "", ""])
    emit(
        "libero_workers",
        result,
        rows,
        ["episode", "--workers 1 (turns)", "--workers 2 (turns)", "same replies"],
    )
    sys.exit(0)


if __name__ == "__main__":
    main()
