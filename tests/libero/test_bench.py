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
