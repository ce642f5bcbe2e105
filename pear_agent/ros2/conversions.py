"""Message <-> numpy conversions and trajectory planning for the ROS 2 path.

Pure numpy/OpenCV on duck-typed messages (anything with the fields of sensor_msgs/Image,
CompressedImage, trajectory_msgs/JointTrajectory), so it is testable without a ROS graph and
needs no cv_bridge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np

from pear_agent.ros2.graph import is_compressed_topic as is_compressed_topic  # read here too

MIN_SEGMENT_S = 0.1
"""Shortest trajectory we send: a zero-length move still becomes one point 0.1 s ahead."""

BRAKE_SETTLE_S = 1.0
"""A braking trajectory ends with its rest point repeated this long after the stop: a stamped
stop that arrives late is still accepted (the controller rejects one that ends in the past)."""

BRAKE_FIRST_POINT_S = 0.15
"""The first point of a braking trajectory lies at least this far ahead. The controller fits a
cubic from the state it measures when the message takes effect to the first point; the arm has
moved on by (speed x the command's unknown latency) meanwhile, which that cubic absorbs as an
extra deceleration of about 6 x offset / (first point's time)^2: 15 mrad over 0.15 s is 4 rad/s2,
over the 0.02 s of a dense trajectory it would be 225 rad/s2."""


class ImageDecodeError(ValueError):
    pass


def image_to_rgb(msg: Any) -> np.ndarray:
    """sensor_msgs/Image (rgb8, bgr8, rgba8, bgra8, mono8) -> H x W x 3 uint8 RGB."""
    enc = str(msg.encoding).lower()
    channels = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1, "8uc1": 1, "8uc3": 3}
    if enc not in channels:
        raise ImageDecodeError(f"image encoding {msg.encoding!r} is not supported (use rgb8/bgr8/mono8)")
    h, w, c = int(msg.height), int(msg.width), channels[enc]
    step = int(msg.step) or w * c
    buf = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    if buf.size < h * step:
        raise ImageDecodeError(f"image data has {buf.size} bytes, expected {h * step} ({h} rows of {step})")
    img = buf[: h * step].reshape(h, step)[:, : w * c].reshape(h, w, c)
    if c == 1:
        return np.repeat(img, 3, axis=2)
    if enc.startswith("bgr"):
        img = img[:, :, 2::-1] if c == 4 else img[:, :, ::-1]
    return np.ascontiguousarray(img[:, :, :3])


def compressed_to_rgb(msg: Any) -> np.ndarray:
    """sensor_msgs/CompressedImage (JPEG or PNG) -> H x W x 3 uint8 RGB."""
    buf = np.frombuffer(bytes(msg.data), dtype=np.uint8)
    bgr = cv2.imdecode(buf, cv2.IMREAD_COLOR) if buf.size else None
    if bgr is None:
        raise ImageDecodeError(f"compressed image ({msg.format!r}, {buf.size} bytes) could not be decoded")
    return np.ascontiguousarray(bgr[:, :, ::-1])


def fill_image(msg: Any, rgb: np.ndarray) -> Any:
    """Fill a sensor_msgs/Image with an RGB array (rgb8)."""
    h, w = rgb.shape[:2]
    msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step = h, w, "rgb8", 0, w * 3
    msg.data = np.ascontiguousarray(rgb, dtype=np.uint8).tobytes()
    return msg


def fill_compressed(msg: Any, rgb: np.ndarray, quality: int = 85) -> Any:
    ok, jpg = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]), [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise ImageDecodeError("JPEG encoding failed")
    msg.format = "rgb8; jpeg compressed bgr8"
    msg.data = jpg.tobytes()
    return msg


def fit_image(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """Centre-crop to the declared aspect ratio, then resize to width x height (area filter):
    a 1280x720 camera reaches the model at the robot YAML's resolution, undistorted."""
    h, w = rgb.shape[:2]
    if (w, h) == (width, height):
        return rgb
    target = width / height
    if w / h > target:
        cw = max(1, round(h * target))
        x0 = (w - cw) // 2
        rgb = rgb[:, x0 : x0 + cw]
    elif w / h < target:
        ch = max(1, round(w / target))
        y0 = (h - ch) // 2
        rgb = rgb[y0 : y0 + ch]
    return np.ascontiguousarray(cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA))


@dataclass
class TrajectoryPlan:
    joint_names: list[str]
    times_s: np.ndarray
    """Strictly increasing, > 0, relative to the moment the trajectory is sent."""
    positions: np.ndarray
    """N x J"""
    velocities: np.ndarray
    """N x J; the last row is zero."""
    stamp_s: float = 0.0
    """header.stamp (system time) the times count from; 0 = from when the controller takes it."""

    @property
    def duration_s(self) -> float:
        return float(self.times_s[-1])

    def reference(self, t: float) -> np.ndarray:
        """Commanded positions at time t (linear between points; before the first, the first)."""
        if t >= self.times_s[-1]:
            return self.positions[-1]
        return np.array(
            [np.interp(t, self.times_s, self.positions[:, j]) for j in range(self.positions.shape[1])]
        )

    def state(self, t: float, start: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(positions, velocities) the controller commands at time t after the send: cubic Hermite
        through the points (as joint_trajectory_controller interpolates points that carry
        velocities), from `start` (position, at rest before the first point) when given."""
        n = self.positions.shape[1]
        if t >= self.times_s[-1]:
            return self.positions[-1].copy(), np.zeros(n)
        times = np.concatenate([[0.0], self.times_s])
        first = self.positions[0] if start is None else np.asarray(start, float)
        pos = np.vstack([first[None, :], self.positions])
        vel = np.vstack([np.zeros((1, n)) if start is not None else self.velocities[:1], self.velocities])
        t = max(0.0, t)
        i = int(np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 2))
        h = float(times[i + 1] - times[i])
        s = (t - times[i]) / h
        p0, p1, m0, m1 = pos[i], pos[i + 1], vel[i] * h, vel[i + 1] * h
        q = (2 * s**3 - 3 * s**2 + 1) * p0 + (s**3 - 2 * s**2 + s) * m0 + (-2 * s**3 + 3 * s**2) * p1
        q = q + (s**3 - s**2) * m1
        dq = (6 * s**2 - 6 * s) * p0 + (3 * s**2 - 4 * s + 1) * m0 + (-6 * s**2 + 6 * s) * p1
        dq = (dq + (3 * s**2 - 2 * s) * m1) / h
        return q, dq


def _start_velocity(v0: np.ndarray | None, n: int, vmax: float) -> np.ndarray:
    """The measured velocity a plan starts from (none: at rest), finite and within the speed cap."""
    return np.zeros(n) if v0 is None else np.clip(np.nan_to_num(np.asarray(v0, float)), -vmax, vmax)


def _ruckig_leg(
    q: np.ndarray, v: np.ndarray, target: Any, v_target: Any, vmax: float, amax: float, jmax: float
) -> tuple[Any, Any]:
    """One jerk-limited leg (ruckig) from (q, v) at zero acceleration to (target, v_target) at zero
    acceleration: (the trajectory, or None when there is none within the limits; ruckig's result)."""
    from ruckig import InputParameter, Result, Ruckig, Trajectory  # optional: ruckig

    n = len(q)
    inp = InputParameter(n)
    inp.current_position, inp.current_velocity, inp.current_acceleration = list(q), list(v), [0.0] * n
    inp.target_position, inp.target_velocity = list(target), list(v_target)
    inp.target_acceleration = [0.0] * n
    inp.max_velocity, inp.max_acceleration, inp.max_jerk = [vmax] * n, [amax] * n, [jmax] * n
    traj = Trajectory(n)
    result = Ruckig(n).calculate(inp, traj)
    return (traj if result in (Result.Working, Result.Finished) else None), result


@dataclass(frozen=True)
class MoveLimits:
    """What a planned move keeps within: the speed cap (rad/s), acceleration (rad/s^2) and jerk
    (rad/s^3) of every joint, the joints' range (rad), and the period its points are sampled at."""

    vmax: float
    amax: float
    jmax: float
    lower: np.ndarray
    upper: np.ndarray
    dt: float = 0.05

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.lower, float), np.asarray(self.upper, float)


def ruckig_plan(
    joint_names: list[str], q0: np.ndarray, q1: np.ndarray, limits: MoveLimits, v0: np.ndarray | None = None
) -> TrajectoryPlan:
    """A time-optimal, jerk-limited move (ruckig) from the measured state (q0, v0) to rest at q1,
    within the speed cap and acceleration limit, sampled every `dt`. The target is clipped into
    [lower, upper]; the start never is (a plan starts where the arm is), and the samples are
    clipped only when the start lies within the limits."""
    lower, upper = limits.bounds()
    vmax, amax, jmax, dt = limits.vmax, limits.amax, limits.jmax, limits.dt
    q0 = np.asarray(q0, float)
    q1 = np.clip(np.asarray(q1, float), lower, upper)
    inside = bool(np.all(q0 >= lower) and np.all(q0 <= upper))
    n = q0.size
    traj, result = _ruckig_leg(q0, _start_velocity(v0, n, vmax), q1, [0.0] * n, vmax, amax, jmax)
    if traj is None:
        raise ValueError(f"no trajectory within the limits ({result})")
    duration = max(MIN_SEGMENT_S, float(traj.duration))
    steps = max(1, math.ceil(duration / dt - 1e-9))
    times = np.arange(1, steps + 1) / steps * duration
    pos = np.empty((steps, n))
    vel = np.empty((steps, n))
    for i, t in enumerate(times):
        p, v, _ = traj.at_time(min(float(t), float(traj.duration)))
        pos[i], vel[i] = p, v
    if inside:
        pos = np.clip(pos, lower, upper)
    vel = np.clip(vel, -vmax, vmax)
    pos[-1], vel[-1] = q1, 0.0
    return TrajectoryPlan(list(joint_names), times, pos, vel)


def through_velocities(
    q0: np.ndarray, waypoints: list[np.ndarray], vmax: float, share: float = 0.7
) -> list[np.ndarray]:
    """The velocity to pass each waypoint with (the last: rest): per joint, along both legs' common
    direction at `share` of the speed the shorter leg allows, zero where the joint turns back."""
    pts = [np.asarray(q0, float)] + [np.asarray(w, float) for w in waypoints]
    out = []
    for i in range(1, len(pts)):
        if i == len(pts) - 1:
            out.append(np.zeros_like(pts[i]))
            continue
        a, b = pts[i] - pts[i - 1], pts[i + 1] - pts[i]
        span = max(float(np.max(np.abs(a))), float(np.max(np.abs(b))), 1e-9)
        same = np.sign(a) == np.sign(b)
        v = np.where(same, np.sign(a) * vmax * share * np.minimum(np.abs(a), np.abs(b)) / span, 0.0)
        out.append(v)
    return out


def ruckig_chain(
    joint_names: list[str],
    q0: np.ndarray,
    waypoints: list[np.ndarray],
    limits: MoveLimits,
    v0: np.ndarray | None = None,
) -> tuple[TrajectoryPlan, list[float]]:
    """One multi-point trajectory through `waypoints` without stopping at them (a chunk):
    jerk-limited legs (ruckig) from the measured state, each ending on its waypoint with the
    velocity `through_velocities` picks (zero where a leg cannot end that fast: a stop there), the
    last at rest. Within the speed cap and acceleration limit; (plan, the time each waypoint is
    passed)."""
    lower, upper = limits.bounds()
    vmax, amax, jmax, dt = limits.vmax, limits.amax, limits.jmax, limits.dt
    q = np.asarray(q0, float)
    n = q.size
    v = _start_velocity(v0, n, vmax)
    targets = [np.clip(np.asarray(w, float), lower, upper) for w in waypoints]
    vias = through_velocities(q, targets, vmax)
    times: list[float] = []
    pos: list[np.ndarray] = []
    vel: list[np.ndarray] = []
    passed: list[float] = []
    t0 = 0.0
    for target, v_end in zip(targets, vias, strict=True):
        traj = None
        for v_try in (v_end, np.zeros(n)):
            attempt, _ = _ruckig_leg(q, v, target, v_try, vmax, amax, jmax)
            if attempt is not None:
                traj, v_end = attempt, v_try
                break
        if traj is None:
            raise ValueError("no trajectory through the chunk's waypoints within the limits")
        duration = max(MIN_SEGMENT_S if not np.any(v_end) else dt, float(traj.duration))
        steps = max(1, math.ceil(duration / dt - 1e-9))
        for k in range(1, steps + 1):
            t = k / steps * duration
            p, pv, _ = traj.at_time(min(t, float(traj.duration)))
            times.append(t0 + t)
            pos.append(np.asarray(p, float))
            vel.append(np.clip(np.asarray(pv, float), -vmax, vmax))
        pos[-1], vel[-1] = target, np.asarray(v_end, float)
        t0 += duration
        passed.append(t0)
        q, v = target, np.asarray(v_end, float)
    P, V = np.array(pos), np.array(vel)
    if bool(np.all(np.asarray(q0) >= lower) and np.all(np.asarray(q0) <= upper)):
        P = np.clip(P, lower, upper)
    V[-1] = 0.0
    return TrajectoryPlan(list(joint_names), np.array(times), P, V), passed


def brake_plan(
    joint_names: list[str],
    q: np.ndarray,
    v: np.ndarray,
    deceleration: float,
    jerk: float,
    dt: float = 0.05,
    at_rest_speed: float = 1e-3,
    hold_s: float = MIN_SEGMENT_S,
    first_point_s: float = BRAKE_FIRST_POINT_S,
) -> TrajectoryPlan:
    """Bring the arm from (q, v) to rest within `deceleration` and `jerk` (ruckig, velocity
    interface: the target is zero velocity, wherever that is), as points every `dt` from
    `first_point_s` on, carrying positions and velocities (the stock controller fits cubics through
    them, starting from the state it measures), ending at rest where the arm stops: never back at
    an older pose. At rest already (every |v| below `at_rest_speed`): one point at `q`, `hold_s`
    ahead."""
    from ruckig import ControlInterface, InputParameter, Result, Ruckig, Trajectory  # optional: ruckig

    q = np.asarray(q, float)
    v = np.nan_to_num(np.asarray(v, float))
    n = q.size
    if float(np.max(np.abs(v), initial=0.0)) < at_rest_speed:
        return TrajectoryPlan(list(joint_names), np.array([hold_s]), q[None, :].copy(), np.zeros((1, n)))
    inp = InputParameter(n)
    inp.control_interface = ControlInterface.Velocity
    inp.current_position, inp.current_velocity = q.tolist(), v.tolist()
    inp.current_acceleration = [0.0] * n
    inp.target_velocity, inp.target_acceleration = [0.0] * n, [0.0] * n
    inp.max_velocity = [max(1e-6, float(np.max(np.abs(v))))] * n
    # the jerk phase that starts the brake lasts at least `first_point_s`: a cubic (constant jerk)
    # the controller reproduces exactly from the state it measures to the first point
    jerk = min(float(jerk), float(deceleration) / max(first_point_s, 1e-3))
    inp.max_acceleration, inp.max_jerk = [float(deceleration)] * n, [jerk] * n
    traj = Trajectory(n)
    result = Ruckig(n).calculate(inp, traj)
    if result not in (Result.Working, Result.Finished):
        raise ValueError(f"no braking profile within the limits ({result})")
    duration = float(traj.duration)
    # points at the fastest joint's phase boundaries (each phase is a polynomial of degree <= 3,
    # which the controller's cubics reproduce), filled in every `dt`, from `first_point_s` on
    fastest = int(np.argmax(np.abs(v)))
    knots = [float(b) for b in np.cumsum(traj.profiles[0][fastest].t) if 1e-6 < b < duration - 1e-6]
    steps = max(1, math.ceil(duration / dt - 1e-9))
    grid = [duration * k / steps for k in range(1, steps)]
    times = sorted({*knots, *(g for g in grid if all(abs(g - k) > 0.2 * dt for k in knots)), duration})
    times = [t for t in times if t >= min(first_point_s, duration) - 1e-6]
    pos = np.empty((len(times), n))
    vel = np.empty((len(times), n))
    for i, t in enumerate(times):
        p, dp, _ = traj.at_time(t)
        pos[i], vel[i] = p, dp
    vel[-1] = 0.0
    return TrajectoryPlan(list(joint_names), np.array(times), pos, vel)


def anchored_brake_plan(
    joint_names: list[str],
    q_measured: np.ndarray,
    v_estimated: np.ndarray,
    age_s: float,
    max_age_s: float,
    deceleration: float,
    jerk: float,
    dt: float = 0.05,
    hold_s: float = MIN_SEGMENT_S,
) -> TrajectoryPlan:
    """A braking trajectory from a measured position and a velocity that was not measured with it
    (estimated from the position stream, or the trajectory followed): the arm is carried
    forward from the measured position by its age at that velocity, braked within `deceleration` and
    `jerk`, and no point lies behind the measured position along each joint's motion (an estimate
    that lags or overshoots never turns into a move back)."""
    q_measured = np.asarray(q_measured, float)
    v = np.nan_to_num(np.asarray(v_estimated, float))
    q, _ = predict_state(q_measured, v, age_s, max_age_s)
    plan = brake_plan(joint_names, q, v, deceleration, jerk, dt, hold_s=hold_s)
    direction = np.sign(v)
    behind = (plan.positions - q_measured[None, :]) * direction[None, :] < 0
    plan.positions = np.where(behind, q_measured[None, :], plan.positions)
    return plan


def predict_state(
    q: np.ndarray, v: np.ndarray, age_s: float, max_age_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Where an arm measured at (q, v) `age_s` ago is now, at constant velocity: a plan sent now
    starts from there, not from the past. Ages beyond `max_age_s` are not extrapolated."""
    age = min(max(0.0, age_s), max_age_s)
    return np.asarray(q, float) + np.nan_to_num(np.asarray(v, float)) * age, np.asarray(v, float)


def hold_time_s(
    state_age_s: float, velocity: np.ndarray | None, amax: float, minimum_s: float = MIN_SEGMENT_S
) -> float:
    """How long a one-point hold at the last measured pose takes so that it requests no more than
    the speed cap: the arm may have moved up to (cap x age) since that measurement, so the hold
    lasts at least the age (plus margin), and long enough to brake from the measured speed."""
    speed = float(np.max(np.abs(np.nan_to_num(velocity)))) if velocity is not None and len(velocity) else 0.0
    return max(minimum_s, 1.25 * max(0.0, state_age_s) + 0.02, speed / amax)


def hold_plan(
    joint_names: list[str],
    q: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    duration_s: float = MIN_SEGMENT_S,
) -> TrajectoryPlan:
    """One point at `q` (the measured pose), zero velocity, `duration_s` ahead: what
    joint_trajectory_controller accepts and holds (it rejects an empty trajectory). Never clipped
    into [lower, upper]: an arm outside its limits is held where it is, not moved."""
    q = np.asarray(q, float)
    return TrajectoryPlan(list(joint_names), np.array([duration_s]), q[None, :], np.zeros((1, q.size)))


def jtc_rejection(msg: Any, controller_joints: list[str], now_s: float | None = None) -> str | None:
    """Why ros2_controllers' joint_trajectory_controller (humble..kilted, `validate_trajectory_msg`,
    partial goals off, no effort interface) would reject this trajectory, or None if it accepts it.
    sim_robot_node applies this so it never accepts what the real controller rejects."""
    names = list(msg.joint_names)
    n = len(names)
    if n != len(controller_joints):
        return "Joints on incoming trajectory don't match the controller joints."
    if not names:
        return "Empty joint names on incoming trajectory."
    if not msg.points:
        return "Empty trajectory received."
    for name in names:
        if name not in controller_joints:
            return f"Incoming joint {name} doesn't match the controller's joints."
    for i, v in enumerate(msg.points[-1].velocities):
        if abs(v) > np.finfo(np.float32).eps:
            return f"Velocity of last trajectory point of joint {names[i]} is not zero: {v:.15f}"
    stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
    if stamp_s != 0.0 and now_s is not None:
        last = msg.points[-1].time_from_start
        if stamp_s + last.sec + last.nanosec * 1e-9 < now_s:
            return "Received trajectory with non-zero start time that ends in the past"
    prev = 0.0
    for i, pt in enumerate(msg.points):
        t = pt.time_from_start.sec + pt.time_from_start.nanosec * 1e-9
        if i > 0 and t <= prev:
            return f"Time between points {i - 1} and {i} is not strictly increasing, it is {prev:f} and {t:f}"
        prev = t
        if len(pt.positions) != n:
            return (
                f"Mismatch between joint_names size ({n}) and positions ({len(pt.positions)}) at point #{i}."
            )
        for field in ("velocities", "accelerations"):
            size = len(getattr(pt, field))
            if size and size != n:
                return f"Mismatch between joint_names size ({n}) and {field} ({size}) at point #{i}."
        if len(pt.effort):
            return "Trajectories with effort fields are only supported for the 'effort' command interface."
    return None


def fill_trajectory(msg: Any, plan: TrajectoryPlan, point_cls: type, duration_cls: type) -> Any:
    """Fill a trajectory_msgs/JointTrajectory from a plan (header stamp zero = start on receipt)."""
    msg.joint_names = list(plan.joint_names)
    if plan.stamp_s > 0:
        ns = round(plan.stamp_s * 1e9)
        msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
    points = []
    for t, p, v in zip(plan.times_s, plan.positions, plan.velocities, strict=True):
        pt = point_cls()
        pt.positions = [float(x) for x in p]
        pt.velocities = [float(x) for x in v]
        ns = round(float(t) * 1e9)
        pt.time_from_start = duration_cls(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        points.append(pt)
    msg.points = points
    return msg


def trajectory_arrays(msg: Any) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(joint names, times, positions N x J, velocities N x J) from a JointTrajectory message."""
    names = list(msg.joint_names)
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points])
    pos = np.array([list(p.positions) for p in msg.points], dtype=float).reshape(len(msg.points), len(names))
    vel = np.array(
        [list(p.velocities) if len(p.velocities) else [0.0] * len(names) for p in msg.points], dtype=float
    ).reshape(len(msg.points), len(names))
    return names, times, pos, vel


def trajectory_violations(
    msg: Any,
    expected_joints: list[str],
    lower: np.ndarray,
    upper: np.ndarray,
    vmax: float,
    start: np.ndarray | None = None,
    tol: float = 1e-6,
) -> list[str]:
    """Everything wrong with a published trajectory: joint set, times, limits, speed, final rest.
    Speeds are checked on the velocity fields and between consecutive points (and from `start`)."""
    names, times, pos, vel = trajectory_arrays(msg)
    bad: list[str] = []
    if names != list(expected_joints):
        bad.append(f"joint names {names} != {list(expected_joints)}")
        return bad
    if not len(times):
        bad.append("empty trajectory (joint_trajectory_controller rejects it)")
        return bad
    if times[0] <= 0 or np.any(np.diff(times) <= 0):
        bad.append(f"times not strictly increasing from > 0: {times.tolist()}")
    if np.any(pos < lower - tol) or np.any(pos > upper + tol):
        bad.append("a position is outside the joint limits")
    if np.any(np.abs(vel) > vmax * (1 + 1e-3) + tol):
        bad.append(f"a velocity field exceeds {vmax} rad/s: {float(np.max(np.abs(vel))):.3f}")
    prev_t, prev_q = (0.0, start) if start is not None else (times[0], pos[0])
    for t, q in zip(times, pos, strict=True):
        if t > prev_t and prev_q is not None:
            speed = float(np.max(np.abs(q - prev_q))) / (t - prev_t)
            if speed > vmax * (1 + 1e-3) + tol:
                bad.append(
                    f"mean speed {speed:.3f} rad/s between points at {prev_t:.2f}-{t:.2f} s exceeds {vmax}"
                )
        prev_t, prev_q = t, q
    if np.any(np.abs(vel[-1]) > tol):
        bad.append("the final point's velocity is not zero")
    return bad
