"""`pear-agent compare A B`: paired comparison of two benches on the episodes both ran.

Pairing on (task, seed) removes the seed-to-seed variance that dominates small benches; the exact
McNemar test looks only at discordant pairs (one run succeeded, the other failed).
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from pear_agent.bench import charts
from pear_agent.bench.report import _page, end_reasons, is_scored
from pear_agent.bench.runner import RESULTS, read_results
from pear_agent.bench.stats import mcnemar_exact, wilson


def _load(path: str | Path) -> dict[str, dict[str, Any]]:
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS
    if not p.exists():
        raise FileNotFoundError(f"{p}: no bench results here")
    return {r["key"]: r for r in read_results(p)}


def compare(a_path: str | Path, b_path: str | Path) -> dict[str, Any]:
    a, b = _load(a_path), _load(b_path)
    both_ran = set(a) & set(b)
    # pairs only where both runs completed the episode: an infrastructure fault (endpoint, hung
    # environment step) says nothing of either model
    shared = sorted(k for k in both_ran if is_scored(a[k]) and is_scored(b[k]))
    if not shared:
        raise ValueError(
            f"{a_path} and {b_path} share no episode (task, seed) both completed; nothing to compare"
        )
    both = sum(1 for k in shared if a[k].get("success") and b[k].get("success"))
    only_a = sum(1 for k in shared if a[k].get("success") and not b[k].get("success"))
    only_b = sum(1 for k in shared if not a[k].get("success") and b[k].get("success"))
    n = len(shared)
    ka, kb = both + only_a, both + only_b
    ends_a = end_reasons([a[k] for k in shared])
    ends_b = end_reasons([b[k] for k in shared])
    return {
        "shared": n,
        "only_in_a": len(set(a) - set(b)),
        "only_in_b": len(set(b) - set(a)),
        "not_completed_by_both": len(both_ran) - len(shared),
        "a": {"successes": ka, "rate": ka / n, "ci95": list(wilson(ka, n)), "end_reasons": ends_a},
        "b": {"successes": kb, "rate": kb / n, "ci95": list(wilson(kb, n)), "end_reasons": ends_b},
        "both_success": both,
        "a_only_success": only_a,
        "b_only_success": only_b,
        "neither": n - both - only_a - only_b,
        "mcnemar_p": mcnemar_exact(only_a, only_b),
    }


def format_comparison(c: dict[str, Any], a_name: str, b_name: str) -> str:
    def side(name: str, s: dict[str, Any]) -> str:
        lo, hi = s["ci95"]
        ends = " ".join(f"{k}:{v}" for k, v in (s.get("end_reasons") or {}).items())
        return f"  {name}: {s['successes']}/{c['shared']} = {s['rate']:.2f}  95% CI [{lo:.2f}, {hi:.2f}]" + (
            f"  ends: {ends}" if ends else ""
        )

    lines = [
        f"{c['shared']} shared episodes (only in A: {c['only_in_a']}, only in B: {c['only_in_b']}"
        + (
            f"; {c['not_completed_by_both']} left out: an infrastructure fault (endpoint_error, "
            "env_hang) in one run"
            if c.get("not_completed_by_both")
            else ""
        )
        + ")",
        side(f"A {a_name}", c["a"]),
        side(f"B {b_name}", c["b"]),
        f"  both succeeded {c['both_success']}, only A {c['a_only_success']}, only B {c['b_only_success']}, "
        f"neither {c['neither']}",
        f"  exact McNemar p = {c['mcnemar_p']:.4g}"
        + ("  (significant at 0.05)" if c["mcnemar_p"] < 0.05 else "  (not significant at 0.05)"),
    ]
    return "\n".join(lines)


def write_compare_page(a_path: str | Path, b_path: str | Path, page: Path) -> Path:
    """A static page: the overall comparison, and per task the paired difference in success rate
    with its exact McNemar p-value as a chart and a table."""
    a, b = _load(a_path), _load(b_path)
    c = compare(a_path, b_path)
    rows = charts.paired_by_task(a, b)
    body = [
        "<h1>pear-agent compare</h1>",
        f"<p>A: {html.escape(str(a_path))}<br>B: {html.escape(str(b_path))}</p>",
        f"<pre>{html.escape(format_comparison(c, 'A', 'B'))}</pre>",
        '<div class="charts">',
        charts.compare_chart(rows, "A", "B"),
        "</div><table><tr><th>task</th><th>shared</th><th>A rate [95% CI]</th><th>B rate [95% CI]</th>"
        "<th>B - A</th><th>only A / only B</th><th>McNemar p</th></tr>",
    ]
    for r in rows:
        body.append(
            f"<tr><td>{html.escape(r['task'])}</td><td>{r['n']}</td>"
            f"<td>{r['rate_a']:.2f} [{r['ci_a'][0]:.2f}, {r['ci_a'][1]:.2f}]</td>"
            f"<td>{r['rate_b']:.2f} [{r['ci_b'][0]:.2f}, {r['ci_b'][1]:.2f}]</td>"
            f"<td>{r['diff']:+.2f}</td><td>{r['a_only']} / {r['b_only']}</td><td>{r['p']:.3g}</td></tr>"
        )
    body.append("</table>")
    page = Path(page)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(_page("pear-agent compare", "\n".join(body)), encoding="utf-8")
    return page
