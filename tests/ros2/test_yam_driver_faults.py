"""The YAM driver on a robot that fails while running: I2RT's SimRobot whose joint-state read starts
raising the OSError python-can raises when a CAN adapter goes away. The driver must stop commanding,
publish the reason, close the robot and return exit code 1. And the health check on the attributes
i2rt's real MotorChainRobot exposes (its control thread, its motor chain, its feedback time)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
import pytest

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")
pytest.importorskip("i2rt.robots.get_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')")
pytest.importorskip("diagnostic_msgs", reason="diagnostic_msgs missing (pip install -e '.[yam]')")

from pear_agent.ros2 import yam_driver_node as drv

pytestmark = pytest.mark.wallclock


class FailingSimRobot:
    """I2RT's SimRobot, except that after `ok_reads` reads the bus "goes away"."""

    def __init__(self, ok_reads: int) -> None:
        from i2rt.robots.get_robot import get_yam_robot

        self.sim = get_yam_robot(channel="can_follower_l", sim=True)
        self.ok_reads = ok_reads
        self.reads = 0
        self.commands_after_fault = 0
        self.failed = False
        self.closed = False

    def num_dofs(self) -> int:
        return self.sim.num_dofs()

    def get_observations(self) -> dict[str, np.ndarray]:
        self.reads += 1
        if self.reads > self.ok_reads:
            self.failed = True
            raise OSError("[Errno 19] No such device: can_follower_l")
        return self.sim.get_observations()

    def command_joint_pos(self, q: np.ndarray) -> None:
        if self.failed:
            self.commands_after_fault += 1
        self.sim.command_joint_pos(q)

    def close(self) -> None:
        self.closed = True
        self.sim.close()


def test_a_can_error_while_running_stops_commanding_reports_closes_and_exits_1() -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
    from std_msgs.msg import String

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("yam_fault_driver", context=ctx)
    listener = rclpy.create_node("yam_fault_listener", context=ctx)
    got: list[dict[str, Any]] = []
    latched = QoSProfile(
        depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
    )
    listener.create_subscription(
        String, "/pear/driver/left_arm/status", lambda m: got.append(json.loads(m.data)), latched
    )
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(node)
    executor.add_node(listener)
    stop = threading.Event()
    spinner = threading.Thread(target=lambda: [executor.spin_once(0.05) for _ in iter(stop.is_set, True)])
    spinner.start()
    robot = FailingSimRobot(ok_reads=50)
    params = dict(drv.PARAMS, sim=True, status_topic="")
    try:
        t0 = time.monotonic()
        code = drv.run(node, params, robot_factory=lambda *a: robot)
        deadline = time.monotonic() + 5
        while not any(s["state"] == "fault" for s in got) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        spinner.join(timeout=2)
        executor.shutdown(timeout_sec=1)
        node.destroy_node()
        listener.destroy_node()
        ctx.try_shutdown()
    assert code == 1
    assert time.monotonic() - t0 < 10
    assert robot.closed, "close() was not called"
    assert robot.commands_after_fault == 0, "the driver kept commanding after the fault"
    fault = next(s for s in got if s["state"] == "fault")
    assert "No such device: can_follower_l" in fault["fault"]


def test_health_check_reads_i2rts_motor_chain_robot_attributes() -> None:
    """On the attributes i2rt's MotorChainRobot and DMChainCanInterface have: the robot's server
    thread, the chain's `running`, and the chain's `state` (the feedback frames its CAN thread
    replaces every bus cycle). A CAN thread that stalls leaves `running` True and, through
    `read_states()`, keeps `_joint_state.timestamp` fresh: only the frames tell."""

    class Chain:  # DMChainCanInterface: `state` replaced by its CAN thread, `running`
        def __init__(self) -> None:
            self.running = True
            self.state = [object()]
            self.stalled = threading.Event()
            threading.Thread(target=self._can_loop, daemon=True).start()

        def _can_loop(self) -> None:
            while not self.stalled.is_set():
                self.state = [object()]  # a new list of feedback frames per cycle
                time.sleep(0.002)

    class JointStates:
        timestamp = time.time()

    class Robot:
        def __init__(self) -> None:
            self._server_thread = threading.Thread(target=time.sleep, args=(5,), daemon=True)
            self._server_thread.start()
            self.motor_chain = Chain()
            self._joint_state = JointStates()

    robot = Robot()
    watch = drv.FeedbackWatch()
    for _ in range(5):
        assert drv.robot_fault(robot, 0.25, watch) is None
        time.sleep(0.05)
    robot.motor_chain.stalled.set()  # the CAN thread stops answering; `running` stays True
    deadline = time.monotonic() + 5
    why = None
    while why is None and time.monotonic() < deadline:
        robot._joint_state.timestamp = time.time()  # what i2rt's read_states() keeps doing
        why = drv.robot_fault(robot, 0.25, watch)
        time.sleep(0.02)
    assert why is not None and why.startswith("motor feedback (CAN) has not changed for"), why
    robot.motor_chain.running = False
    assert "motor chain stopped" in drv.robot_fault(robot, 0.25, watch)
    dead = threading.Thread(target=lambda: None)
    dead.start()
    dead.join()
    robot._server_thread = dead
    assert "control thread stopped" in drv.robot_fault(robot, 0.25, watch)
    from i2rt.robots.get_robot import get_yam_robot

    sim = get_yam_robot(sim=True)
    try:
        assert drv.robot_fault(sim, 0.25, drv.FeedbackWatch()) is None  # SimRobot has none of them
    finally:
        sim.close()


def test_a_robot_that_cannot_be_read_at_start_is_closed_and_reported() -> None:
    import rclpy

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    node = rclpy.create_node("yam_fault_start", context=ctx)
    robot = FailingSimRobot(ok_reads=0)
    try:
        with pytest.raises(drv.RobotFault, match="cannot read the arm's joints at start: OSError"):
            drv.run(node, dict(drv.PARAMS, sim=True), robot_factory=lambda *a: robot)
    finally:
        node.destroy_node()
        ctx.try_shutdown()
    assert robot.closed
