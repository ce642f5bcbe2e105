"""`pear-agent ros replay`: a robot episode (agent_node against the JTC stand-in over real DDS, the
arm started away from home) replayed in its MuJoCo twin from the joints the robot started at, and
the real and twin outcomes side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.ros2.conftest import LOADED, REPO, double_config, home_joints
from tests.ros2.test_agent_endings import DOWN, UP, _agent, _summary

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

OFFSET_RAD = {"left_joint1": 0.2, "left_joint2": 0.15, "left_joint3": -0.1}
"""where the stand-in's arm starts, away from home: a twin reset to its home would start elsewhere"""


def test_a_robot_episode_replayed_in_the_twin_starts_where_the_robot_did(
    tmp_path: Path, start_node, start_double, yam
) -> None:
    """Three moves of the left arm on the stand-in, replayed with `pear-agent ros replay`: the twin
    starts at the robot's first joints (not its home), answers the same three replies, and the
    report pairs each turn's real and twin outcome (all reached on both).

    Mutation tried once by hand: `StartedAt.reset` without `set_joints` (the twin at its home):
    fails "the twin started at [-0.427  1.459  1.289 ...], the robot at [-0.227  1.608  1.191 ...]"."""
    start = home_joints(yam) | {j: home_joints(yam)[j] + d for j, d in OFFSET_RAD.items()}
    start_double(double_config(yam, initial=start))
    agent = _agent(start_node, tmp_path, [UP, DOWN, UP], operator_timeout_s=1.0, **LOADED)
    assert agent.wait(240) == 1  # the turn limit, unjudged: a failure
    log = Path(_summary(tmp_path)["run_dir"]) / "episode.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "pear_agent", "ros", "replay", str(log), "--runs-dir", str(tmp_path / "twin")],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "3 of 3 turns ended the same" in out.stdout, out.stdout
    (twin_dir,) = (tmp_path / "twin").iterdir()
    report = json.loads((twin_dir / "real_vs_twin.json").read_text())
    assert [(r["real"]["status"], r["twin"]["status"]) for r in report["turns"]] == [
        ("reached", "reached")
    ] * 3
    real_turns = [json.loads(x) for x in log.read_text().splitlines()]
    twin_turns = [json.loads(x) for x in (twin_dir / "episode.jsonl").read_text().splitlines()]
    real_first = next(r for r in real_turns if r.get("kind") == "turn")["joints_rad"]["left_arm"]
    twin_first = next(r for r in twin_turns if r.get("kind") == "turn")["joints_rad"]["left_arm"]
    said = f"the twin started at {np.round(twin_first, 3)}, the robot at {np.round(real_first, 3)}"
    np.testing.assert_allclose(twin_first, real_first, atol=5e-3, err_msg=said)
    assert [r["reply"] for r in report["turns"]] == [
        r["reply"] for r in real_turns if r.get("kind") == "turn" and "outcome" in r
    ]


def test_a_file_that_is_no_episode_is_refused_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "episode.jsonl"
    bad.write_text('{"kind": "summary"}\n')
    out = subprocess.run(
        [sys.executable, "-m", "pear_agent", "ros", "replay", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert "no header or no turn with the robot's joints" in out.stderr, out.stderr
