"""`bench --preset pear_real`: the paper's 30 trials, its table, and `compare` on two such runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pear_agent.bench import pear_real
from pear_agent.bench.compare import compare
from pear_agent.bench.stats import wilson
from pear_agent.cli import main
from sim_adapters.mujoco.tasks.ruler import SCENES


def test_the_thirty_trials() -> None:
    trials = pear_real.trials()
    assert len(trials) == 30 and len(set(trials)) == 30
    ruler = [t for t in trials if t.task == "align_with_ruler"]
    assert len(ruler) == 10
    assert sorted(t.seed % len(SCENES) for t in ruler) == sorted(list(range(5)) * 2)  # 5 scenes x 2
    objects = [t for t in trials if t.group == "pick_up_object"]
    assert len(objects) == 20 and len({t.task for t in objects}) == 10  # 10 objects x 2


def test_table_per_group_and_total() -> None:
    lines = [{"task": "align_with_ruler", "seed": s, "success": s < 6} for s in range(10)]
    lines += [
        {"task": f"pick_up_object/o{i}", "seed": s, "success": i < 6} for i in range(10) for s in (0, 1)
    ]
    rows = pear_real.table(lines)
    assert rows["align_with_ruler"]["successes"] == 6 and rows["align_with_ruler"]["trials"] == 10
    assert rows["pick_up_object"]["successes"] == 12 and rows["pick_up_object"]["trials"] == 20
    assert rows["total"]["successes"] == 18 and rows["total"]["trials"] == 30
    assert rows["total"]["ci95"] == pytest.approx(list(wilson(18, 30)))
    text = pear_real.format_table(rows, "m")
    assert "ruler alignment       6/10" in text and "total                18/30" in text


def test_preset_runs_its_trials_and_compare_pairs_two_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two of the 30 trials (the whole preset takes minutes on two cores), through the CLI."""
    few = [pear_real.Trial("align_with_ruler", 3), pear_real.Trial("pick_up_object/marker", 0)]
    monkeypatch.setattr(pear_real, "trials", lambda objects=None: few)
    for run in ("a", "b"):
        args = ["bench", "--preset", "pear_real", "--no-video", "--quiet", "--out", str(tmp_path / run)]
        assert main(args) == 0
    out = capsys.readouterr().out
    assert "PEAR real-robot protocol (pear_real): scripted expert" in out
    lines = [json.loads(x) for x in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    assert {(r["task"], r["seed"]) for r in lines} == {("align_with_ruler", 3), ("pick_up_object/marker", 0)}
    for r in lines:
        assert r["preset"] == "pear_real" and r["max_turns"] == 25 and r["reasoning_token_cap"] is None
        assert r["success"], r
    summary = json.loads((tmp_path / "a" / "pear_real.json").read_text())
    assert summary["total"]["trials"] == 2
    config = json.loads((tmp_path / "a" / "bench.json").read_text())
    assert config["identity"]["robot"] == "yam_bimanual"
    c = compare(tmp_path / "a", tmp_path / "b")
    assert c["shared"] == 2 and c["both_success"] == 2
