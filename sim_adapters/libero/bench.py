"""LIBERO's side of `pear-agent bench --suite`: task names, init-state ranges, and the paper's layout.

Episodes run through the one bench runner (`pear_agent.bench.runner`: resume, workers, Ray, HTML
report, `compare`, end reasons); a LIBERO task is named `libero_spatial/0` and its init state is
the seed. This module only expands `--suite`/`--suite-tasks` and summarises the results per suite
with 95% Wilson intervals (`suites.json`). For convenience

    .venv-libero/bin/python -m sim_adapters.libero.bench --suite libero_spatial --tasks 0-9 --inits 0-4

is the same as `pear-agent bench --suite libero_spatial --suite-tasks 0-9 --seeds 0-4`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sim_adapters.libero import SUITES


def parse_range(text: str, limit: int, what: str) -> list[int]:
    """`0-9`, `3`, `0,2,5-7` -> indices, each below `limit`."""
    out: list[int] = []
    for chunk in text.split(","):
        a, _, b = chunk.strip().partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            raise ValueError(f"--{what} {text!r}: use N, N-M or a comma list of them")
        lo, hi = int(a), int(b or a)
        if hi < lo or hi >= limit:
            raise ValueError(f"--{what} {text!r}: indices must lie in 0-{limit - 1}")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


def suite_tasks(suite_text: str, tasks_text: str) -> list[str]:
    """`libero_spatial,libero_goal` + `0-1` -> ['libero_spatial/0', 'libero_goal/0', ...]."""
    suites = [s.strip() for s in suite_text.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise ValueError(f"unknown suite {(unknown or [''])[0]!r}; suites are: {', '.join(SUITES)}")
    idx = parse_range(tasks_text, min(SUITES[s] for s in suites), "suite-tasks")
    return [f"{s}/{i}" for s in suites for i in idx]


def suite_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per suite, overall and per task: successes, rate, 95% Wilson interval, wall seconds per turn,
    from the bench runner's result lines (task `suite/i`, seed = init state)."""
    from pear_agent.bench.stats import wilson

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        k, n = sum(bool(r.get("success")) for r in rs), len(rs)
        lo, hi = wilson(k, n)
        turns = sum(int(r.get("turns") or 0) for r in rs)
        wall = sum(float(r.get("wall_time_s") or 0.0) for r in rs)
        return {
            "successes": k,
            "episodes": n,
            "success_rate": k / n if n else 0.0,
            "wilson95": [lo, hi],
            "mean_wall_s_per_turn": wall / turns if turns else None,
        }

    suites = sorted({r["task"].split("/")[0] for r in results})
    tasks = sorted({r["task"] for r in results})
    return {
        "suites": {s: block([r for r in results if r["task"].split("/")[0] == s]) for s in suites},
        "overall": block(results),
        "tasks": {t: block([r for r in results if r["task"] == t]) for t in tasks},
    }


def format_summary(summary: dict[str, Any]) -> str:
    lines = [f"{'suite':<16s} {'success':>9s} {'rate':>7s}  {'95% Wilson':<15s} {'s/turn':>7s}"]
    rows = [*summary["suites"].items(), ("overall", summary["overall"])]
    for name, b in rows:
        lo, hi = b["wilson95"]
        wt = b["mean_wall_s_per_turn"]
        lines.append(
            f"{name:<16s} {b['successes']:>4d}/{b['episodes']:<4d} {b['success_rate'] * 100:6.1f}%  "
            f"[{lo * 100:5.1f}, {hi * 100:5.1f}]  {'   -   ' if wt is None else f'{wt:7.2f}'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """The old entry point, forwarded to `pear-agent bench --suite`."""
    p = argparse.ArgumentParser(
        prog="python -m sim_adapters.libero.bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--suite", default="libero_spatial", help=f"comma list of: {', '.join(SUITES)}")
    p.add_argument("--tasks", default="0-9", help="task indices, e.g. 0-9 or 0,3")
    p.add_argument("--inits", default="0-49", help="init-state indices (LIBERO has 50 per task)")
    p.add_argument("--out", default="runs/libero-bench", help="results folder")
    p.add_argument("--workers", default="1")
    args = p.parse_args(argv)
    from pear_agent.cli import main as cli_main

    argv = ["bench", "--suite", args.suite, "--suite-tasks", args.tasks, "--seeds", args.inits]
    return cli_main([*argv, "--out", args.out, "--workers", args.workers])


if __name__ == "__main__":
    sys.exit(main())
