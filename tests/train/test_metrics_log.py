"""The per-step metrics beside metrics.jsonl: flattened scalars, TensorBoard event files read back
as TensorBoard reads them, and a clear line when a logger is asked for and not installed."""

from __future__ import annotations

import sys

import pytest

from pear_agent.train.metrics_log import MetricsLog, read_events, scalars


def test_a_report_becomes_flat_scalars():
    rep = {"loss": 0.5, "kept": 3, "ok": True, "stage": "x", "drift": None, "task_success": {"a": 0.25}}
    assert scalars(rep) == {"loss": 0.5, "kept": 3.0, "ok": 1.0, "task_success/a": 0.25}


def test_tensorboard_event_files_read_back(tmp_path):
    with MetricsLog(tmp_path, ["tensorboard"], log=lambda *_: None) as board:
        for step in (1, 2):
            board.write(step, {"loss": 0.1 * step, "dropped": {"all_failure": step}})
    events = read_events(tmp_path / "tensorboard")
    assert [s for s, _ in events["loss"]] == [1, 2]
    assert [v for _, v in events["loss"]] == pytest.approx([0.1, 0.2])
    assert [v for _, v in events["dropped/all_failure"]] == [1.0, 2.0]


def test_wandb_asked_for_and_not_installed_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(ValueError, match=r"report_to wandb: wandb is not installed"):
        MetricsLog(tmp_path, ["wandb"])
