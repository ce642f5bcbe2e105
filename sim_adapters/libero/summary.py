"""The paper's tables from a bench's result lines: success per benchmark, perturbation and suite,
with 95% Wilson intervals and the paired drop against LIBERO.

A perturbed episode is paired with the LIBERO episode of the task it perturbs at the same init
state (`libero_pro/swap/libero_goal/3` seed 7 with `libero_goal/3` seed 7) when the results hold
one; the drop is the LIBERO success rate minus the perturbed one over those pairs (percentage
points), with the exact McNemar p-value of the discordant pairs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from pear_agent.bench.report import is_scored
from pear_agent.bench.stats import mcnemar_exact, wilson
from sim_adapters.libero.naming import TaskNameError, parse


def _key(task: str, seed: int) -> str:
    return f"{task}/s{seed}"


def _block(rows: list[dict[str, Any]], reference: dict[str, dict[str, Any]]) -> dict[str, Any]:
    k, n = sum(bool(r.get("success")) for r in rows), len(rows)
    lo, hi = wilson(k, n)
    turns = sum(int(r.get("turns") or 0) for r in rows)
    wall = sum(float(r.get("wall_time_s") or 0.0) for r in rows)
    out: dict[str, Any] = {
        "successes": k,
        "episodes": n,
        "success_rate": k / n if n else 0.0,
        "wilson95": [lo, hi],
        "mean_wall_s_per_episode": wall / n if n else None,
        "mean_wall_s_per_turn": wall / turns if turns else None,
    }
    pairs = [(reference[r["_base_key"]], r) for r in rows if r.get("_base_key") in reference]
    if pairs and rows[0].get("_benchmark") != "libero":
        ref_ok = sum(bool(a.get("success")) for a, _ in pairs)
        per_ok = sum(bool(b.get("success")) for _, b in pairs)
        only_ref = sum(bool(a.get("success")) and not b.get("success") for a, b in pairs)
        only_per = sum(not a.get("success") and bool(b.get("success")) for a, b in pairs)
        out["paired"] = {
            "pairs": len(pairs),
            "libero_rate": ref_ok / len(pairs),
            "perturbed_rate": per_ok / len(pairs),
            "drop_pp": 100.0 * (ref_ok - per_ok) / len(pairs),
            "mcnemar_p": mcnemar_exact(only_ref, only_per),
        }
    return out


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per (benchmark, perturbation): overall and per suite. Results of other tasks are ignored."""
    rows = []
    for r in results:
        if not is_scored(r):  # the endpoint failed after its retries: not the model's result
            continue
        try:
            ref = parse(str(r["task"]))
        except (TaskNameError, KeyError):
            continue
        rows.append(
            r
            | {
                "_benchmark": ref.benchmark,
                "_perturbation": ref.perturbation or "-",
                "_suite": ref.suite,
                "_base_key": _key(ref.base, int(r["seed"])),
            }
        )
    reference = {_key(r["task"], int(r["seed"])): r for r in rows if r["_benchmark"] == "libero"}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["_benchmark"], r["_perturbation"])].append(r)
    order = {"libero": 0, "libero_plus": 1, "libero_pro": 2}
    out: dict[str, Any] = {"groups": []}
    for (bench, pert), rs in sorted(groups.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        suites = sorted({r["_suite"] for r in rs})
        out["groups"].append(
            {
                "benchmark": bench,
                "perturbation": pert,
                "all": _block(rs, reference),
                "suites": {s: _block([r for r in rs if r["_suite"] == s], reference) for s in suites},
            }
        )
    for bench in ("libero_plus", "libero_pro"):
        rs = [r for r in rows if r["_benchmark"] == bench]
        if rs:
            out[f"{bench}_overall"] = _block(rs, reference)
    return out


def format_table(summary: dict[str, Any]) -> str:
    """One line per benchmark/perturbation and suite: success, Wilson interval, paired drop, s/episode."""
    head = f"{'benchmark/perturbation':<24s} {'suite':<15s} {'success':>11s} {'rate':>6s}"
    lines = [head + f"  {'95% Wilson':<14s} {'drop vs LIBERO (pairs)':>23s} {'s/ep':>6s}"]

    def row(label: str, suite: str, b: dict[str, Any]) -> str:
        lo, hi = b["wilson95"]
        p = b.get("paired")
        drop = f"{p['drop_pp']:+6.1f} pp ({p['pairs']})" if p else "-"
        wall = b["mean_wall_s_per_episode"]
        return (
            f"{label:<24s} {suite:<15s} {b['successes']:>5d}/{b['episodes']:<5d}"
            f" {b['success_rate'] * 100:5.1f}%"
            f"  [{lo * 100:4.1f}, {hi * 100:5.1f}] {drop:>23s} {'-' if wall is None else f'{wall:6.1f}':>6s}"
        )

    for g in summary["groups"]:
        label = g["benchmark"] if g["perturbation"] == "-" else f"{g['benchmark']}/{g['perturbation']}"
        for s, b in g["suites"].items():
            lines.append(row(label, s, b))
        lines.append(row(label, "all", g["all"]))
    for bench in ("libero_plus", "libero_pro"):
        if f"{bench}_overall" in summary:
            lines.append(row(bench, "all", summary[f"{bench}_overall"]))
    return "\n".join(lines)


def write_summary(results: list[dict[str, Any]], out_dir: str) -> str:
    """`<out>/libero_summary.json` and the table, for `pear-agent bench --preset`."""
    summary = summarize(results)
    (Path(out_dir) / "libero_summary.json").write_text(json.dumps(summary, indent=2))
    return format_table(summary)
