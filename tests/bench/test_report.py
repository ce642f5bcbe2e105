"""Summary table and HTML report; the HTML is checked with html.parser (a browser screenshot is
scripts/screenshot_report.sh)."""

from html.parser import HTMLParser
from pathlib import Path

import pytest

from pear_agent.bench.report import format_table, summarize, write_report
from pear_agent.bench.runner import BenchConfig, close_sims, run_bench


class Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.refs: list[tuple[str, str]] = []
        self.cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("href", "src"):
                self.refs.append((tag, v))
        self._in_td = tag == "td"

    def handle_data(self, data) -> None:
        if self._in_td and data.strip():
            self.cells.append(data.strip())


def _parse(path: Path) -> Links:
    p = Links()
    p.feed(path.read_text(encoding="utf-8"))
    p.close()
    return p


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    cfg = BenchConfig(["pick_cube", "conveyor_pick"], [0], {"kind": "scripted"}, str(out), video=True)
    results = run_bench(cfg, progress=False)
    close_sims()
    return out, results


def test_summary_rows_have_intervals_and_latency(bench) -> None:
    _, results = bench
    rows = summarize(results)
    assert [r["task"] for r in rows] == ["conveyor_pick", "pick_cube", "all"]
    for r in rows:
        lo, hi = r["ci95"]
        assert 0 <= lo <= r["success_rate"] <= hi <= 1 and r["latency_median_s"] is not None
    assert rows[-1]["episodes"] == 2
    assert "95% CI" in format_table(rows)


def test_html_report_links_resolve_and_show_every_turn(bench) -> None:
    out, results = bench
    index = write_report(out, results)
    page = _parse(index)
    assert {"table", "a"} <= set(page.tags) and "pick_cube" in page.cells
    for _, ref in page.refs:
        assert not ref.startswith(("/", "file:", "http")), ref  # self-contained: relative links only
        assert (out / ref).exists(), ref
    pages = [out / ref for tag, ref in page.refs if ref.endswith("report.html")]
    assert len(pages) == 2
    for ep_page, r in zip(sorted(pages), sorted(results, key=lambda x: x["task"]), strict=True):
        ep = _parse(ep_page)
        imgs = [ref for tag, ref in ep.refs if tag == "img"]
        assert len(imgs) == 2 * r["turns"]  # front + wrist per turn
        assert ("video", "episode.mp4") in ep.refs
        for _, ref in ep.refs:
            assert (ep_page.parent / ref).exists(), ref
        text = ep_page.read_text(encoding="utf-8")
        # per turn: the reply, the parsed action and what was executed after clipping
        assert text.count("<pre>parsed: ") == text.count("<pre>executed: ") == r["turns"]
        assert ep.tags.count("pre") >= 3 * r["turns"] and "max_invalid 3" in text
    assert (out / "summary.txt").read_text().startswith("task")


def test_summary_counts_end_reasons_rules_and_failures() -> None:
    def res(task, reason, ok=False, **kw):
        return {"task": task, "success": ok, "end_reason": reason, "turns": 3, **kw}

    results = [
        res("a", "success", True, latencies_s=[1.0, 3.0], max_invalid=3, observation="state"),
        res("a", "invalid_action", invalid_replies=3, max_invalid=3, observation="state"),
        res("a", "policy_error", latencies_s=[5.0], policy_failures=1, failed_latencies_s=[120.0]),
        res("b", "invalid_action", scene_facts=True, max_invalid=1, observation="state"),
    ]
    rows = {r["task"]: r for r in summarize(results)}
    a = rows["a"]
    assert a["end_reasons"] == {"invalid_action": 1, "policy_error": 1, "success": 1}
    assert a["errors"] == 1 and a["invalid_replies"] == 3 and a["policy_failures"] == 1
    assert a["latency_median_s"] == 3.0 and a["latency_p90_s"] < 120  # failed requests are not latencies
    assert a["rules"] == "max_invalid 3, obs state" and not a["privileged_scene_facts"]
    assert rows["b"]["privileged_scene_facts"] and "scene facts (privileged)" in rows["b"]["rules"]
    assert rows["all"]["end_reasons"] == {"invalid_action": 2, "policy_error": 1, "success": 1}
    table = format_table(list(rows.values()))
    assert "end reasons" in table and "invalid_action:2 policy_error:1 success:1" in table
