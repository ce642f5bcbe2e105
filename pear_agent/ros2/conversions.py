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

MIN_SEGMENT_S = 0.1
"""Shortest trajectory we send: a zero-length move still becomes one point 0.1 s ahead."""


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


def is_compressed_topic(topic: str) -> bool:
    """image_transport's convention: a CompressedImage topic ends with /compressed."""
    return topic.rstrip("/").endswith("/compressed")


@dataclass
class TrajectoryPlan:
    joint_names: list[str]
    times_s: np.ndarray
    """Strictly increasing, > 0, relative to the moment the trajectory is sent."""
    positions: np.ndarray
    """N x J"""
    velocities: np.ndarray
    """N x J; the last row is zero."""

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


def min_jerk_plan(
    joint_names: list[str],
    q0: np.ndarray,
    q1: np.ndarray,
    vmax: float,
    lower: np.ndarray,
    upper: np.ndarray,
    dt: float = 0.05,
) -> TrajectoryPlan:
    """A minimum-jerk joint move whose peak speed is exactly the cap (peak = 1.875 x mean speed),
    sampled every `dt`, clipped into [lower, upper], ending at rest."""
    q0 = np.clip(np.asarray(q0, float), lower, upper)
    q1 = np.clip(np.asarray(q1, float), lower, upper)
    delta = q1 - q0
    duration = max(MIN_SEGMENT_S, 1.875 * float(np.max(np.abs(delta))) / vmax)
    n = max(1, math.ceil(duration / dt - 1e-9))
    tau = np.arange(1, n + 1) / n
    times = tau * duration
    s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5
    ds = (30 * tau**2 - 60 * tau**3 + 30 * tau**4) / duration
    pos = np.clip(q0 + np.outer(s, delta), lower, upper)
    vel = np.outer(ds, delta)
    vel[-1] = 0.0
    pos[-1] = q1
    return TrajectoryPlan(list(joint_names), times, pos, vel)


def hold_plan(joint_names: list[str], q: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> TrajectoryPlan:
    q = np.clip(np.asarray(q, float), lower, upper)
    return TrajectoryPlan(list(joint_names), np.array([MIN_SEGMENT_S]), q[None, :], np.zeros((1, q.size)))


def fill_trajectory(msg: Any, plan: TrajectoryPlan, point_cls: type, duration_cls: type) -> Any:
    """Fill a trajectory_msgs/JointTrajectory from a plan (header stamp zero = start on receipt)."""
    msg.joint_names = list(plan.joint_names)
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
        return bad  # an empty trajectory: "stop and hold" for joint_trajectory_controller
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
