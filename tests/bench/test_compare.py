import json
import subprocess
import sys

import pytest

from pear_agent.bench.compare import compare, format_comparison


def _write(path, outcomes: dict[int, bool]) -> None:
    path.mkdir()
    lines = [
        json.dumps({"key": f"t/s{s}", "task": "t", "seed": s, "success": ok}) for s, ok in outcomes.items()
    ]
    (path / "results.jsonl").write_text("\n".join(lines) + "\n")


def test_pairs_on_shared_episodes_only(tmp_path) -> None:
    # seeds 0-9 shared; A wins 0-7, B wins 0-1; seed 10 only in A, 11 only in B
    _write(tmp_path / "a", {s: s < 8 for s in range(11)})
    _write(tmp_path / "b", {s: s < 2 for s in [*range(10), 11]})
    c = compare(tmp_path / "a", tmp_path / "b")
    assert c["shared"] == 10 and c["only_in_a"] == 1 and c["only_in_b"] == 1
    assert (c["both_success"], c["a_only_success"], c["b_only_success"], c["neither"]) == (2, 6, 0, 2)
    assert c["a"]["successes"] == 8 and c["mcnemar_p"] == pytest.approx(2 / 64)
    assert c["a"]["end_reasons"] == {"unknown": 10}  # results without end_reason


def test_end_reasons_per_side(tmp_path) -> None:
    for name, reasons in (("a", ["success", "success", "turn_limit"]), ("b", ["invalid_action"] * 3)):
        (tmp_path / name).mkdir()
        lines = [
            json.dumps({"key": f"t/s{s}", "task": "t", "seed": s, "success": r == "success", "end_reason": r})
            for s, r in enumerate(reasons)
        ]
        (tmp_path / name / "results.jsonl").write_text("\n".join(lines) + "\n")
    c = compare(tmp_path / "a", tmp_path / "b")
    assert c["a"]["end_reasons"] == {"success": 2, "turn_limit": 1}
    assert c["b"]["end_reasons"] == {"invalid_action": 3}
    assert "ends: invalid_action:3" in format_comparison(c, "A", "B")


def test_nothing_shared_is_an_error(tmp_path) -> None:
    _write(tmp_path / "a", {0: True})
    _write(tmp_path / "b", {1: True})
    with pytest.raises(ValueError, match="share no episode"):
        compare(tmp_path / "a", tmp_path / "b")


def test_cli_compare(tmp_path) -> None:
    _write(tmp_path / "a", {s: True for s in range(6)})
    _write(tmp_path / "b", {s: False for s in range(6)})
    r = subprocess.run(
        [sys.executable, "-m", "pear_agent", "compare", str(tmp_path / "a"), str(tmp_path / "b")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0 and "exact McNemar p = 0.03125" in r.stdout and "significant" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "pear_agent", "compare", str(tmp_path / "a"), str(tmp_path / "nope")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "no bench results" in r.stderr and "Traceback" not in r.stderr
