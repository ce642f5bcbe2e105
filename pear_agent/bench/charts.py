"""Charts for the bench and compare pages: matplotlib drawn to SVG and inlined in the HTML, so the
pages stay static files that need no server, no network and no JavaScript to show.

Each chart is a `<figure class="chart" data-chart=KIND [data-task=TASK]>` holding one `<svg>`; the
page tests find them by these attributes in a headless browser."""

from __future__ import annotations

import html
import io
import re
from typing import Any

from pear_agent.bench.stats import mcnemar_exact, wilson

PALETTE = ["#2e7d32", "#c62828", "#1565c0", "#ef6c00", "#6a1b9a", "#00838f", "#9e9d24", "#5d4037", "#757575"]


def _plt() -> Any:
    import matplotlib  # heavy: matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # heavy: matplotlib

    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False})  # fmt: skip
    return plt


def _svg(fig: Any) -> str:
    """The figure as inline SVG (no XML prolog, no fixed id clashes between figures)."""
    plt = _plt()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def figure(kind: str, svg: str, caption: str, task: str | None = None) -> str:
    attr = f' data-task="{html.escape(task)}"' if task is not None else ""
    return (
        f'<figure class="chart" data-chart="{kind}"{attr}>{svg}'
        f"<figcaption>{html.escape(caption)}</figcaption></figure>"
    )


def _height(n: int) -> float:
    return max(1.6, 0.42 * n + 0.9)


def success_chart(rows: list[dict[str, Any]]) -> str:
    """Success rate per task as bars with their 95% Wilson intervals."""
    plt = _plt()
    rows = [r for r in rows if r["task"] != "all"] or rows
    fig, ax = plt.subplots(figsize=(6.5, _height(len(rows))))
    names = [r["task"] for r in rows]
    rates = [r["success_rate"] for r in rows]
    lo = [max(0.0, r["success_rate"] - r["ci95"][0]) for r in rows]  # never below 0 by rounding
    hi = [max(0.0, r["ci95"][1] - r["success_rate"]) for r in rows]
    y = list(range(len(rows)))
    ax.barh(y, rates, color="#66bb6a", xerr=[lo, hi], capsize=3, ecolor="#333")
    for i, r in enumerate(rows):
        ax.text(1.02, i, f"{r['successes']}/{r['episodes']}", va="center", fontsize=8)
    ax.set_yticks(y, names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("success rate (bars: 95% Wilson interval)")
    return figure("success", _svg(fig), "Success per task with its 95% Wilson interval")


def end_reasons_chart(rows: list[dict[str, Any]]) -> str:
    """How each task's episodes ended, stacked."""
    plt = _plt()
    rows = [r for r in rows if r["task"] != "all"] or rows
    reasons: list[str] = []
    for r in rows:
        for k in r["end_reasons"]:
            if k not in reasons:
                reasons.append(k)
    fig, ax = plt.subplots(figsize=(6.5, _height(len(rows))))
    y = list(range(len(rows)))
    left = [0.0] * len(rows)
    for j, reason in enumerate(reasons):
        vals = [r["end_reasons"].get(reason, 0) for r in rows]
        color = "#66bb6a" if reason in ("success", "landed") else PALETTE[(j + 1) % len(PALETTE)]
        ax.barh(y, vals, left=left, color=color, label=reason)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_yticks(y, [r["task"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("episodes")
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(rows) < 4 else -0.1), ncol=4, frameon=False
    )
    return figure("end_reasons", _svg(fig), "End reasons per task")


def task_distributions(task: str, results: list[dict[str, Any]]) -> str:
    """One task's turns per episode and decision latency, as histograms."""
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(6.5, 1.9))
    turns = [int(r.get("turns") or 0) for r in results]
    won = [int(r.get("turns") or 0) for r in results if r.get("success")]
    lost = [int(r.get("turns") or 0) for r in results if not r.get("success")]
    bins = list(range(min(turns or [0]), max(turns or [0]) + 2))
    a.hist([won, lost], bins=bins, stacked=True, color=["#66bb6a", "#ef5350"], label=["success", "failure"])
    a.set_xlabel("turns per episode")
    a.set_ylabel("episodes")
    a.legend(frameon=False, fontsize=7)
    lat_ms = [x * 1000 for r in results for x in r.get("latencies_s") or []]
    if lat_ms:
        b.hist(lat_ms, bins=20, color="#42a5f5")
        b.set_xlabel("decision latency (ms)")
        b.set_ylabel("decisions")
    else:
        b.text(0.5, 0.5, "no decisions", ha="center", va="center")
        b.set_axis_off()
    fig.suptitle(task, fontsize=9, x=0.01, ha="left")
    return figure(
        "task", _svg(fig), f"{task}: turns and decision latency ({len(results)} episodes)", task=task
    )


def paired_by_task(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task over the shared (task, seed) episodes: both rates, the difference B - A, and the
    exact McNemar p-value of the discordant pairs."""
    tasks: dict[str, list[str]] = {}
    for k in sorted(set(a) & set(b)):
        tasks.setdefault(str(a[k]["task"]), []).append(k)
    rows = []
    for task, keys in sorted(tasks.items()):
        n = len(keys)
        ka = sum(1 for k in keys if a[k].get("success"))
        kb = sum(1 for k in keys if b[k].get("success"))
        only_a = sum(1 for k in keys if a[k].get("success") and not b[k].get("success"))
        only_b = sum(1 for k in keys if b[k].get("success") and not a[k].get("success"))
        rows.append(
            {
                "task": task,
                "n": n,
                "rate_a": ka / n,
                "rate_b": kb / n,
                "ci_a": list(wilson(ka, n)),
                "ci_b": list(wilson(kb, n)),
                "diff": (kb - ka) / n,
                "a_only": only_a,
                "b_only": only_b,
                "p": mcnemar_exact(only_a, only_b),
            }
        )
    return rows


def compare_chart(rows: list[dict[str, Any]], a_name: str, b_name: str) -> str:
    """Paired difference in success rate (B - A) per task, coloured by its McNemar p-value."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, _height(len(rows))))
    y = list(range(len(rows)))
    diffs = [r["diff"] for r in rows]
    colors = ["#2e7d32" if r["p"] < 0.05 and r["diff"] > 0 else "#c62828" if r["p"] < 0.05 else "#9e9e9e"
              for r in rows]  # fmt: skip
    ax.barh(y, diffs, color=colors)
    ax.axvline(0, color="#333", lw=0.8)
    for i, r in enumerate(rows):
        ax.text(
            1.05, i, f"p = {r['p']:.3g}  ({r['a_only']} vs {r['b_only']} discordant)", va="center", fontsize=8
        )
    ax.set_yticks(y, [r["task"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel(f"success rate B - A  (A: {a_name}, B: {b_name}); coloured where p < 0.05")
    return figure("compare", _svg(fig), "Paired difference per task with its exact McNemar p-value")


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
