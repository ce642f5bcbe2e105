"""The YAM driver's trajectory rules on real trajectory_msgs messages (no ROS graph): what the stock
joint_trajectory_controller rejects, what the driver rejects on top (limits, speed cap), and how it
interpolates and stops."""

from __future__ import annotations

import numpy as np
import pytest

from pear_agent.ros2.yam_trajectory import (
    SPEED_TOLERANCE,
    JointGroup,
    TrajectoryRejected,
    parse_trajectory,
    stop_spline,
    trajectory_identity,
)

pytest.importorskip("trajectory_msgs", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev)")

from builtin_interfaces.msg import Duration
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

JOINTS = [f"left_joint{i}" for i in range(1, 7)]
VMAX = 1.5
GROUP = JointGroup("left_arm_controller", JOINTS, -np.full(6, 2.5), np.full(6, 2.5), VMAX)
ZERO = np.zeros(6)


def _msg(times, positions, velocities=None, names=None, accelerations=None) -> JointTrajectory:
    msg = JointTrajectory()
    msg.joint_names = list(JOINTS if names is None else names)
    for i, t in enumerate(times):
        p = JointTrajectoryPoint()
        p.positions = [float(x) for x in positions[i]]
        if velocities is not None:
            p.velocities = [float(x) for x in velocities[i]]
        if accelerations is not None:
            p.accelerations = [float(x) for x in accelerations[i]]
        ns = round(t * 1e9)
        p.time_from_start = Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        msg.points.append(p)
    return msg


def _min_jerk(q0, q1, dt=0.05):
    """A minimum-jerk move whose peak speed is exactly the cap, sampled every dt (as the agent sends)."""
    delta = np.asarray(q1) - np.asarray(q0)
    duration = 1.875 * float(np.max(np.abs(delta))) / VMAX
    n = int(np.ceil(duration / dt))
    tau = np.arange(1, n + 1) / n
    s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
    ds = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / duration
    vel = np.outer(ds, delta)
    vel[-1] = 0
    return tau * duration, q0 + np.outer(s, delta), vel


def _reject(msg, start=ZERO, **kw) -> str:
    with pytest.raises(TrajectoryRejected) as err:
        parse_trajectory(msg, GROUP, start, ZERO, **kw)
    return str(err.value)


def test_accepts_the_agents_moves_at_the_cap_and_follows_them() -> None:
    rng = np.random.default_rng(0)
    for _ in range(30):
        q0, q1 = rng.uniform(-1.5, 1.5, 6), rng.uniform(-1.5, 1.5, 6)
        times, pos, vel = _min_jerk(q0, q1)
        spline = parse_trajectory(_msg(times, pos, vel), GROUP, q0, ZERO)
        assert spline.kind == "cubic"
        peak, _ = spline.peak_speeds()
        assert np.max(peak) <= VMAX * (1 + SPEED_TOLERANCE)
        assert np.max(peak) > 0.97 * VMAX  # it does move at the cap: not slowed down
        for t, p in zip(times, pos, strict=True):  # through every point, on time
            np.testing.assert_allclose(spline.sample(t)[0], p, atol=1e-9)
        np.testing.assert_allclose(spline.sample(0.0)[0], q0)
        np.testing.assert_allclose(spline.sample(times[-1] + 1)[0], q1)


def test_joint_order_of_the_message_is_mapped_to_the_controllers() -> None:
    order = [5, 0, 4, 1, 3, 2]
    target = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    msg = _msg([2.0], [target[order]], [np.zeros(6)], names=[JOINTS[i] for i in order])
    spline = parse_trajectory(msg, GROUP, ZERO, ZERO)
    np.testing.assert_allclose(spline.final, target)


def test_one_point_at_the_current_position_holds() -> None:
    q = np.array([0.3, 1.0, 0.9, -0.5, 0.1, 0.2])
    spline = parse_trajectory(_msg([0.1], [q], [ZERO]), GROUP, q, ZERO)
    for t in np.linspace(0, 2, 21):
        np.testing.assert_allclose(spline.sample(t)[0], q)


def test_interpolation_kinds_like_jtc() -> None:
    q1 = np.full(6, 0.5)
    linear = parse_trajectory(_msg([1.0], [q1]), GROUP, ZERO, ZERO)
    assert linear.kind == "linear"
    np.testing.assert_allclose(linear.sample(0.5)[0], q1 / 2)
    quintic = parse_trajectory(_msg([1.0], [q1], [ZERO], accelerations=[ZERO]), GROUP, ZERO, ZERO)
    assert quintic.kind == "quintic"
    s = 0.3
    np.testing.assert_allclose(quintic.sample(s)[0], q1 * (10 * s**3 - 15 * s**4 + 6 * s**5))  # min-jerk


@pytest.mark.parametrize(
    ("msg", "reason"),
    [
        (_msg([], []), "empty trajectory"),
        (_msg([1.0], [[0.0]], names=[]), "empty joint names"),
        (_msg([1.0], [np.zeros(6)], names=[*JOINTS[:5], "right_joint6"]), "right_joint6 is not one of"),
        (_msg([1.0], [np.zeros(5)], names=JOINTS[:5]), "lacks left_joint6"),
        (_msg([1.0, 1.0], [ZERO, ZERO]), "not strictly increasing between points 0 and 1"),
        (_msg([1.0, 0.5], [ZERO, ZERO]), "not strictly increasing"),
        (_msg([1.0], [np.zeros(5)]), "has 5 positions for 6 joint names"),
        (_msg([1.0], [ZERO], [np.full(6, 0.1)]), "last point's velocity is not zero"),
        (_msg([1.0], [np.full(6, np.nan)]), "not finite"),
        (_msg([1.0], [[3.0, 0, 0, 0, 0, 0]]), "left_joint1 = 3.0000 is outside its limits"),
        (_msg([0.5, 1.0], [np.full(6, 0.2), ZERO], [np.full(6, 2.0), ZERO]), "over-speed: point 0"),
        (_msg([0.1, 0.2], [np.full(6, 0.01), np.full(6, 0.6)]), "over-speed: left_joint1 would move at"),
        (_msg([0.2], [np.full(6, 1.0)]), "from the current position to point 0"),
        (_msg([0.0, 1.0], [np.full(6, 0.5), np.full(6, 0.6)]), "point 0 at time 0"),
    ],
)
def test_rejections_name_the_reason(msg: JointTrajectory, reason: str) -> None:
    assert reason in _reject(msg)


def test_effort_fields_are_rejected() -> None:
    msg = _msg([1.0], [ZERO])
    msg.points[0].effort = [0.0] * 6
    assert "effort" in _reject(msg)


def test_stamps_in_the_past_are_rejected_future_ones_wait() -> None:
    msg = _msg([1.0], [np.full(6, 0.2)], [ZERO])
    assert "ends" in _reject(msg, lateness_s=2.0)
    assert "in the past" in _reject(msg, lateness_s=0.5, max_start_lateness_s=0.1)
    assert parse_trajectory(msg, GROUP, ZERO, ZERO, lateness_s=-1.0).duration_s == pytest.approx(1.0)


def test_a_speed_just_over_the_cap_is_rejected_not_clipped() -> None:
    over = VMAX * (1 + 2 * SPEED_TOLERANCE)
    msg = _msg([1.0], [np.array([over, 0, 0, 0, 0, 0])])  # linear: mean speed = peak speed
    assert "over-speed" in _reject(msg)
    ok = _msg([1.0], [np.array([VMAX, 0, 0, 0, 0, 0])])
    assert parse_trajectory(ok, GROUP, ZERO, ZERO).final[0] == pytest.approx(VMAX)


def test_replacing_a_moving_trajectory_starts_from_the_moving_reference() -> None:
    q = np.full(6, 0.4)
    v = np.full(6, 1.2)
    spline = parse_trajectory(_msg([0.5], [np.full(6, 0.7)], [ZERO]), GROUP, q, v)
    p0, v0 = spline.sample(0.0)
    np.testing.assert_allclose(p0, q)  # no jump
    np.testing.assert_allclose(v0, v)  # no velocity step either (cubic from the moving state)


def test_stop_ramp_comes_to_rest_within_two_centiradians_and_the_cap() -> None:
    q = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    v = np.array([1.5, -1.5, 0.7, 0.0, -0.2, 1.0])
    ramp = stop_spline(q, v, np.full(6, VMAX), 150.0, 30000.0, 0.01)
    assert ramp.duration_s < 0.05
    assert float(np.max(np.abs(ramp.final - q))) < 0.02
    assert np.all(np.sign(ramp.final - q) == np.sign(v))  # it keeps going the same way, never back
    peak, _ = ramp.peak_speeds()
    assert np.all(peak <= VMAX + 1e-9)
    at_rest = stop_spline(q, ZERO, np.full(6, VMAX), 150.0, 30000.0, 0.01)
    assert len(at_rest.times_s) == 1 and np.allclose(at_rest.final, q)  # one knot: a hold where it is


def test_a_trajectorys_identity_survives_the_wire_and_tells_a_stop_from_its_move() -> None:
    """The agent's unstamped move and the stop braked from its middle differ; the identity of a
    message is the same after DDS's serialization (the agent hashes what it sent, the driver what
    it received); a change of one position in the last bit changes it."""
    from rclpy.serialization import deserialize_message, serialize_message

    from pear_agent.ros2 import conversions as cv

    limits = cv.MoveLimits(VMAX, 4.0, 40.0, GROUP.lower, GROUP.upper, 0.05)
    move = cv.ruckig_plan(JOINTS, ZERO, np.full(6, 1.0), limits)
    q, v = move.state(move.duration_s / 2)
    stop = cv.brake_plan(JOINTS, q, v, 20.0, 400.0, 0.05)
    msgs = [cv.fill_trajectory(JointTrajectory(), p, JointTrajectoryPoint, Duration) for p in (move, stop)]
    assert msgs[0].header.stamp.sec == 0 == msgs[1].header.stamp.sec  # unstamped, both
    ids = [trajectory_identity(m) for m in msgs]
    assert ids[0] != ids[1]
    wire = deserialize_message(serialize_message(msgs[1]), JointTrajectory)
    assert trajectory_identity(wire) == ids[1]
    wire.points[-1].positions[0] = float(np.nextafter(wire.points[-1].positions[0], 9.0))
    assert trajectory_identity(wire) != ids[1]
