"""Velocities from the stamped position stream, and the braking plan anchored on them."""

from __future__ import annotations

import numpy as np

from pear_agent.ros2 import conversions as cv
from pear_agent.ros2 import joint_velocity as jv


def test_the_estimate_is_the_mean_velocity_over_the_window_of_stamps() -> None:
    e = jv.VelocityEstimator(window_s=0.03)
    assert e.estimate("j") is None
    t0 = 1_700_000_000.0  # header stamps (system time)
    for k in range(20):  # 100 Hz, 1.2 rad/s
        e.add("j", t0 + 0.01 * k, 0.3 + 1.2 * 0.01 * k)
    est = e.estimate("j")
    assert est is not None
    assert abs(est.velocity - 1.2) < 1e-4 and 0.01 <= est.lag_s <= 0.021, est  # stamps: ~0.2 us steps
    e.add("j", t0 + 0.19, 99.0)  # a repeated or older stamp is not motion
    e.add("j", t0 + 0.5, float("nan"))  # nor a non-finite position
    assert abs(e.estimate("j").velocity - 1.2) < 1e-4  # type: ignore[union-attr]
    e.add("j", t0 + 1.0, 0.3)  # after a 0.8 s gap: nothing known about the motion now
    assert e.estimate("j") is None


def test_the_stop_velocity_is_published_else_estimated_else_the_trajectory_never_rest() -> None:
    nan = np.array([np.nan, np.nan])
    est = np.array([1.0, -0.5])
    plan = np.array([0.9, -0.4])
    assert jv.choose_velocity(np.array([0.2, 0.1]), est, 0.01, plan, 0.1)[1] == jv.PUBLISHED  # type: ignore[index]
    assert jv.choose_velocity(np.array([]), est, 0.01, plan, 0.1)[1] == jv.ESTIMATED  # type: ignore[index]
    assert jv.choose_velocity(nan, est, 0.5, plan, 0.1)[1] == jv.TRAJECTORY  # type: ignore[index]
    assert jv.choose_velocity(nan, nan, 0.01, plan, 0.1)[1] == jv.TRAJECTORY  # type: ignore[index]
    assert jv.choose_velocity(nan, nan, 0.01, None, 0.1) is None


def test_the_anchored_brake_never_goes_behind_the_measured_position() -> None:
    q = np.array([0.2, -0.1])
    v = np.array([1.5, -0.6])
    plan = cv.anchored_brake_plan(["a", "b"], q, v, 0.01, 0.2, 8.0, 100.0)
    assert np.all(plan.velocities[-1] == 0) and len(plan.times_s) >= 2
    along = (plan.positions - q) * np.sign(v)
    assert np.all(along >= 0), along
    # it brakes from the estimated speed: about v^2 / (2 a) further on, within the deceleration
    dist = plan.positions[-1] - q
    assert 0.9 * 1.5**2 / 16 < dist[0] < 1.5 * (1.5 / 8 + 0.15) + 0.02, dist
    dv = (
        np.diff(np.vstack([v, plan.velocities]), axis=0)
        / np.diff(np.concatenate([[0.0], plan.times_s]))[:, None]
    )
    assert np.max(np.abs(dv)) <= 8.0 * 1.05, dv


def test_the_driver_publishes_estimated_velocities_where_its_feedback_has_none() -> None:
    """yam_driver_node: i2rt feedback without velocities (NaN) gets the estimate from the positions'
    stamps, and the status says so; finite feedback passes unchanged and switches the source back."""
    from types import SimpleNamespace

    from pear_agent.ros2.yam_driver_node import YamDriver

    warnings: list[str] = []
    drv = SimpleNamespace(
        _velocity=jv.VelocityEstimator(),
        velocity_source=jv.PUBLISHED,
        _status_dirty=False,
        log=SimpleNamespace(warning=warnings.append),
        spec=SimpleNamespace(part="left_arm"),
    )
    t0 = 1_700_000_000.0
    vel = np.full(7, np.nan)
    for k in range(10):  # joint 0 at 0.8 rad/s, the gripper still, at 100 Hz
        pos = np.array([0.8 * 0.01 * k, 0, 0, 0, 0, 0, 0.02])
        out = YamDriver._fill_velocity(drv, pos, vel, t0 + 0.01 * k)  # type: ignore[arg-type]
    assert abs(out[0] - 0.8) < 1e-3 and np.all(np.abs(out[1:]) < 1e-9), out
    assert drv.velocity_source == jv.ESTIMATED and drv._status_dirty and len(warnings) == 1
    measured = np.array([0.5, 0, 0, 0, 0, 0, 0.0])
    assert np.array_equal(YamDriver._fill_velocity(drv, pos, measured, t0 + 0.2), measured)  # type: ignore[arg-type]
    assert drv.velocity_source == jv.PUBLISHED
