import json

import pytest

from sim_adapters.libero.bench import format_summary, parse_range, summarize


def test_ranges():
    assert parse_range("0-2,5", 10, "tasks") == [0, 1, 2, 5]
    with pytest.raises(ValueError, match="must lie in 0-9"):
        parse_range("3-10", 10, "tasks")
    with pytest.raises(ValueError, match="use N, N-M"):
        parse_range("a", 10, "tasks")


def test_summary_layout_per_suite_and_overall():
    rs = [
        {"suite": "libero_spatial", "task": 0, "init": i, "success": i < 3, "turns": 10, "wall_s": 5.0}
        for i in range(5)
    ] + [{"suite": "libero_object", "task": 1, "init": 0, "success": False, "turns": 30, "wall_s": 9.0}]
    s = summarize(rs)
    assert s["suites"]["libero_spatial"]["successes"] == 3
    assert s["overall"]["episodes"] == 6
    lo, hi = s["overall"]["wilson95"]
    assert lo < 0.5 < hi
    assert s["tasks"]["libero_spatial/0"]["episodes"] == 5
    assert "overall" in format_summary(s)


def test_pear_agent_bench_suite_runs_libero_episodes(tmp_path, capsys):
    """`pear-agent bench --suite` delegates to the LIBERO runner: the bowl on the plate, scored by
    LIBERO's own check, in the per-suite layout."""
    from pear_agent.cli import main

    out = tmp_path / "bench"
    rc = main(["bench", "--suite", "libero_spatial", "--suite-tasks", "0", "--seeds", "1", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "libero_spatial" in printed and "overall" in printed
    rec = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert (rec["suite"], rec["task"], rec["init"]) == ("libero_spatial", 0, 1)
    assert rec["success"], rec
    assert json.loads((out / "summary.json").read_text())["overall"]["successes"] == 1


def test_pear_agent_bench_suite_errors_are_one_line(capsys):
    from pear_agent.cli import main

    assert main(["bench", "--suite", "libero_nope"]) == 2
    assert "unknown suite 'libero_nope'" in capsys.readouterr().err
    assert main(["bench", "--suite", "libero_goal", "--suite-tasks", "0", "--seeds", "0"]) == 2
    assert "no scripted expert for libero_goal/0" in capsys.readouterr().err
