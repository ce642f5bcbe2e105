"""The YAM driver's shutdown, as a process on I2RT's SimRobot: Ctrl-C in the middle of a move brings
the arm to rest and holds it there, then `close()` runs, each step in the log, and the driver exits 0
promptly (no `terminate called without an active exception`). SIGTERM is the desk test's ending."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.ros2.conftest import STARTUP_S, NodeProcess

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")
pytest.importorskip("i2rt.robots.get_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')")
pytest.importorskip("can", reason="python-can missing (pip install -e '.[yam]')")
pytest.importorskip("diagnostic_msgs", reason="diagnostic_msgs missing (pip install -e '.[yam]')")

JOINTS = [f"left_joint{i}" for i in range(1, 7)]


def test_ctrl_c_mid_move_rests_holds_closes_and_says_so(tmp_path: Path, probe: Any) -> None:
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    driver = NodeProcess(
        "pear_agent.ros2.yam_driver_node", "yam_left_driver", {"arm": "left_arm", "sim": True}, tmp_path, True
    )
    try:
        pub = probe.node.create_publisher(JointTrajectory, "/left_arm_controller/joint_trajectory", 10)
        probe.wait_for(
            lambda: all(j in probe.latest_joints() for j in JOINTS), 60, "the driver's joint states"
        )
        probe.wait_for(lambda: pub.get_subscription_count() > 0, STARTUP_S, "the driver's subscription")
        start = probe.latest_joints()["left_joint1"]
        target = [start + 1.2] + [probe.latest_joints()[j] for j in JOINTS[1:]]
        pub.publish(
            JointTrajectory(
                joint_names=JOINTS,
                points=[
                    JointTrajectoryPoint(
                        positions=target, velocities=[0.0] * 6, time_from_start=Duration(sec=2)
                    )
                ],
            )
        )
        probe.wait_for(lambda: probe.latest_joints()["left_joint1"] > start + 0.1, 10, "the move")
        t_int = time.monotonic()
        driver.proc.send_signal(2)  # Ctrl-C
        code = driver.proc.wait(timeout=15)
        elapsed = time.monotonic() - t_int
    finally:
        driver.stop()
    log = driver.log()
    assert code == 0, log[-2000:]
    assert "SIGINT: at rest, holding at" in log and "(hold sent)" in log, log[-2000:]
    assert log.index("(hold sent)") < log.index("calling i2rt close()") < log.index("close() done"), log
    assert "terminate called" not in log and "Traceback" not in log, log[-2000:]
    last = probe.latest_joints()["left_joint1"]
    assert start + 0.1 < last < start + 1.2 - 0.1, "it stopped early, short of the target"
    print(f"driver: exited {elapsed:.2f} s after Ctrl-C, stopped at +{last - start:.3f} rad of +1.2")
    assert elapsed < 10
