"""Joint-trajectory following with stock joint_trajectory_controller semantics, for the YAM driver.

Pure numpy (plus `ruckig` for the stop ramp), on duck-typed trajectory_msgs/JointTrajectory messages,
so every rule is testable without a ROS graph. What it does, and where it is stricter than the stock
controller (ros2_controllers' joint_trajectory_controller, `validate_trajectory_msg`):

- rejects what JTC rejects: empty joint names, no points, a joint the controller does not have, a
  controller joint the message lacks (JTC's default `allow_partial_joints_goal: false`), a
  `time_from_start` that is not strictly increasing, field sizes that do not match the joint names,
  effort fields (position command interface), a non-zero velocity on the last point (JTC's default
  `allow_nonzero_velocity_at_trajectory_end: false`), a stamped trajectory that ends in the past;
- and, as a driver of real motors: non-finite numbers, positions outside the joint limits, and
  over-speed: the spline it would follow (from the current reference) exceeds the speed cap anywhere.
  Such a message is rejected, never clipped. A stamp more than `max_start_lateness_s` in the past is
  rejected too (JTC would start part-way, a jump of the reference).
- interpolates like JTC's default "splines": linear between points with positions only, cubic
  (Hermite) with velocities, quintic with velocities and accelerations; the first segment starts at the
  reference the driver is commanding when the message arrives, so a new trajectory replaces the active
  one without a jump, and a one-point trajectory at the current position holds.
- stops (e-stop, a fault-free cancel) with a ruckig ramp to rest under the speed cap and a high
  deceleration limit, then holds: the one place a limit must be enforced on the way that no message
  describes.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SPEED_TOLERANCE = 0.01
"""Relative slack on the speed cap: a spline through samples of a profile whose peak is exactly the
cap (the agent's minimum-jerk moves) overshoots it by far less than this."""


def trajectory_identity(msg: Any) -> str:
    """Which trajectory this is, computed alike by the agent from the message it sends and by a
    driver from the one it receives (DDS carries the numbers bit for bit), so a driver's status can
    say which one it took or rejected: a hash of the stamp, the joint names and every point's time,
    positions and velocities. A stop differs from the move before it even unstamped: it starts from
    where the arm is mid-move and ends at rest, elsewhere. Only an identical message (a hold sent
    twice at one place) has the same identity."""
    h = hashlib.blake2b(digest_size=8)
    stamp = msg.header.stamp
    h.update(f"{stamp.sec}.{stamp.nanosec:09d}|{','.join(msg.joint_names)}|{len(msg.points)}".encode())
    for pt in msg.points:
        t = pt.time_from_start
        h.update(f"|{t.sec}.{t.nanosec:09d}|".encode())
        h.update(np.asarray(pt.positions, dtype=np.float64).tobytes())
        h.update(b"/")
        h.update(np.asarray(pt.velocities, dtype=np.float64).tobytes())
    return h.hexdigest()


class TrajectoryRejected(ValueError):
    """A message the driver refuses; the text is the one-line reason it logs."""


@dataclass
class JointGroup:
    """The joints one trajectory topic commands (an arm, or a gripper's driving joint)."""

    controller: str
    joints: list[str]
    lower: np.ndarray
    upper: np.ndarray
    vmax: np.ndarray
    """per joint, in joint units per second"""

    def __post_init__(self) -> None:
        n = len(self.joints)
        self.lower = np.broadcast_to(np.asarray(self.lower, float), (n,)).copy()
        self.upper = np.broadcast_to(np.asarray(self.upper, float), (n,)).copy()
        self.vmax = np.broadcast_to(np.asarray(self.vmax, float), (n,)).copy()


def _duration_s(d: Any) -> float:
    return float(d.sec) + float(d.nanosec) * 1e-9


@dataclass
class Spline:
    """Piecewise polynomial through knots at `times_s` (relative to its start, the first is 0)."""

    times_s: np.ndarray
    positions: np.ndarray
    """K x J"""
    velocities: np.ndarray | None = None
    """K x J, or None: linear segments"""
    accelerations: np.ndarray | None = None
    """K x J, or None: cubic segments (with velocities)"""
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        if self.velocities is None:
            self.kind = "linear"
        elif self.accelerations is None:
            self.kind = "cubic"
        else:
            self.kind = "quintic"

    @property
    def duration_s(self) -> float:
        return float(self.times_s[-1])

    @property
    def final(self) -> np.ndarray:
        return self.positions[-1].copy()

    def _segment(self, t: float) -> tuple[int, float, float]:
        i = int(np.clip(np.searchsorted(self.times_s, t, side="right") - 1, 0, len(self.times_s) - 2))
        h = float(self.times_s[i + 1] - self.times_s[i])
        return i, h, float(np.clip((t - self.times_s[i]) / h, 0.0, 1.0))

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(positions, velocities) at time t after the start; before 0 the first knot, after the
        end the last knot at rest."""
        if len(self.times_s) == 1 or t >= self.times_s[-1]:
            return self.positions[-1].copy(), np.zeros(self.positions.shape[1])
        if t <= 0:
            v0 = self.velocities[0] if self.velocities is not None else np.zeros(self.positions.shape[1])
            return self.positions[0].copy(), v0.copy()
        i, h, s = self._segment(t)
        q, dq = self._eval(i, h, np.array([s]))
        return q[0], dq[0]

    def _eval(self, i: int, h: float, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions and velocities (len(s) x J) on segment i at normalised times s in [0, 1]."""
        p0, p1 = self.positions[i], self.positions[i + 1]
        s = s[:, None]
        if self.kind == "linear":
            return p0 + s * (p1 - p0), np.repeat(((p1 - p0) / h)[None, :], len(s), axis=0)
        v0, v1 = self.velocities[i] * h, self.velocities[i + 1] * h  # type: ignore[index]
        if self.kind == "cubic":
            h00, h10, h01, h11 = (
                2 * s**3 - 3 * s**2 + 1,
                s**3 - 2 * s**2 + s,
                -2 * s**3 + 3 * s**2,
                s**3 - s**2,
            )
            d00, d10, d01, d11 = 6 * s**2 - 6 * s, 3 * s**2 - 4 * s + 1, -6 * s**2 + 6 * s, 3 * s**2 - 2 * s
            q = h00 * p0 + h10 * v0 + h01 * p1 + h11 * v1
            dq = (d00 * p0 + d10 * v0 + d01 * p1 + d11 * v1) / h
            return q, dq
        a0, a1 = self.accelerations[i] * h * h, self.accelerations[i + 1] * h * h  # type: ignore[index]
        # quintic in s with position, first and second derivative matched at both ends
        c0, c1, c2 = p0, v0, a0 / 2
        d = p1 - (c0 + c1 + c2)
        e = v1 - (c1 + 2 * c2)
        f = a1 - 2 * c2
        c3 = 10 * d - 4 * e + f / 2
        c4 = -15 * d + 7 * e - f
        c5 = 6 * d - 3 * e + f / 2
        q = c0 + c1 * s + c2 * s**2 + c3 * s**3 + c4 * s**4 + c5 * s**5
        dq = (c1 + 2 * c2 * s + 3 * c3 * s**2 + 4 * c4 * s**3 + 5 * c5 * s**4) / h
        return q, dq

    def peak_speeds(self, samples_per_segment: int = 64) -> tuple[np.ndarray, np.ndarray]:
        """(per-joint peak |velocity|, index of the segment where each peak is) over the spline."""
        n_joints = self.positions.shape[1]
        peak, where = np.zeros(n_joints), np.zeros(n_joints, dtype=int)
        s = np.linspace(0.0, 1.0, samples_per_segment + 1)
        for i in range(len(self.times_s) - 1):
            h = float(self.times_s[i + 1] - self.times_s[i])
            if h <= 0:
                continue
            _, dq = self._eval(i, h, s)
            seg = np.max(np.abs(dq), axis=0)
            better = seg > peak
            peak[better], where[better] = seg[better], i
        return peak, where


def parse_trajectory(
    msg: Any,
    group: JointGroup,
    start_pos: np.ndarray,
    start_vel: np.ndarray,
    lateness_s: float = 0.0,
    max_start_lateness_s: float = 0.1,
) -> Spline:
    """Validate `msg` for `group` and return the spline to follow from the reference (`start_pos`,
    `start_vel`) at the trajectory's start. `lateness_s` is how far a non-zero header stamp lies in
    the past (negative: in the future); 0 for a zero stamp. Raises TrajectoryRejected with the reason."""
    names = list(msg.joint_names)
    points = list(msg.points)
    if not names:
        raise TrajectoryRejected("empty joint names on the incoming trajectory")
    if not points:
        raise TrajectoryRejected(
            "empty trajectory (no points), as the stock joint_trajectory_controller rejects it; "
            "to hold, send one point at the current position"
        )
    unknown = [n for n in names if n not in group.joints]
    if unknown:
        raise TrajectoryRejected(
            f"incoming joint {unknown[0]} is not one of {group.controller}'s joints {group.joints}"
        )
    if len(set(names)) != len(names):
        raise TrajectoryRejected(f"duplicate joint names {names}")
    missing = [n for n in group.joints if n not in names]
    if missing:
        raise TrajectoryRejected(f"the trajectory lacks {', '.join(missing)} (partial goals are not allowed)")
    n = len(names)
    times = np.array([_duration_s(p.time_from_start) for p in points])
    if times[0] < 0:
        raise TrajectoryRejected(f"point 0 has a negative time_from_start {times[0]:g} s")
    for i in range(1, len(times)):
        if times[i] <= times[i - 1]:
            raise TrajectoryRejected(
                f"time_from_start is not strictly increasing between points {i - 1} and {i} "
                f"({times[i - 1]:g} s, {times[i]:g} s)"
            )
    if lateness_s > 0 and lateness_s > times[-1]:
        raise TrajectoryRejected(
            f"the trajectory's header.stamp + duration ends {lateness_s - times[-1]:.3f} s ago"
        )
    if lateness_s > max_start_lateness_s:
        raise TrajectoryRejected(
            f"header.stamp is {lateness_s:.3f} s in the past (limit {max_start_lateness_s:g} s): starting "
            "part-way would jump; stamp 0 starts on receipt"
        )

    def field_rows(attr: str, optional: bool) -> np.ndarray | None:
        rows = [list(getattr(p, attr)) for p in points]
        if optional and all(len(r) == 0 for r in rows):
            return None
        for i, r in enumerate(rows):
            if len(r) != n:
                raise TrajectoryRejected(f"point {i} has {len(r)} {attr} for {n} joint names")
        arr = np.array(rows, dtype=float)
        if not np.all(np.isfinite(arr)):
            raise TrajectoryRejected(f"a {attr} value is not finite")
        return arr

    pos = field_rows("positions", optional=False)
    vel = field_rows("velocities", optional=True)
    acc = field_rows("accelerations", optional=True)
    if any(len(p.effort) for p in points):
        raise TrajectoryRejected("effort fields are not supported (position command interface)")
    assert pos is not None
    order = [names.index(j) for j in group.joints]  # message order -> controller order
    pos = pos[:, order]
    vel = vel[:, order] if vel is not None else None
    acc = acc[:, order] if acc is not None else None
    if vel is not None and np.any(np.abs(vel[-1]) > np.finfo(np.float32).eps):
        raise TrajectoryRejected(f"the last point's velocity is not zero: {vel[-1].tolist()}")
    lo_bad = np.argwhere(pos < group.lower - 1e-9)
    hi_bad = np.argwhere(pos > group.upper + 1e-9)
    for bad in (lo_bad, hi_bad):
        if len(bad):
            i, j = bad[0]
            raise TrajectoryRejected(
                f"point {i}: {group.joints[j]} = {pos[i, j]:.4f} is outside its limits "
                f"[{group.lower[j]:.4f}, {group.upper[j]:.4f}]"
            )
    cap = group.vmax * (1 + SPEED_TOLERANCE) + 1e-9
    if vel is not None:
        over = np.argwhere(np.abs(vel) > cap)
        if len(over):
            i, j = over[0]
            raise TrajectoryRejected(
                f"over-speed: point {i} asks {group.joints[j]} for {abs(vel[i, j]):.3f}/s "
                f"(cap {group.vmax[j]:g}/s)"
            )
    # the start state, then the message's points; a first point at time 0 replaces the start state
    start_pos = np.asarray(start_pos, float)
    if times[0] == 0.0:
        if np.any(np.abs(pos[0] - start_pos) > 1e-6):
            j = int(np.argmax(np.abs(pos[0] - start_pos)))
            raise TrajectoryRejected(
                f"over-speed: point 0 at time 0 asks {group.joints[j]} to jump "
                f"{abs(pos[0, j] - start_pos[j]):.4f} from where it is"
            )
        k_times, k_pos, k_vel, k_acc, offset = times, pos, vel, acc, 0
    else:
        k_times = np.concatenate([[0.0], times])
        k_pos = np.vstack([start_pos, pos])
        k_vel = np.vstack([np.asarray(start_vel, float), vel]) if vel is not None else None
        k_acc = np.vstack([np.zeros(n), acc]) if acc is not None and k_vel is not None else None
        offset = 1
    spline = Spline(k_times, k_pos, k_vel, k_acc)
    peak, seg = spline.peak_speeds()
    over_j = np.flatnonzero(peak > cap)
    if len(over_j):
        j = int(over_j[np.argmax(peak[over_j] / group.vmax[over_j])])
        i = int(seg[j]) - offset
        what = f"between points {i} and {i + 1}" if i >= 0 else "from the current position to point 0"
        raise TrajectoryRejected(
            f"over-speed: {group.joints[j]} would move at {peak[j]:.3f}/s {what} (cap {group.vmax[j]:g}/s)"
        )
    return spline


def stop_spline(
    position: np.ndarray,
    velocity: np.ndarray,
    vmax: np.ndarray,
    max_deceleration: float,
    max_jerk: float,
    dt_s: float,
) -> Spline:
    """A ramp to rest from (position, velocity) computed by ruckig (velocity interface, target 0) under
    the speed cap and the deceleration/jerk limits, sampled every `dt_s` (linear between samples).
    At rest already: a one-knot spline (hold)."""
    position = np.asarray(position, float)
    velocity = np.asarray(velocity, float)
    n = len(position)
    if float(np.max(np.abs(velocity), initial=0.0)) < 1e-9:
        return Spline(np.array([0.0]), position[None, :].copy())
    from ruckig import ControlInterface, InputParameter, Result, Ruckig, Trajectory  # optional: ruckig

    inp = InputParameter(n)
    inp.control_interface = ControlInterface.Velocity
    inp.current_position = position.tolist()
    inp.current_velocity = np.clip(velocity, -vmax, vmax).tolist()
    inp.current_acceleration = [0.0] * n
    inp.target_velocity = [0.0] * n
    inp.target_acceleration = [0.0] * n
    inp.max_velocity = np.asarray(vmax, float).tolist()
    inp.max_acceleration = [float(max_deceleration)] * n
    inp.max_jerk = [float(max_jerk)] * n
    traj = Trajectory(n)
    result = Ruckig(n).calculate(inp, traj)
    if result not in (Result.Working, Result.Finished):
        return Spline(np.array([0.0]), position[None, :].copy())  # cannot plan: hold where it is
    duration = float(traj.duration)
    steps = max(1, math.ceil(duration / dt_s))
    times = np.linspace(0.0, duration, steps + 1)
    rows = [traj.at_time(float(t))[0] for t in times]
    return Spline(times, np.array(rows, dtype=float))
