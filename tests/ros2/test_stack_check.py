"""The stack check and the first command on each topic (pear_agent/ros2/stack_check.py), against the
JTC stand-in in its own process over real DDS."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand
from tests.ros2.conftest import InProcessAgent, Probe, double_config, home_joints
from tests.ros2.test_stops import LEFT

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

TOPIC = "/left_arm_controller/joint_trajectory"


def test_a_monitor_on_the_command_topic_never_stands_in_for_a_controller_still_being_configured(
    start_double, probe: Probe, yam
) -> None:
    """The stand-in's controller nodes are up from the start but subscribe to their command topics
    only 4 s later (controllers a spawner is still configuring), while the probe, a monitor on every
    command topic as a bridge or a logger is, listens from the start and is seen by the agent first.
    The stack check waits for the controller's own subscription, and the first move is followed to
    the target. The stack check used to take any subscriber that was not `ros2 topic echo` or `ros2
    bag` for the controller: in `tests/ros2/test_stops.py` the probe was seen before the stand-in's
    subscription (its discovery record can come a DDS heartbeat period, 3 s, after its joint
    states), and the move went out to nobody: "left_arm stopped short of the target ... (max 1.200
    rad)" in 2 of 12 runs.

    Mutation tried by hand: pear_agent/ros2/stack_check.py `_controller_listens` without the line
    `return False  # the controller's node is up: ...` (the old rule): the check passes on the
    probe's subscription, 2 of 2 runs failing "the check passed before the controller subscribed"."""
    double = start_double(double_config(yam, cameras={}, subscribe_after_s=4.0))
    agent = InProcessAgent(yam, wait_for_controllers_s=15.0)
    try:

        def seen() -> bool:
            infos = agent.node.get_subscriptions_info_by_topic(TOPIC)
            return "pear_test_probe" in [i.node_name for i in infos]

        probe.wait_for(seen, 20, "the monitor's subscription, seen by the agent")
        assert agent.backend.check_stack() is None
        checked = time.monotonic()
        subscribed = double.events("subscribed")
        early = "the check passed before the controller subscribed"
        assert subscribed and subscribed[0]["t"] < checked, early
        joints = list(yam.parts["left_arm"].joints)
        start = np.array([home_joints(yam)[j] for j in joints])
        target = start + np.array([0.5, 0.0, 0.0, 0.0, 0.0, 0.0])
        outcome = agent.backend.execute({"left_arm": PartCommand(joints_rad=target)})
        assert outcome.status == "reached", outcome
        moves = [e for e in double.trajectories(LEFT) if e["accepted"] and e["points"] > 1]
        assert len(moves) == 1, double.trajectories(LEFT)
        np.testing.assert_allclose(moves[0]["last"], target, atol=1e-6)
    finally:
        agent.close()
