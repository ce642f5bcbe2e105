"""Does time matter? The same policy on a dynamic task, paused vs realtime with an injected decision
latency, with 95% Wilson intervals and an exact McNemar test on the shared seeds.

    .venv/bin/python benchmarks/realtime_vs_paused.py [--task conveyor_pick] [--episodes 50]
        [--latencies 0.2,0.5,2] [--split test] [--workers 1]

Default: the scripted expert on conveyor_pick, 50 test-split seeds, paused and realtime at 0.2, 0.5
and 2 s per decision (no rendering; about a minute on 2 cores). A table goes to stderr, one
JSON object to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pear_agent.bench.compare import compare
from pear_agent.bench.report import summarize
from pear_agent.bench.runner import BenchConfig, run_bench, split_seeds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="conveyor_pick")
    ap.add_argument("--episodes", type=int, default=50)
    ap.add_argument("--split", default="test")
    ap.add_argument("--latencies", default="0.2,0.5,2", help="injected realtime latencies, seconds")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args()
    seeds = split_seeds(args.split, args.episodes)
    settings = [("paused", None)] + [("realtime", float(x)) for x in args.latencies.split(",") if x]
    rows, dirs = [], {}
    with tempfile.TemporaryDirectory(prefix="pear-rt-") as tmp:
        for mode, lat in settings:
            name = "paused" if mode == "paused" else f"realtime+{lat:g}s"
            out = Path(tmp) / name
            t0 = time.perf_counter()
            cfg = BenchConfig(
                tasks=[args.task],
                seeds=seeds,
                policy={"kind": "scripted"},
                out_dir=str(out),
                split=args.split,
                mode=mode,
                latency_s=lat,
                workers=args.workers,
                video=False,
                render=False,
            )
            res = run_bench(cfg, progress=False)
            row = summarize(res)[0] | {"setting": name, "wall_s": time.perf_counter() - t0}
            row["sim_time_mean_s"] = sum(r["sim_time_s"] for r in res) / len(res)
            rows.append(row)
            dirs[name] = out
        paired = {name: compare(dirs["paused"], d) for name, d in dirs.items() if name != "paused"}
    print(f"{args.task}, scripted expert, {args.split} seeds {seeds[0]}..{seeds[-1]}", file=sys.stderr)
    print(
        f"{'setting':<18s} {'success':>9s} {'rate':>6s} {'95% Wilson CI':>15s} {'turns':>6s} "
        f"{'McNemar p':>10s}",
        file=sys.stderr,
    )
    for r in rows:
        lo, hi = r["ci95"]
        p = paired.get(r["setting"], {}).get("mcnemar_p")
        print(
            f"{r['setting']:<18s} {r['successes']:>4d}/{r['episodes']:<4d} {r['success_rate']:>6.2f} "
            f"{f'[{lo:.2f}, {hi:.2f}]':>15s} {r['mean_turns']:>6.1f} {'-' if p is None else f'{p:.2g}':>10s}",
            file=sys.stderr,
        )
    print(
        json.dumps(
            {
                "task": args.task,
                "split": args.split,
                "seeds": [seeds[0], seeds[-1]],
                "rows": rows,
                "mcnemar_vs_paused": {k: v["mcnemar_p"] for k, v in paired.items()},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
