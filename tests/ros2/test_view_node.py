"""agent_node's `view` parameter: the episode it drives on sim_robot_node's simulated YAM (separate
processes, real DDS) gets a Rerun recording beside its log, with every turn's images, replies,
joint series of both arms and link frames (read back with Rerun's own reader)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")
pytest.importorskip("rerun")

from tests.records.test_view import read_log, read_rrd
from tests.ros2.conftest import Probe

pytestmark = pytest.mark.wallclock


def test_agent_node_view_records_the_episode(tmp_path: Path, start_node, probe: Probe) -> None:
    start_node(
        "pear_agent.ros2.sim_robot_node",
        "pear_sim_robot",
        {"task": "bimanual_pickup", "seed": 0, "publish_images": True, "image_rate_hz": 1.0},
    )
    probe.wait_for(lambda: probe.sim_status, 90, "sim_robot_node's task status")
    agent = start_node(
        "pear_agent.ros2.agent_node",
        "pear_agent",
        {
            "policy": "scripted",
            "seed": 0,
            "max_turns": 5,
            "view": True,
            "runs_dir": str(tmp_path / "ros"),
            "task_status_topic": "/pear/sim/task_status",
            "image_max_age_s": 3.0,
            "joint_state_max_age_s": 0.4,
        },
    )
    agent.wait(240)
    (run_dir,) = [p.parent for p in (tmp_path / "ros").rglob("episode.jsonl")]
    _, turns = read_log(run_dir)
    n = len(turns)
    assert n >= 3, agent.log()[-3000:]
    ent = read_rrd(run_dir / "episode.rrd")
    assert turns[0]["images"]
    for cam in turns[0]["images"]:
        assert sorted(ent[f"/cameras/{cam}"]["turn"]) == list(range(1, n + 1)), cam
    assert len(ent["/model/reply"]["turn"]) == n
    assert len(turns[0]["joints_rad"]) == 2  # both arms
    for part, q in turns[0]["joints_rad"].items():
        series = [e for e in ent if e.startswith(f"/joints/{part}/") and e.endswith("/position_rad")]
        assert len(series) == len(q) and all(len(ent[e]["turn"]) == n for e in series), part
    assert len(ent["/world/robot/links"]["turn"]) == n
