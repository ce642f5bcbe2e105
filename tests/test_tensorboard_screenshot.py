"""scripts/tensorboard_screenshot.py: events written from a run's metrics.jsonl hold the run's numbers
at the steps the training loop logs them, and bad input is one line."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "tensorboard_screenshot.py"
METRICS = ROOT / "benchmarks" / "results" / "train_tensorboard-issue39-metrics.jsonl"


def _script():
    spec = importlib.util.spec_from_file_location("tensorboard_screenshot", SCRIPT)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_events_from_metrics_hold_the_run_numbers(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from pear_agent.train.metrics_log import read_events

    _script().events_from_metrics(METRICS, tmp_path / "run")
    events = read_events(tmp_path / "run" / "tensorboard")
    steps = [json.loads(x) for x in METRICS.read_text().splitlines() if x.strip()]
    assert len(steps) >= 2
    for tag in ("mean_reward", "success_rate", "grad_norm", "task_success/roadster_ramp_flip:light"):
        got = dict(events[tag])
        for rep in steps:
            want = rep["task_success"]["roadster_ramp_flip:light"] if "/" in tag else rep[tag]
            assert got[rep["step"] + 1] == pytest.approx(want, rel=1e-6), (tag, rep["step"])
    assert "episodes" not in events and "stage" not in events  # text is left out


def test_a_missing_metrics_file_is_one_line(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "runs",
            str(tmp_path / "x.png"),
            "--from-metrics",
            str(tmp_path / "no.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"tensorboard_screenshot: no such file: {tmp_path / 'no.jsonl'}"]
    assert not (tmp_path / "x.png").exists()
