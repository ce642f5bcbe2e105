"""Smoke test of the roadster benchmark scripts: tiny sizes, one valid JSON line with the figures.
No timing assertions (speed figures live in benchmarks/README.md)."""

import pytest

from tests.benchmarks.test_benchmarks import run_script

pytest.importorskip("mujoco")


def test_roadster_difficulty_prints_rates_and_paired_p_values():
    out = run_script(
        "roadster_difficulty",
        [
            "--flights",
            "3",
            "--winds",
            "light",
            "--latencies",
            "1",
            "--realtime-winds",
            "light",
            "--serve-flights",
            "2",
            "--serve-latencies",
            "0",
        ],
    )
    kick = out["paused"]["roadster_kickflip/light"]
    assert kick["n"] == 3 and 0 <= kick["ci95"][0] <= kick["rate"] <= kick["ci95"][1] <= 1
    lo, hi = kick["target"]
    assert kick["meets_target"] is (lo <= kick["rate"] <= hi)
    rt = out["realtime"]["roadster_kickflip/light/1s"]
    assert rt["successes"] + rt["only_paused"] - rt["only_realtime"] == kick["successes"]
    assert 0 < rt["mcnemar_p"] <= 1
    served = out["serve"]["roadster_kickflip/light/serve+0s"]
    assert served["n"] == 2 and 0 < served["reply_median_s"] < 1.0


def test_roadster_speed_prints_cost_per_simulated_second():
    out = run_script("roadster_speed", ["--flights", "2", "--seconds", "2"])
    assert out["flight_wall"]["n"] == 2 and out["wall_per_sim_s"] > 0 and out["physics_step_us"] > 0
    assert isinstance(out["meets_5pct"], bool) and out["loop_wall_per_sim_s"] > 0
