"""Summaries of a bench: a per-task table (success, 95% Wilson interval, turns, decision latency over
the decisions that returned, the loop's rules, an end-reason breakdown) and a self-contained HTML
report (relative links only: the folder can be copied or served as is)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from pear_agent.bench import charts
from pear_agent.bench.stats import latency_stats, wilson
from pear_agent.loop.registry import report_html

INFRA_ENDINGS: tuple[str, ...] = ("endpoint_error", "env_hang")
"""= pear_agent.loop.episode.INFRA_ENDINGS (not imported: reading a bench needs no simulator): the
model endpoint failed after its retries, or an environment step hung (its worker was replaced);
such an episode says nothing about the model."""
INFRA_MEANING: dict[str, str] = {
    "endpoint_error": "the model endpoint failed after its retries",
    "env_hang": "an environment step did not return within env_step_timeout_s (worker replaced)",
}


def is_scored(r: dict[str, Any]) -> bool:
    """An episode that counts toward the success rate: it did not end on an infrastructure fault."""
    return r.get("end_reason") not in INFRA_ENDINGS


def scored(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The episodes a success rate and its interval are computed over (infrastructure endings out)."""
    return [r for r in results if is_scored(r)]


def end_reasons(results: list[dict[str, Any]]) -> dict[str, int]:
    """How many episodes ended for each reason, most frequent first."""
    counts: dict[str, int] = {}
    for r in results:
        reason = str(r.get("end_reason") or "unknown")
        counts[reason] = counts.get(reason, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _rules(rs: list[dict[str, Any]]) -> str:
    """The loop's rules a bench ran under: invalid-reply limit, observation, privileged facts."""
    inval = sorted({str(r["max_invalid"]) for r in rs if r.get("max_invalid") is not None})
    obs = sorted({str(r["observation"]) for r in rs if r.get("observation")})
    bits = []
    if inval:
        bits.append("max_invalid " + "/".join(inval))
    if obs:
        bits.append("obs " + "/".join(obs))
    if any(r.get("scene_facts") for r in rs):
        bits.append("scene facts (privileged)")
    if any(r.get("scene_relative") for r in rs):
        bits.append("relative to the tool (privileged)")
    chunks = sorted({int(r.get("max_chunk") or 1) for r in rs})
    if chunks != [1] and chunks:
        bits.append("max_chunk " + "/".join(map(str, chunks)))
    return ", ".join(bits) or "-"


def _fmt_reasons(counts: dict[str, int]) -> str:
    return " ".join(f"{k}:{v}" for k, v in counts.items())


def summarize(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per task (sorted), plus an "all" row when there is more than one task. Latency is
    over decisions that returned a reply; failed requests are counted in `policy_failures`."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_task.setdefault(r["task"], []).append(r)
    groups = sorted(by_task.items())
    if len(groups) > 1:
        groups.append(("all", list(results)))
    rows = []
    for task, every in groups:
        rs = scored(every)  # an endpoint that failed after its retries is not the model failing
        n = len(rs)
        k = sum(1 for r in rs if r.get("success"))
        lo, hi = wilson(k, n)
        lat = [x for r in rs for x in r.get("latencies_s") or []]
        med, p90 = latency_stats(lat)
        modes = sorted({str(r.get("mode", "paused")) for r in rs})
        injected = sorted(
            {r.get("latency_injected_s") for r in rs if r.get("latency_injected_s") is not None}
        )
        rows.append(
            {
                "task": task,
                "episodes": n,
                "successes": k,
                "success_rate": k / n if n else 0.0,
                "ci95": [lo, hi],
                "mean_turns": sum(int(r.get("turns") or 0) for r in rs) / n if n else 0.0,
                "latency_median_s": med,
                "latency_p90_s": p90,
                "mode": "+".join(modes) + (f" (+{injected[0]:g} s/decision)" if injected else ""),
                "errors": sum(1 for r in rs if r.get("end_reason") in ("error", "policy_error")),
                "end_reasons": end_reasons(rs),
                "not_scored": len(every) - n,
                "not_scored_reasons": end_reasons([r for r in every if not is_scored(r)]),
                "invalid_replies": sum(int(r.get("invalid_replies") or 0) for r in rs),
                "policy_failures": sum(int(r.get("policy_failures") or 0) for r in rs),
                "rules": _rules(rs),
                "privileged_scene_facts": any(bool(r.get("scene_facts")) for r in rs),
            }
        )
    return rows


def _fmt_s(v: float | None) -> str:
    """A latency with its unit: ms below a second (scripted policies answer in microseconds)."""
    if v is None:
        return "-"
    return f"{v * 1000:.1f} ms" if v < 1 else f"{v:.2f} s"


def format_table(rows: list[dict[str, Any]]) -> str:
    w = max([16, *(len(str(r["task"])) for r in rows)])  # perturbed and LIBERO names run long
    head = (
        f"{'task':<{w}s} {'mode':<20s} {'success':>9s} {'rate':>6s} {'95% CI':>13s} {'turns':>6s} "
        f"{'lat med':>10s} {'lat p90':>10s}  {'rules':<26s} end reasons"
    )
    unscored = sum(int(r.get("not_scored") or 0) for r in rows if r["task"] != "all")
    lines = [head, "-" * len(head)]
    for r in rows:
        lo, hi = r["ci95"]
        lines.append(
            f"{r['task']:<{w}s} {r['mode']:<20s} {r['successes']:>4d}/{r['episodes']:<4d} "
            f"{r['success_rate']:>6.2f} {f'[{lo:.2f}, {hi:.2f}]':>13s} {r['mean_turns']:>6.1f} "
            f"{_fmt_s(r['latency_median_s']):>10s} {_fmt_s(r['latency_p90_s']):>10s}  "
            f"{r.get('rules', '-'):<26s} {_fmt_reasons(r.get('end_reasons') or {})}"
            + (f"  | not scored: {_fmt_reasons(r['not_scored_reasons'])}" if r.get("not_scored") else "")
        )
    if unscored:
        counts: dict[str, int] = {}
        for r in rows:
            if r["task"] != "all":
                for k, v in (r.get("not_scored_reasons") or {}).items():
                    counts[k] = counts.get(k, 0) + v
        why = "; ".join(f"{k}:{v} = {INFRA_MEANING.get(k, k)}" for k, v in sorted(counts.items()))
        keep = " (--keep-endpoint-errors keeps endpoint_error)" if "endpoint_error" in counts else ""
        lines.append(
            f"{unscored} episode(s) ended on an infrastructure fault, not the model's ({why}): left out "
            f"of the success rate and its interval; a resumed bench runs them again{keep}"
        )
    return "\n".join(lines)


CSS = """body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:4px 8px;vertical-align:top;text-align:left}th{background:#eee}
.ok{color:#080;font-weight:bold}.bad{color:#b00;font-weight:bold}pre{white-space:pre-wrap;max-width:60em;margin:0}
img{margin:2px;border:1px solid #ccc}video{max-width:480px}
.charts{display:flex;flex-wrap:wrap;gap:1em}figure.chart{margin:0;border:1px solid #ddd;padding:6px}
figure.chart svg{max-width:100%;height:auto}figcaption{font-size:85%;color:#555}"""


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


def _verdict(r: dict[str, Any]) -> str:
    if r.get("success"):
        return '<span class="ok">success</span>'
    return f'<span class="bad">{html.escape(str(r.get("end_reason")))}</span>'


def _action_cell(t: dict[str, Any]) -> str:
    """The parsed action, what was executed after clipping, and the clipping notes."""
    bits = []
    if t.get("action") is not None:
        bits.append(f"<pre>parsed: {html.escape(json.dumps(t['action']))}</pre>")
    if t.get("executed") is not None:
        bits.append(f"<pre>executed: {html.escape(json.dumps(t['executed']))}</pre>")
    notes = (t.get("outcome") or {}).get("notes") or []
    if notes:
        bits.append("<pre>notes: " + html.escape("; ".join(str(n) for n in notes)) + "</pre>")
    if t.get("action") is None and t.get("error"):
        bits.append(f"<pre>no valid action: {html.escape(str(t['error']))}</pre>")
    return "".join(bits) or "-"


def _tokens_cell(t: dict[str, Any]) -> str:
    usage = t.get("usage") or {}
    if not usage:
        return "-"
    return html.escape(
        f"prompt {usage.get('prompt_tokens', '?')}, completion {usage.get('completion_tokens', '?')}"
    )


def _episode_page(out: Path, r: dict[str, Any]) -> str | None:
    """Writes episodes/<name>/report.html; returns its path relative to `out` (None if no log)."""
    run_dir = out / r["run_dir"]
    log = run_dir / "episode.jsonl"
    if not log.exists():
        return None
    lines = []
    for raw in log.read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            continue
    turns = [x for x in lines if x.get("kind") == "turn"]
    parts = [
        f'<p><a href="../../index.html">&larr; all episodes</a></p><h1>{html.escape(r["key"])}</h1>',
        f"<p>{_verdict(r)} in {r.get('turns')} turns; mode {html.escape(str(r.get('mode')))}; "
        f"policy {html.escape(str(r.get('policy')))}; {html.escape(str(r.get('detail', '')))}</p>",
        f"<p>rules: {html.escape(_rules([r]))}; invalid replies {int(r.get('invalid_replies') or 0)}; "
        f"failed requests {int(r.get('policy_failures') or 0)}; tokens: prompt {r.get('prompt_tokens', 0)}, "
        f"completion {r.get('completion_tokens', 0)}</p>",
    ]
    if (run_dir / "episode.mp4").exists():
        parts.append('<video controls src="episode.mp4"></video>')

    extra = report_html(str(r.get("task", "")), lines)
    if extra:
        parts.append(extra)
    parts.append(
        "<table><tr><th>turn</th><th>images</th><th>reply</th><th>latency</th><th>action (parsed / executed)"
        "</th><th>outcome</th><th>tokens</th></tr>"
    )
    for t in turns:
        imgs = "".join(
            f'<img src="{html.escape(rel)}" width="160" alt="{html.escape(cam)}">'
            for cam, rel in (t.get("images") or {}).items()
        )
        outcome = t.get("outcome") or {}
        status = outcome.get("status") or t.get("error") or ""
        if outcome.get("detail"):
            status += f": {outcome['detail']}"
        if t.get("end"):
            status += f" [end: {t['end']}]"
        lat = t.get("latency_s")
        adv = f"<br>+{t['advanced_s']:.2f} s sim" if t.get("advanced_s") else ""
        parts.append(
            f"<tr><td>{t.get('turn')}</td><td>{imgs}</td>"
            f"<td><pre>{html.escape(str(t.get('reply') or ''))}</pre></td>"
            f"<td>{_fmt_s(lat)}{adv}</td><td>{_action_cell(t)}</td><td>{html.escape(status)}</td>"
            f"<td>{_tokens_cell(t)}</td></tr>"
        )
    parts.append("</table>")
    page = run_dir / "report.html"
    page.write_text(_page(r["key"], "\n".join(parts)), encoding="utf-8")
    return str(Path(r["run_dir"]) / "report.html")


def charts_html(rows: list[dict[str, Any]], results: list[dict[str, Any]]) -> str:
    """The charts a reader scans first: success with Wilson intervals, end reasons per task, and
    per task the turns and decision-latency distributions (inline SVG, `pear_agent.bench.charts`)."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_task.setdefault(str(r["task"]), []).append(r)
    parts = [
        '<h2>Charts</h2><div class="charts">',
        charts.success_chart(rows),
        charts.end_reasons_chart(rows),
    ]
    parts += [charts.task_distributions(t, rs) for t, rs in sorted(by_task.items())]
    parts.append("</div>")
    return "\n".join(parts)


def _thumbs(out: Path, r: dict[str, Any]) -> str:
    """The first and last image the model got (first camera), linked from the episode's folder."""
    images = out / r["run_dir"] / "images"
    if not images.is_dir():
        return "-"
    files = sorted(images.glob("turn_*.jpg"))
    if not files:
        return "-"
    cam = files[0].stem.split("_", 2)[-1]
    mine = [f for f in files if f.stem.split("_", 2)[-1] == cam]
    picks = [mine[0], mine[-1]] if len(mine) > 1 else mine
    rel = Path(r["run_dir"]) / "images"
    return "".join(
        f'<img class="thumb" loading="lazy" width="96" src="{html.escape(str(rel / f.name))}"'
        f' alt="{html.escape(f.stem)}">'
        for f in picks
    )


def write_report(out_dir: str | Path, results: list[dict[str, Any]]) -> Path:
    """index.html (summary + episode list) and one page per episode; returns index.html's path."""
    out = Path(out_dir)
    rows = summarize(results)
    (out / "summary.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    (out / "summary.txt").write_text(format_table(rows) + "\n", encoding="utf-8")
    body = ["<h1>pear-agent bench</h1>", "<h2>Summary</h2><table>"]
    body.append(
        "<tr><th>task</th><th>mode</th><th>success</th><th>rate</th><th>95% Wilson CI</th>"
        "<th>mean turns</th><th>latency median</th><th>latency p90</th><th>rules</th><th>end reasons</th>"
        "<th>invalid replies</th><th>failed requests</th></tr>"
    )
    for r in rows:
        lo, hi = r["ci95"]
        body.append(
            f"<tr><td>{html.escape(r['task'])}</td><td>{html.escape(r['mode'])}</td>"
            f"<td>{r['successes']}/{r['episodes']}</td><td>{r['success_rate']:.2f}</td>"
            f"<td>[{lo:.2f}, {hi:.2f}]</td><td>{r['mean_turns']:.1f}</td>"
            f"<td>{_fmt_s(r['latency_median_s'])}</td><td>{_fmt_s(r['latency_p90_s'])}</td>"
            f"<td>{html.escape(r['rules'])}</td><td>{html.escape(_fmt_reasons(r['end_reasons']))}"
            + (
                f"<br>not scored: {html.escape(_fmt_reasons(r['not_scored_reasons']))}"
                if r.get("not_scored")
                else ""
            )
            + "</td>"
            f"<td>{r['invalid_replies']}</td><td>{r['policy_failures']}</td></tr>"
        )
    body.append("</table>")
    body.append(charts_html(rows, results))
    body.append("<h2>Episodes</h2><table>")
    body.append(
        "<tr><th>episode</th><th>result</th><th>turns</th><th>detail</th><th>first / last frame</th>"
        "<th>video</th></tr>"
    )
    for r in sorted(results, key=lambda x: (x["task"], x["seed"])):
        page = _episode_page(out, r)
        name = html.escape(r["key"])
        link = f'<a href="{html.escape(page)}">{name}</a>' if page else name
        video = Path(r["run_dir"]) / "episode.mp4"
        vid = f'<a href="{html.escape(str(video))}">mp4</a>' if (out / video).exists() else "-"
        body.append(
            f"<tr><td>{link}</td><td>{_verdict(r)}</td><td>{r.get('turns')}</td>"
            f"<td>{html.escape(str(r.get('detail', '')))}</td><td>{_thumbs(out, r)}</td><td>{vid}</td></tr>"
        )
    body.append("</table>")
    index = out / "index.html"
    index.write_text(_page("pear-agent bench", "\n".join(body)), encoding="utf-8")
    return index
