"""Image decoding and trajectory planning for the ROS 2 path, on real message classes."""

from __future__ import annotations

import time

import numpy as np
import pytest

from pear_agent.ros2 import conversions as cv

msgs = pytest.importorskip("sensor_msgs.msg", reason="ROS 2 wheels not installed")
from builtin_interfaces.msg import Duration  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402


def _rgb() -> np.ndarray:
    rng = np.random.default_rng(0)
    img = np.zeros((24, 32, 3), np.uint8)
    img[:, :16] = [200, 30, 10]
    img[:, 16:] = rng.integers(0, 255, (24, 16, 3))
    return img


def test_image_roundtrip_and_encodings() -> None:
    rgb = _rgb()
    msg = cv.fill_image(Image(), rgb)
    assert np.array_equal(cv.image_to_rgb(msg), rgb)
    msg.encoding, msg.data = "bgr8", rgb[:, :, ::-1].tobytes()
    assert np.array_equal(cv.image_to_rgb(msg), rgb)
    padded = Image(height=24, width=32, encoding="mono8", step=40)
    padded.data = np.pad(rgb[:, :, 0], ((0, 0), (0, 8))).tobytes()
    assert np.array_equal(cv.image_to_rgb(padded)[:, :, 1], rgb[:, :, 0])
    with pytest.raises(cv.ImageDecodeError, match="encoding '16UC1' is not supported"):
        cv.image_to_rgb(Image(height=2, width=2, encoding="16UC1", step=4, data=bytes(8)))
    with pytest.raises(cv.ImageDecodeError, match="expected"):
        cv.image_to_rgb(Image(height=24, width=32, encoding="rgb8", step=96, data=bytes(10)))


def test_compressed_roundtrip() -> None:
    rgb = _rgb()
    out = cv.compressed_to_rgb(cv.fill_compressed(CompressedImage(), rgb, quality=95))
    assert out.shape == rgb.shape
    assert np.abs(out[:, :16].astype(int) - rgb[:, :16]).mean() < 4  # JPEG: close, not equal
    with pytest.raises(cv.ImageDecodeError, match="could not be decoded"):
        cv.compressed_to_rgb(CompressedImage(format="jpeg", data=b"not a jpeg"))
    assert cv.is_compressed_topic("/cam/image_raw/compressed") and not cv.is_compressed_topic(
        "/cam/image_raw"
    )


def test_ruckig_plan_respects_cap_acceleration_limits_and_ends_at_rest() -> None:
    names = [f"j{i}" for i in range(3)]
    lo, hi = np.array([-1.0, -1.0, 0.0]), np.array([1.0, 1.0, 2.0])
    q0 = np.array([0.0, 0.5, 1.0])
    v0 = np.array([0.4, 0.0, -0.2])  # planned from the measured state, moving
    limits = cv.MoveLimits(1.5, 4.0, 40.0, lo, hi, 0.05)
    plan = cv.ruckig_plan(names, q0, np.array([0.9, -3.0, 1.0]), limits, v0=v0)
    np.testing.assert_allclose(plan.positions[-1], [0.9, -1.0, 1.0])  # the target is clipped into the limits
    assert np.all(np.diff(plan.times_s) > 0) and plan.times_s[0] > 0
    assert np.all(plan.velocities[-1] == 0)
    assert np.max(np.abs(plan.velocities)) <= 1.5 + 1e-9
    acc = (
        np.diff(np.vstack([v0, plan.velocities[:-1]]), axis=0)
        / np.diff(np.concatenate([[0], plan.times_s[:-1]]))[:, None]
    )
    assert np.max(np.abs(acc)) <= 4.0 * 1.05
    msg = cv.fill_trajectory(JointTrajectory(), plan, JointTrajectoryPoint, Duration)
    assert cv.trajectory_violations(msg, names, lo, hi, 1.5, start=q0) == []
    assert cv.jtc_rejection(msg, names) is None
    names2, times, pos, vel = cv.trajectory_arrays(msg)
    assert names2 == names and np.allclose(times, plan.times_s) and np.allclose(pos, plan.positions)
    assert np.allclose(vel, plan.velocities)
    tiny = cv.ruckig_plan(names, q0, q0, cv.MoveLimits(1.5, 4.0, 40.0, lo, hi))
    assert tiny.duration_s == pytest.approx(cv.MIN_SEGMENT_S) and len(tiny.times_s) >= 1


def test_a_hold_from_an_old_measurement_lasts_long_enough() -> None:
    """The arm may have moved (cap x age) since the measurement, and must brake from the measured
    speed: the hold lasts 1.25 x age + 20 ms, or speed / acceleration limit, or the minimum."""
    amax = 4.0
    cases = {(0.0, 0.0): 0.1, (0.24, 0.0): 0.32, (0.24, 1.5): 0.375, (1.0, 1.5): 1.27}
    for (age, speed), expected in cases.items():
        assert cv.hold_time_s(age, np.array([speed, 0.0]), amax) == pytest.approx(expected)
    # never clipped into the limits: an arm outside them (b = 2.0 > 1.0) is held where it is
    plan = cv.hold_plan(["a", "b"], np.array([0.1, 2.0]), np.array([-1, -1]), np.array([1, 1]), 0.3)
    msg = cv.fill_trajectory(JointTrajectory(), plan, JointTrajectoryPoint, Duration)
    assert len(msg.points) == 1
    np.testing.assert_allclose(msg.points[0].positions, [0.1, 2.0])
    assert cv.jtc_rejection(msg, ["a", "b"]) is None


def _jtc_reference(q0: np.ndarray, v0: np.ndarray, plan: cv.TrajectoryPlan, dt: float = 0.001):
    """What joint_trajectory_controller commands for `plan` sent to an arm at (q0, v0): cubic
    segments from the measured state through the points (tests/ros2/jtc_double.py's own code)."""
    from tests.ros2.jtc_double import Point, Trajectory

    traj = Trajectory(
        0.0, plan.times_s, [Point(p, v, None) for p, v in zip(plan.positions, plan.velocities, strict=True)]
    )
    traj.first_sample(0.0, Point(q0, v0, None))
    times = np.arange(0.0, plan.duration_s + 0.2, dt)
    rows = [traj.sample(t) for t in times]
    return times, np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


@pytest.mark.parametrize("speed", [0.3, 0.9, 1.5])
def test_a_brake_is_followed_by_the_controller_within_the_deceleration_and_never_reverses(
    speed: float,
) -> None:
    names = ["a", "b", "c"]
    q = np.array([0.2, -0.4, 1.0])
    v = np.array([speed, -0.5 * speed, 0.0])
    decel, jerk = 8.0, 100.0
    plan = cv.brake_plan(names, q, v, decel, jerk, dt=0.05)
    assert np.all(plan.velocities[-1] == 0) and np.all(np.diff(plan.times_s) > 0)
    assert plan.times_s[0] >= min(cv.BRAKE_FIRST_POINT_S, plan.duration_s) - 1e-9
    msg = cv.fill_trajectory(JointTrajectory(), plan, JointTrajectoryPoint, Duration)
    assert cv.jtc_rejection(msg, names) is None
    t, ref, vel = _jtc_reference(q, v, plan)
    acc = np.diff(vel, axis=0) / np.diff(t)[:, None]
    # every moving joint decelerates within the limit (+ 5 %: the cubics only approximate the
    # jerk-limited profile) and never turns back; the one at rest stays put
    assert float(np.max(np.abs(acc[:, :2]))) <= 1.05 * decel
    along = ref[:, :2] * np.sign(v[:2])
    assert float(np.max(np.maximum.accumulate(along, axis=0) - along)) < 1e-6
    assert np.max(np.abs(ref[:, 2] - q[2])) < 1e-9
    # ... and comes to rest no sooner than the deceleration allows, and along a symmetric jerk-
    # limited profile (every joint at rest at the same time: it brakes along its path)
    stop = np.abs(plan.positions[-1][:2] - q[:2])
    assert np.all(stop >= v[:2] ** 2 / (2 * decel) * 0.99), stop
    np.testing.assert_allclose(stop, np.abs(v[:2]) * plan.duration_s / 2, rtol=0.01)


def test_a_brake_from_rest_is_one_point_where_the_arm_is_and_predictions_are_bounded() -> None:
    q = np.array([3.5, -0.1])  # outside any limits: held there, never moved into them
    plan = cv.brake_plan(["a", "b"], q, np.zeros(2), 8.0, 100.0)
    assert plan.positions.shape == (1, 2) and len(plan.times_s) == 1
    np.testing.assert_allclose(plan.positions[0], q)
    assert plan.times_s[0] == pytest.approx(cv.MIN_SEGMENT_S)
    qp, vp = cv.predict_state(np.array([0.0]), np.array([1.0]), 0.02, 0.1)
    assert qp[0] == pytest.approx(0.02) and vp[0] == pytest.approx(1.0)
    qp, _ = cv.predict_state(np.array([0.0]), np.array([1.0]), 5.0, 0.1)
    assert qp[0] == pytest.approx(0.1)  # a stale state is not extrapolated for seconds


def _bad_messages(names: list[str]) -> dict[str, JointTrajectory]:
    def pt(pos, t, vel=None):
        return JointTrajectoryPoint(
            positions=pos,
            velocities=vel or [],
            time_from_start=Duration(sec=int(t), nanosec=int((t % 1) * 1e9)),
        )

    ok = [pt([0.0, 0.0], 0.5)]
    stamped = JointTrajectory(joint_names=names, points=ok)
    stamped.header.stamp.sec = 1  # 1970: ends in the past
    return {
        "empty": JointTrajectory(joint_names=names),
        "no names": JointTrajectory(joint_names=[], points=ok),
        "partial": JointTrajectory(joint_names=names[:1], points=[pt([0.0], 0.5)]),
        "unknown joint": JointTrajectory(joint_names=[names[0], "x"], points=ok),
        "moving at the end": JointTrajectory(joint_names=names, points=[pt([0.0, 0.0], 0.5, [0.1, 0.0])]),
        "times not increasing": JointTrajectory(
            joint_names=names, points=[pt([0.0, 0.0], 0.5), pt([0.1, 0.0], 0.5)]
        ),
        "positions size": JointTrajectory(joint_names=names, points=[pt([0.0], 0.5)]),
        "velocities size": JointTrajectory(joint_names=names, points=[pt([0.0, 0.0], 0.5, [0.0])]),
        "ends in the past": stamped,
    }


def test_sim_robot_rejects_exactly_what_the_jtc_double_rejects() -> None:
    """conversions.jtc_rejection (sim_robot_node) against tests/ros2/jtc_double.validate, written
    separately from ros2_controllers' validate_trajectory_msg."""
    from tests.ros2.jtc_double import validate

    names = ["a", "b"]
    for case, msg in _bad_messages(names).items():
        assert validate(msg, names, time.time()) is not None, case
        assert cv.jtc_rejection(msg, names, time.time()) is not None, case
    one_point_at_zero = JointTrajectory(
        joint_names=["b", "a"],
        points=[JointTrajectoryPoint(positions=[0.0, 0.0], time_from_start=Duration())],
    )
    assert validate(one_point_at_zero, names, time.time()) is None  # order free; t = 0 allowed first
    assert cv.jtc_rejection(one_point_at_zero, names, time.time()) is None


def test_fit_image_crops_to_the_declared_aspect_then_resizes() -> None:
    wide = np.zeros((720, 1280, 3), np.uint8)
    wide[:, 640 - 100 : 640 + 100] = 255  # a bright centre column survives the centre crop
    out = cv.fit_image(wide, 256, 256)
    assert out.shape == (256, 256, 3) and out[128, 128, 0] == 255 and out[128, 2, 0] == 0
    same = np.zeros((256, 256, 3), np.uint8)
    assert cv.fit_image(same, 256, 256) is same


def test_violations_are_caught() -> None:
    names = ["a", "b"]
    lo, hi = np.array([-1.0, -1.0]), np.array([1.0, 1.0])
    plan = cv.ruckig_plan(names, np.zeros(2), np.array([0.8, 0.0]), cv.MoveLimits(1.0, 4.0, 40.0, lo, hi))
    too_fast = cv.TrajectoryPlan(names, plan.times_s / 2, plan.positions, plan.velocities * 2)
    msg = cv.fill_trajectory(JointTrajectory(), too_fast, JointTrajectoryPoint, Duration)
    assert any("exceeds" in v for v in cv.trajectory_violations(msg, names, lo, hi, 1.0))
    outside = cv.TrajectoryPlan(names, plan.times_s, plan.positions + 0.5, plan.velocities)
    msg = cv.fill_trajectory(JointTrajectory(), outside, JointTrajectoryPoint, Duration)
    assert "a position is outside the joint limits" in cv.trajectory_violations(msg, names, lo, hi, 1.0)
    moving = cv.TrajectoryPlan(names, plan.times_s, plan.positions, plan.velocities + 0.1)
    msg = cv.fill_trajectory(JointTrajectory(), moving, JointTrajectoryPoint, Duration)
    assert "the final point's velocity is not zero" in cv.trajectory_violations(msg, names, lo, hi, 1.0)
    msg = cv.fill_trajectory(JointTrajectory(), plan, JointTrajectoryPoint, Duration)
    assert cv.trajectory_violations(msg, ["b", "a"], lo, hi, 1.0)[0].startswith("joint names")
    backwards = cv.TrajectoryPlan(names, plan.times_s[::-1].copy(), plan.positions, plan.velocities)
    msg = cv.fill_trajectory(JointTrajectory(), backwards, JointTrajectoryPoint, Duration)
    assert any("strictly increasing" in v for v in cv.trajectory_violations(msg, names, lo, hi, 1.0))
