"""`benchmarks/rl_beats_warm_start.py` writes its raw results as it goes and stops on its wall
budget: on the tiny model (random weights, nothing downloaded) with a budget already spent, the
warm start and its test flights are still done and written, GRPO does not start, and the raw file
says how far it got."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_spent_budget_stops_before_grpo_and_the_raw_file_says_how_far(tiny_model_dir, tmp_path):
    env = os.environ | {"PEAR_BENCH_SAVE": "0", "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl"}
    cmd = [
        sys.executable,
        str(REPO / "benchmarks" / "rl_beats_warm_start.py"),
        "--out",
        str(tmp_path / "run"),
        "--model",
        tiny_model_dir,
        "--task",
        "roadster_ramp_flip:light",
        "--teacher",
        "1",
        "--test",
        "2",
        "--grpo-steps",
        "2",
        "--groups",
        "1",
        "--group-size",
        "2",
        "--max-turns",
        "2",
        "--budget-min",
        "0.01",
    ]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 1, out.stderr[-2000:]
    report = json.loads((tmp_path / "run" / "rl_beats_warm_start.json").read_text())
    assert report["teacher"]["written"] == 1 and report["sft"]["episodes"] == 1
    assert report["test_warm"]["episodes"] == 2 and report["grpo"] == []
    assert report["how_far"].startswith("teacher: 1 of 1 flights kept; warm start: done")
    assert "GRPO: 0 of 2 steps" in report["how_far"] and "stopped (budget:" in report["how_far"]
    assert report["args"]["model"] == tiny_model_dir and report["recipe"]["model"]["name"] == tiny_model_dir


def test_test_seed_ranges_parse_and_training_seeds_are_refused(monkeypatch):
    import argparse
    import importlib.util

    import pytest

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # the script imports _common beside it
    spec = importlib.util.spec_from_file_location("rl_bench", REPO / "benchmarks" / "rl_beats_warm_start.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.seed_range("20000-20127") == range(20000, 20128)
    assert mod.seed_range("10000-10000") == range(10000, 10001)
    for bad, why in (("20000", "expected A-B"), ("a-b", "expected A-B"), ("20100-20000", "above the last"),
                     ("9990-10010", "overlaps the training seeds")):  # fmt: skip
        with pytest.raises(argparse.ArgumentTypeError, match=why):
            mod.seed_range(bad)


def test_grpo_batching_flies_the_compact_observation_when_asked(tmp_path):
    """`benchmarks/grpo_batching.py --observation compact`: the option reaches the
    flights (the tiny model, one turn): the compact prompt feeds far fewer prompt tokens than the
    default one, and the raw results say which prompt was measured."""

    def fed(observation: str) -> dict:
        env = os.environ | {"PEAR_BENCH_SAVE": "0", "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl"}
        script = str(REPO / "benchmarks" / "grpo_batching.py")
        cmd = [sys.executable, script, "--model", "tiny", "--max-turns", "1", "--max-new-tokens", "4",
               "--order", "8", "--observation", observation]  # fmt: skip
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    compact, state = fed("compact"), fed("state")
    assert compact["observation"] == "compact" and state["observation"] == "state"
    tokens = [r["runs"]["8"][0]["generator"]["prefill_tokens"] for r in (compact, state)]
    assert tokens[0] < 0.6 * tokens[1], tokens


def test_a_whole_run_pairs_the_test_seeds_and_logs_its_steps_to_tensorboard(tiny_model_dir, tmp_path):
    """Every phase on the tiny model: the paired test on the shared seeds, and each GRPO step in the
    trainer's event files (what docs/training.md's TensorBoard picture reads)."""
    from pear_agent.train.metrics_log import read_events

    env = os.environ | {"PEAR_BENCH_SAVE": "0", "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl"}
    args = ["--out", str(tmp_path / "run"), "--model", tiny_model_dir, "--task", "roadster_ramp_flip:light"]
    args += ["--teacher", "1", "--test", "2", "--grpo-steps", "1", "--groups", "1", "--group-size", "2"]
    args += ["--max-turns", "2"]
    cmd = [sys.executable, str(REPO / "benchmarks" / "rl_beats_warm_start.py"), *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "run" / "rl_beats_warm_start.json").read_text())
    assert report["grpo_vs_warm"]["shared"] == 2 and len(report["grpo"]) == 1
    events = read_events(tmp_path / "run" / "grpo" / "tensorboard")
    assert [s for s, _ in events["mean_reward"]] == [1]
    assert events["generated_tokens"][0][1] == float(report["grpo"][0]["generated_tokens"])


def test_an_arm_pilot_flies_base_and_warm_start_greedy_and_sampled(tiny_model_dir, tmp_path):
    """The arm recipe's pilot (`--recipe arm_pick --task pick_cube --base --eval-temperatures 0,1
    --stop-after warm`): both models on the same seeds at both temperatures, each flight's end reason
    and invalid replies counted, the all-valid episodes' success beside the overall one, the warm
    start paired with the base; no GRPO."""
    env = os.environ | {"PEAR_BENCH_SAVE": "0", "PYTHONPATH": str(REPO), "MUJOCO_GL": "egl"}
    args = ["--out", str(tmp_path / "run"), "--model", tiny_model_dir, "--recipe", "arm_pick"]
    args += ["--task", "pick_cube", "--teacher", "1", "--test-seeds", "10000-10001", "--max-turns", "2"]
    args += [
        "--base",
        "--eval-temperatures",
        "0,1",
        "--stop-after",
        "warm",
        "--set",
        "model.max_new_tokens=4",
    ]
    cmd = [sys.executable, str(REPO / "benchmarks" / "rl_beats_warm_start.py"), *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads((tmp_path / "run" / "rl_beats_warm_start.json").read_text())
    assert report["recipe"]["scene_relative"] and report["recipe"]["observation"] == "compact"
    assert report["teacher"]["written"] == 1  # the scripted expert picked its cube
    for key in ("test_base", "test_base_T1", "test_warm", "test_warm_T1"):
        r = report[key]
        assert r["episodes"] == 2 and sum(r["end_reasons"].values()) == 2, (key, r)
        assert r["all_valid"]["unknown"] == 0 and r["all_valid"]["episodes"] <= 2
        lines = [json.loads(x) for x in (tmp_path / "run" / f"{key}.jsonl").read_text().splitlines()]
        assert sorted(x["seed"] for x in lines) == [10000, 10001] and {x["robot"] for x in lines} == {"panda"}
        assert all(isinstance(x["invalid_replies"], int) for x in lines)
    assert report["test_warm"]["temperature"] == 0 and report["test_warm_T1"]["temperature"] == 1
    assert report["warm_vs_base"]["shared"] == 2 and report["warm_vs_base_T1"]["shared"] == 2
    assert "grpo" not in report and "warm start T1 on test" in report["how_far"]


def test_eval_temperatures_parse(monkeypatch):
    import argparse
    import importlib.util

    import pytest

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("rl_bench", REPO / "benchmarks" / "rl_beats_warm_start.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.temperatures("0,1") == [0.0, 1.0] and mod.temperatures("0.7") == [0.7]
    assert (
        mod.flight_key("warm", 0.0, 0.0) == "test_warm" and mod.flight_key("warm", 1.0, 0.0) == "test_warm_T1"
    )
    for bad in ("", "a", "0,0", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            mod.temperatures(bad)
