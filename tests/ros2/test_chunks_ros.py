"""A chunk on ROS 2: one multi-point JointTrajectory the stock joint_trajectory_controller
accepts, followed through its waypoints without stopping, and an e-stop mid-chunk that brakes within
the stop deceleration. The ROS backend in this process against the JTC stand-in over real DDS
(tests/ros2/jtc_double.py: the controller's own interpolation, servos with a lag); speeds and
decelerations are measured from /joint_states."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from pear_agent.robot.backend import PartCommand
from tests.ros2.conftest import LOADED, STARTUP_S, Probe, double_config, home_joints
from tests.ros2.test_stops import DECEL_SLACK, motion, stamped_series

pytestmark = pytest.mark.wallclock

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")

LEFT = "left_arm_controller"


def _accepted_at(double: Any, since_mono: float) -> float | None:
    """System time at which the stand-in took the first trajectory sent after `since_mono` (its
    monotonic clock, this machine's): the controller's time 0 of that trajectory. The waypoint times
    are counted from there, not from when the test called the backend, which first waits for a
    fresh state (up to `wait_for_fresh_state_s`) and plans: seconds on a loaded machine."""
    sent = [e for e in double.trajectories(LEFT) if e["t"] >= since_mono and e["accepted"]]
    return sent[0]["t"] + (time.time() - time.monotonic()) if sent else None


def _chunk(a: Any, yam: Any) -> tuple[list[str], list[dict[str, PartCommand]]]:
    joints = list(yam.parts["left_arm"].joints)
    start = np.array([home_joints(yam)[j] for j in joints])
    lower, upper = a.backend.parts["left_arm"].lower, a.backend.parts["left_arm"].upper
    legs = [np.array([0.4, 0.3, -0.3, 0.2, 0.0, 0.0])] * 3
    wps, q = [], start
    for leg in legs:
        q = np.clip(q + leg, lower + 0.05, upper - 0.05)
        wps.append(q)
    return joints, [{"left_arm": PartCommand(joints_rad=w)} for w in wps]


def test_a_chunk_is_one_accepted_trajectory_followed_without_stopping(start_double, probe: Probe, agent, yam):
    double = start_double(double_config(yam, cameras={}))
    a = agent(**LOADED)
    assert a.backend.check_stack() is None
    joints, steps = _chunk(a, yam)
    probe.wait_for(
        lambda: stamped_series(probe, joints, time.time() - 0.5)[0].size, STARTUP_S, "joint states"
    )
    t_go, mono_go = time.time(), time.monotonic()
    outcome, reached = a.backend.execute_chunk(steps)
    assert outcome.status == "reached" and reached == 3, outcome
    sent = [e for e in double.trajectories(LEFT) if e["t"] >= mono_go]
    assert len(sent) == 1 and sent[0]["accepted"] and sent[0]["points"] > 3, sent  # one message, many points
    passed = a.backend.chunk_waypoint_times_s["left_arm"]
    t_start = _accepted_at(double, mono_go)
    assert t_start is not None
    t, q = stamped_series(probe, joints, t_go)
    tv, v, _ = motion(t, q)
    speed = np.max(np.abs(v), axis=1)
    # from just before the first waypoint to just after the second (the controller's timeline; the
    # 0.1 s covers its servo lag): never at rest
    inside = (tv > t_start + passed[0] - 0.1) & (tv < t_start + passed[1] + 0.1)
    assert inside.sum() > 5
    print(f"slowest measured speed between waypoints: {speed[inside].min():.3f} rad/s")
    assert speed[inside].min() > 0.1, speed[inside].min()
    np.testing.assert_allclose(q[-1], steps[-1]["left_arm"].joints_rad, atol=0.02)


def test_an_estop_mid_chunk_brakes_within_the_stop_deceleration(start_double, probe: Probe, agent, yam):
    double = start_double(double_config(yam, cameras={}))
    a = agent(stop_deceleration_rad_s2=8.0, stop_jerk_rad_s3=100.0, **LOADED)
    assert a.backend.check_stack() is None
    joints, steps = _chunk(a, yam)
    probe.wait_for(
        lambda: stamped_series(probe, joints, time.time() - 0.5)[0].size, STARTUP_S, "joint states"
    )
    result: list[Any] = []
    mover = threading.Thread(target=lambda: result.append(a.backend.execute_chunk(steps)), daemon=True)
    mono_go = time.monotonic()
    mover.start()

    def past_first_waypoint() -> bool | None:
        times = getattr(a.backend, "chunk_waypoint_times_s", {}).get("left_arm")
        t_start = _accepted_at(double, mono_go) if times else None
        return True if t_start is not None and time.time() > t_start + times[0] + 0.05 else None

    probe.wait_for(past_first_waypoint, 30, "the chunk past its first waypoint")
    t_stop = time.time()
    a.backend.emergency_stop("test")
    mover.join(timeout=30)
    assert result and result[0][0].status == "stopped" and result[0][1] < 3, result
    time.sleep(1.5)
    t, q = stamped_series(probe, joints, t_stop - 0.2)
    tv, v, acc = motion(t, q)
    k0 = int(np.searchsorted(tv, t_stop))
    v_at_stop = v[max(0, k0 - 1)]
    moving = np.abs(v_at_stop) > 0.2
    assert np.any(moving), v_at_stop
    opposing = -acc[k0:] * np.sign(v_at_stop)[None, :]
    peak = float(np.max(opposing[:, moving]))
    print(f"e-stop mid-chunk: peak deceleration {peak:.2f} rad/s2 (limit 8 + 25 %)")
    assert 0.3 * 8.0 < peak <= DECEL_SLACK * 8.0, peak
    assert np.max(np.abs(v[-5:])) < 0.01, v[-5:]
