"""`--record-fps`: the MuJoCo backend records the simulation at the control rate during moves and
realtime waits, the loop saves each turn's frames beside the log; off, nothing is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.records.log import RunWriter

FPS = 30.0


@pytest.fixture(scope="module")
def backend(panda):
    be = make_backend("pick_cube", panda, render=False)
    yield be
    be.close()


def _turns(run: Path) -> list[dict]:
    lines = [json.loads(x) for x in (run / "episode.jsonl").read_text().splitlines()]
    return [x for x in lines if x["kind"] == "turn"]


def _control(run: Path, turn: dict) -> dict[str, np.ndarray]:
    with np.load(run / turn["control"]) as z:
        return {k: z[k] for k in z.files}


@pytest.mark.parametrize(
    "cfg",
    [EpisodeConfig(record_fps=FPS), EpisodeConfig(record_fps=FPS, mode="realtime", latency_s=0.4)],
    ids=["paused", "realtime"],
)
def test_every_simulated_instant_is_recorded_once_at_the_rate(backend, panda_kin, tmp_path, cfg) -> None:
    result = arm_episode(
        backend, panda_kin, scripted_policy("pick_cube"), cfg, RunWriter(tmp_path, None)
    ).run(0)
    assert result.success
    header = json.loads((tmp_path / "episode.jsonl").read_text().splitlines()[0])
    assert header["record_fps"] == FPS
    times, prev_end = [], 0.0
    for t in _turns(tmp_path):
        c = _control(tmp_path, t)
        # a turn's frames: the simulated time since the previous turn ended (its realtime wait
        # included), up to this turn's end
        assert prev_end < c["time_s"][0] and c["time_s"][-1] <= t["sim_time_s"] + 1e-9
        assert abs(len(c["time_s"]) - (t["sim_time_s"] - prev_end) * FPS) <= 1.0
        prev_end = t["sim_time_s"]
        times.extend(c["time_s"])
        n = len(c["time_s"])
        for key, width in (("arm.joints_rad", 7), ("arm.command_joints_rad", 7), ("arm.tool_pose", 6)):
            assert c[key].shape == (n, width)
        assert c["arm.gripper"].shape == c["arm.command_gripper"].shape == (n,)
        assert not any(k.startswith("jpeg") for k in c)  # render=False: no cameras
        ik = (t.get("plan", {}).get("ik", {}).get("arm") or {}).get("target_joints_rad")
        if ik is not None and t["outcome"]["status"] == "reached":
            # the setpoint at the move's end is the IK target: the commands are the ones followed
            assert c["arm.command_joints_rad"][-1] == pytest.approx(ik, abs=1e-4)
            assert c["arm.joints_rad"][-1] == pytest.approx(ik, abs=0.01)
        gripper = (t["action"]["action"]["arm"]).get("gripper")
        if gripper is not None:
            assert c["arm.command_gripper"][-1] == pytest.approx(gripper, abs=1e-6)
    # one frame every 1/30 s of simulated time, to the 10 ms control step, none twice
    k = np.arange(len(times))
    assert np.all(np.abs(np.asarray(times) - k / FPS) <= 0.0101)
    assert abs(len(times) - result.sim_time_s * FPS) <= 1.0
    assert backend._record_period_s == 0.0  # the episode switched it off at its end


def test_off_records_nothing(backend, panda_kin, tmp_path) -> None:
    arm_episode(
        backend, panda_kin, scripted_policy("pick_cube"), EpisodeConfig(), RunWriter(tmp_path, None)
    ).run(1)
    assert not (tmp_path / "control").exists()
    assert all("control" not in t for t in _turns(tmp_path))
    assert "record_fps" not in json.loads((tmp_path / "episode.jsonl").read_text().splitlines()[0])
    assert backend.take_recording() == []


@pytest.mark.parametrize("bad", [0, -5.0, True, 5000])
def test_bad_rates_are_refused(bad) -> None:
    with pytest.raises(ValueError, match="--record-fps"):
        EpisodeConfig(record_fps=bad)


def test_cli_bad_rate_is_one_line(tmp_path: Path) -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "pear_agent",
            "run",
            "--no-video",
            "--record-fps",
            "0",
            "--runs-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 2 and "--record-fps" in p.stderr and "Traceback" not in p.stderr
