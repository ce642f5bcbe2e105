"""A strict stand-in for a stock ros2_control stack, in its own process: joint_trajectory_controller
(JTC) per controller + joint_state_broadcaster + plain camera drivers, over real DDS.

Written from ros2_controllers' documented behaviour (humble .. kilted,
joint_trajectory_controller.cpp), not from this project's code:

- `~/joint_trajectory` (trajectory_msgs/JointTrajectory, SystemDefaultsQoS = reliable, depth 10).
  `validate_trajectory_msg` rejects, logging one line and leaving the active trajectory running:
  a joint set whose size differs from the controller's (allow_partial_joints_goal off), empty
  joint names, no points ("Empty trajectory received."), an unknown joint, a non-zero velocity
  in the last point (allow_nonzero_velocity_at_trajectory_end off), a non-zero header stamp whose
  trajectory ends in the past, time_from_start not strictly increasing (the first point may be 0),
  positions of the wrong size, velocities / accelerations neither empty nor of the joints' size,
  effort fields (position interface).
- A valid trajectory always replaces the active one ("always replace old msg with new one"); it
  starts from the measured state at receipt (header stamp 0 = now) and is interpolated by splines
  (cubic with velocities, linear with positions only); after the last point the controller holds
  it. So a one-point trajectory at the current pose holds there.
- The FollowJointTrajectory action's cancel service (action_msgs/srv/CancelGoal on
  `~/follow_joint_trajectory/_action/cancel_goal`): cancelling holds the current position.
- joint_state_broadcaster: sensor_msgs/JointState on /joint_states (reliable) with name, position,
  velocity, effort and header.stamp = now, every update.

The hardware is ideal (it follows the reference exactly). For the tests the double also checks
every message it receives against the speed cap (mean speed from the measured pose to the first
point, between points, and the velocity fields) and writes one JSON line per event to `log`.

    python -m tests.ros2.jtc_double config.json

config.json: controllers {name: [joints]}, initial {joint: rad}, vmax {controller: rad/s},
rate_hz, omit_joints [...], cameras {topic: [w, h]}, image_rate_hz, stop_images_after_s,
stop_joint_states_after_trajectory_s / stop_joint_states_after_trajectory_end_s (stop publishing
joint states this long after the first accepted trajectory arrived / ended; < 0 never), log.
Service /jtc_double/joint_states (std_srvs/SetBool):
publish joint states or not.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

FLOAT_EPS = float(np.finfo(np.float32).eps)


def _secs(d: Any) -> float:
    return d.sec + d.nanosec * 1e-9


def validate(msg: Any, joints: list[str], now_s: float) -> str | None:
    """joint_trajectory_controller's validate_trajectory_msg, in its order; None = accepted."""
    names = list(msg.joint_names)
    if len(names) != len(joints):
        return "Joints on incoming trajectory don't match the controller joints."
    if not names:
        return "Empty joint names on incoming trajectory."
    if len(msg.points) == 0:
        return "Empty trajectory received."
    for n in names:
        if n not in joints:
            return f"Incoming joint {n} doesn't match the controller's joints."
    for i, v in enumerate(msg.points[-1].velocities):
        if abs(v) > FLOAT_EPS:
            return f"Velocity of last trajectory point of joint {names[i]} is not zero: {v:.15f}"
    start = _secs(msg.header.stamp)
    if start != 0.0 and start + _secs(msg.points[-1].time_from_start) < now_s:
        return "Received trajectory with non-zero start time that ends in the past"
    previous = 0.0
    for i, p in enumerate(msg.points):
        t = _secs(p.time_from_start)
        if i > 0 and t <= previous:
            return f"Time between points {i - 1} and {i} is not strictly increasing"
        previous = t
        if len(p.positions) != len(names):
            return f"Mismatch between joint_names size and positions at point #{i}."
        if len(p.velocities) not in (0, len(names)) or len(p.accelerations) not in (0, len(names)):
            return f"Mismatch between joint_names size and velocities/accelerations at point #{i}."
        if len(p.effort):
            return "Trajectories with effort fields are only supported for the 'effort' command interface."
    return None


class Segmented:
    """The reference from the state at receipt through the points, then holding the last."""

    def __init__(
        self,
        t0: float,
        q0: np.ndarray,
        v0: np.ndarray,
        times: np.ndarray,
        pos: np.ndarray,
        vel: np.ndarray | None,
    ) -> None:
        self.t0 = t0
        self.times = np.concatenate([[0.0], times])
        self.pos = np.vstack([q0[None], pos])
        self.vel = None if vel is None else np.vstack([v0[None], vel])

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        s = t - self.t0
        if s >= self.times[-1]:
            return self.pos[-1].copy(), np.zeros(self.pos.shape[1])
        i = max(0, int(np.searchsorted(self.times, s, side="right")) - 1)
        h = self.times[i + 1] - self.times[i]
        if h <= 0:
            return self.pos[i + 1].copy(), np.zeros(self.pos.shape[1])
        u = (s - self.times[i]) / h
        p0, p1 = self.pos[i], self.pos[i + 1]
        if self.vel is None:
            return p0 + u * (p1 - p0), (p1 - p0) / h
        m0, m1 = self.vel[i] * h, self.vel[i + 1] * h
        q = (
            (2 * u**3 - 3 * u**2 + 1) * p0
            + (u**3 - 2 * u**2 + u) * m0
            + (-2 * u**3 + 3 * u**2) * p1
            + (u**3 - u**2) * m1
        )
        dq = (
            (6 * u**2 - 6 * u) * p0
            + (3 * u**2 - 4 * u + 1) * m0
            + (-6 * u**2 + 6 * u) * p1
            + (3 * u**2 - 2 * u) * m1
        ) / h
        return q, dq


class Controller:
    def __init__(self, name: str, joints: list[str], q: np.ndarray, vmax: float) -> None:
        self.name, self.joints, self.vmax = name, joints, vmax
        self.active = Segmented(0.0, q, np.zeros(len(joints)), np.array([]), np.zeros((0, len(joints))), None)

    def state(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        return self.active.sample(t)


class Double:
    def __init__(self, node: Any, cfg: dict[str, Any]) -> None:
        from action_msgs.srv import CancelGoal
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, JointState
        from std_srvs.srv import SetBool
        from trajectory_msgs.msg import JointTrajectory

        self.node, self.cfg = node, cfg
        self.lock = threading.Lock()
        self.log_file = Path(cfg["log"]).open("a", encoding="utf-8")  # noqa: SIM115 (open for the process)
        init = cfg.get("initial", {})
        self.controllers: dict[str, Controller] = {}
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for name, joints in cfg["controllers"].items():
            q = np.array([float(init.get(j, 0.0)) for j in joints])
            c = Controller(name, list(joints), q, float(cfg.get("vmax", {}).get(name, 1.5)))
            self.controllers[name] = c
            node.create_subscription(
                JointTrajectory, f"/{name}/joint_trajectory", lambda m, c=c: self._on_traj(c, m), reliable
            )
            node.create_service(
                CancelGoal,
                f"/{name}/follow_joint_trajectory/_action/cancel_goal",
                lambda req, res, c=c: self._on_cancel(c, req, res),
            )
        self.js_pub = node.create_publisher(
            JointState, cfg.get("joint_states_topic", "/joint_states"), reliable
        )
        self.publish_js = True
        self.published: list[dict[str, float]] = []
        node.create_service(SetBool, "/jtc_double/joint_states", self._on_js_switch)
        self.cams = {
            t: (node.create_publisher(Image, t, reliable), wh) for t, wh in cfg.get("cameras", {}).items()
        }
        self._JointState, self._Image = JointState, Image
        self.first_accepted: float | None = None
        self.first_end: float | None = None
        self.t_start = time.monotonic()

    def write(self, event: dict[str, Any]) -> None:
        self.log_file.write(json.dumps(event) + "\n")
        self.log_file.flush()

    def _on_js_switch(self, req: Any, res: Any) -> Any:
        self.publish_js = bool(req.data)
        self.write({"event": "joint_states", "t": time.monotonic(), "publishing": self.publish_js})
        res.success = True
        return res

    def _on_cancel(self, c: Controller, req: Any, res: Any) -> Any:
        now = time.monotonic()
        with self.lock:
            q, _ = c.state(now)
            c.active = Segmented(now, q, np.zeros(len(q)), np.array([]), np.zeros((0, len(q))), None)
        self.write({"event": "cancel", "t": now, "controller": c.name})
        return res

    def _on_traj(self, c: Controller, msg: Any) -> None:
        now = time.monotonic()
        with self.lock:
            q, v = c.state(now)
            last = list(self.published[-5:])
        event: dict[str, Any] = {
            "event": "trajectory",
            "t": now,
            "controller": c.name,
            "points": len(msg.points),
            "actual": q.tolist(),
            "last_published": [[p.get(j) for j in c.joints] for p in last],
        }
        why = validate(msg, c.joints, self.node.get_clock().now().nanoseconds * 1e-9)
        if why is not None:
            self.node.get_logger().error(why)
            self.write(event | {"accepted": False, "reason": why})
            return
        order = [list(msg.joint_names).index(j) for j in c.joints]
        times = np.array([_secs(p.time_from_start) for p in msg.points])
        pos = np.array([[p.positions[i] for i in order] for p in msg.points], dtype=float)
        has_vel = all(len(p.velocities) for p in msg.points)
        vel = (
            np.array([[p.velocities[i] for i in order] for p in msg.points], dtype=float) if has_vel else None
        )
        # what the message requests: mean speeds from the measured pose and between points, velocity fields
        speeds = []
        prev_t, prev_q = 0.0, q
        for t, p in zip(times, pos, strict=True):
            gap = float(np.max(np.abs(p - prev_q)))
            speeds.append(gap / (t - prev_t) if t > prev_t else (0.0 if gap < 1e-9 else float("inf")))
            prev_t, prev_q = t, p
        if vel is not None:
            speeds.append(float(np.max(np.abs(vel))))
        peak = float(max(speeds))
        event |= {
            "accepted": True,
            "first": pos[0].tolist(),
            "t_first": float(times[0]),
            "duration_s": float(times[-1]),
            "speed_rad_s": peak,
            "over_cap": bool(peak > c.vmax * 1.001 + 1e-6),
        }
        with self.lock:
            c.active = Segmented(now, q, v if vel is not None else np.zeros(len(q)), times, pos, vel)
            if self.first_accepted is None:
                self.first_accepted, self.first_end = now, now + float(times[-1])
        self.write(event)

    def step(self) -> None:
        now = time.monotonic()
        cfg = self.cfg
        stop_after = float(cfg.get("stop_joint_states_after_trajectory_s", -1))
        started = self.first_accepted
        if self.publish_js and stop_after >= 0 and started is not None and now - started >= stop_after:
            self.publish_js = False
            self.write({"event": "joint_states", "t": now, "publishing": False})
        stop_after_end = float(cfg.get("stop_joint_states_after_trajectory_end_s", -1))
        ended = self.first_end
        if self.publish_js and stop_after_end >= 0 and ended is not None and now - ended >= stop_after_end:
            self.publish_js = False
            self.write({"event": "joint_states", "t": now, "publishing": False})
        if not self.publish_js:
            return
        msg = self._JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        omit = set(cfg.get("omit_joints", []))
        state: dict[str, float] = {}
        vels: dict[str, float] = {}
        with self.lock:
            for c in self.controllers.values():
                q, v = c.state(now)
                for j, qj, vj in zip(c.joints, q, v, strict=True):
                    if j not in omit:
                        state[j], vels[j] = float(qj), float(vj)
            self.published.append(state)
            del self.published[:-20]
        msg.name = list(state)
        msg.position = list(state.values())
        msg.velocity = [vels[j] for j in state]
        msg.effort = [0.0] * len(state)
        self.js_pub.publish(msg)

    def publish_images(self, k: int) -> None:
        stop = float(self.cfg.get("stop_images_after_s", -1))
        if stop >= 0 and time.monotonic() - self.t_start > stop:
            return
        for topic, (pub, (w, h)) in self.cams.items():
            img = self._Image()
            img.header.stamp = self.node.get_clock().now().to_msg()
            img.header.frame_id = topic
            img.height, img.width, img.encoding, img.step = h, w, "rgb8", w * 3
            frame = np.zeros((h, w, 3), np.uint8)
            frame[:, : (k * 7) % w] = 200
            img.data = frame.tobytes()
            pub.publish(img)


def main(argv: list[str] | None = None) -> int:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    args = argv if argv is not None else sys.argv[1:]
    cfg = json.loads(Path(args[0]).read_text())
    rclpy.init()
    node = rclpy.create_node("jtc_double")
    double = Double(node, cfg)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    period = 1.0 / float(cfg.get("rate_hz", 100.0))
    img_period = 1.0 / float(cfg.get("image_rate_hz", 4.0))
    next_js = next_img = time.monotonic()
    k = 0
    double.write({"event": "ready", "t": time.monotonic()})
    try:
        while rclpy.ok():
            now = time.monotonic()
            if now >= next_js:
                double.step()
                next_js += period
                if next_js < now:
                    next_js = now + period
            if double.cams and now >= next_img:
                double.publish_images(k)
                k += 1
                next_img = now + img_period
            time.sleep(max(0.0, min(next_js, next_img if double.cams else next_js) - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        rclpy.try_shutdown()
        spin.join(timeout=2)
        node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
