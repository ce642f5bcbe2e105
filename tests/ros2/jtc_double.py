"""A strict stand-in for a stock ros2_control stack, in its own process, over real DDS:
controller_manager + one joint_trajectory_controller (JTC) per controller + joint_state_broadcaster
+ plain camera drivers, each ros2_control part a node of its own named as ros2_control names it.

Written from ros2_controllers' joint_trajectory_controller (trajectory.cpp, joint_trajectory_
controller.cpp) and ros2_control's controller_manager, not from this project's code:

- `/<controller>/joint_trajectory` (trajectory_msgs/JointTrajectory, reliable, depth 10), subscribed
  by the node `<controller>` once configured. `validate_trajectory_msg` rejects, logging one line
  and leaving the active trajectory running: a joint set whose size differs from the controller's
  (allow_partial_joints_goal off), empty joint names, no points, an unknown joint, a non-zero
  velocity in the last point, a non-zero header stamp whose trajectory ends in the past,
  time_from_start not strictly increasing, positions of the wrong size, velocities /
  accelerations neither empty nor of the joints' size, effort fields (position interface).
- Only an *active* controller acts on a valid message (`subscriber_is_active_`); an inactive one
  (`inactive` in the config) is subscribed and ignores it.
- A valid trajectory replaces the active one at the next update after DDS received it (a starved
  stand-in replays the interval it missed in 2 ms samples, taking the message no earlier than its
  receipt, as the real-time loop it stands for would). Its first sample sets the
  state before it to the state the controller measures then (closed loop: position, and
  velocity where the hardware has a velocity state interface; with points that carry velocities
  or accelerations and a state that has none, zeros: trajectory.cpp
  `set_point_before_trajectory_msg`); header stamp 0 = that update. Segments are linear with
  positions only, cubic with velocities on both ends, quintic with accelerations too; after the
  last point the controller holds it.
- The hardware is a position servo with a lag: each joint follows the controller's command
  (position and velocity) as a critically damped second-order system of natural frequency
  `servo_omega_rad_s` (50), integrated every millisecond; the controller samples its trajectory
  every 2 ms, whenever this process wakes up. So overshoot, braking and reversal are
  the hardware's, measured from /joint_states.
- joint_state_broadcaster: sensor_msgs/JointState on /joint_states (reliable) with name, position,
  velocity, effort, and header.stamp = the time the state was read, every update (`rate_hz`).
- controller_manager: diagnostic_msgs/DiagnosticArray on /diagnostics once a second, status
  "controller_manager: Controllers Activity" with one `<controller>.state` = active / inactive each.

For the tests the double checks every message it receives against the speed cap (mean speed from
the measured pose to the first point, between points, and the velocity fields) and writes one
JSON line per event to `log`.

    python -m tests.ros2.jtc_double config.json

config.json: controllers {name: [joints]}, initial {joint: rad}, vmax {controller: rad/s},
rate_hz, omit_joints [...], inactive [controllers], servo_omega_rad_s, velocity_state_interface,
stamp_offset_s (joint states stamped by a clock this far off the system's), stuck_joints [...]
(held by an obstacle: they do not move), joint_state_velocity ("measured", the default; "none": an
empty `velocity` array, as the broadcaster publishes over hardware without a velocity state
interface; "nan": NaN for every joint, as some drivers fill an interface they do not read; the
controller's own measured state keeps its velocity unless velocity_state_interface is false),
cameras {topic: [w, h]}, image_rate_hz, stop_images_after_s / stop_images_after_trajectory_s (no
images this long after the start / after the first accepted trajectory arrived; < 0 never),
stop_joint_states_after_trajectory_s /
stop_joint_states_after_trajectory_end_s (stop publishing joint states this long after the first
accepted trajectory arrived / ended; < 0 never), subscribe_after_s (the controllers' nodes are up
from the start but subscribe to their command topics only this long after it: controllers still
being configured by a spawner; event `subscribed`), log. Service /jtc_double/joint_states
(std_srvs/SetBool): publish joint states or not.

Delivery of /joint_states (a driver on another computer, over a network; header stamps stay the
times the states were read, as the broadcaster stamps them; delivery order is kept, as a reliable
DDS reader delivers one writer's samples in order):
- joint_state_backlog_s / joint_state_backlog_period_s: the link falls behind, its delivery
  latency growing from 0 to backlog_s over each period (a congested Wi-Fi link), then catches up:
  the messages it held back are released together (a burst). Receipt times then run slower than
  the stamps and jump at every burst.
- joint_state_jitter_s: plus a random delay of up to this per message (seeded by `seed`).
- joint_state_every: publish only every n-th state read (a driver publishing at rate_hz / n): a
  velocity from the stamped positions then spans n / rate_hz and lags by half of it.
- truth_topic: every state read, published at once on this topic as well (sensor_msgs/JointState,
  position and velocity), at least every 10 ms of the arm's time also when this process woke up
  late: the tests measure the arm from it, whatever /joint_states suffers.
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
TRUTH_STEP_S = 0.01
"""the truth topic carries the arm's state at least every 10 ms of its time, also across a late
wake-up of this process (the interval is replayed in steps this long)"""
GAP_S = 0.1
"""a pause between two joint-state messages longer than this is logged (`js_gap`): the stand-in
itself was late (a starved process), so a refusal then is for a real reason"""


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


class Point:
    """A trajectory point: positions, and velocities / accelerations or None (empty fields)."""

    def __init__(self, pos: np.ndarray, vel: np.ndarray | None, acc: np.ndarray | None) -> None:
        self.pos, self.vel, self.acc = pos, vel, acc


def interpolate(a: Point, b: Point, h: float, t: float) -> tuple[np.ndarray, np.ndarray]:
    """trajectory.cpp `interpolate_between_points`: linear without velocities on both ends, cubic
    with them, quintic with accelerations too; outside [0, h] clamped, and linear."""
    has_vel = a.vel is not None and b.vel is not None
    has_acc = has_vel and a.acc is not None and b.acc is not None
    if t < 0.0:
        t, has_vel, has_acc = 0.0, False, False
    if t > h:
        t, has_vel, has_acc = h, False, False
    if not has_vel:
        slope = (b.pos - a.pos) / h if h != 0.0 else np.zeros_like(a.pos)
        return a.pos + slope * t, slope
    assert a.vel is not None and b.vel is not None
    if not has_acc:
        c0, c1 = a.pos, a.vel
        c2 = (-3 * a.pos + 3 * b.pos - 2 * a.vel * h - b.vel * h) / h**2
        c3 = (2 * a.pos - 2 * b.pos + a.vel * h + b.vel * h) / h**3
        return c0 + c1 * t + c2 * t**2 + c3 * t**3, c1 + 2 * c2 * t + 3 * c3 * t**2
    assert a.acc is not None and b.acc is not None
    c0, c1, c2 = a.pos, a.vel, 0.5 * a.acc
    c3 = (-20 * a.pos + 20 * b.pos - 3 * a.acc * h**2 + b.acc * h**2 - 12 * a.vel * h - 8 * b.vel * h) / (
        2 * h**3
    )
    c4 = (30 * a.pos - 30 * b.pos + 3 * a.acc * h**2 - 2 * b.acc * h**2 + 16 * a.vel * h + 14 * b.vel * h) / (
        2 * h**4
    )
    c5 = (-12 * a.pos + 12 * b.pos - a.acc * h**2 + b.acc * h**2 - 6 * a.vel * h - 6 * b.vel * h) / (2 * h**5)
    q = c0 + c1 * t + c2 * t**2 + c3 * t**3 + c4 * t**4 + c5 * t**5
    dq = c1 + 2 * c2 * t + 3 * c3 * t**2 + 4 * c4 * t**3 + 5 * c5 * t**4
    return q, dq


class Trajectory:
    """trajectory.cpp `Trajectory`: the state before the message (set at its first sample), then
    the message's points at start + time_from_start."""

    def __init__(
        self, stamp_s: float, times: np.ndarray, points: list[Point], received_s: float = 0.0
    ) -> None:
        self.stamp_s, self.times, self.points = stamp_s, times, points
        self.received_s = received_s
        """when DDS received the message (system time): no update before that takes it"""
        self.start_s: float | None = None
        self.before: Point | None = None
        self.before_s = 0.0

    def first_sample(self, now_s: float, measured: Point) -> None:
        """`set_point_before_trajectory_msg` with the measured state (closed loop), zero-filling
        velocities / accelerations the state lacks but the first point has."""
        first = self.points[0]
        vel = measured.vel
        if vel is None and first.vel is not None:
            vel = np.zeros_like(measured.pos)
        acc = measured.acc
        if acc is None and first.acc is not None:
            acc = np.zeros_like(measured.pos)
        self.before, self.before_s = Point(measured.pos.copy(), vel, acc), now_s
        self.start_s = self.stamp_s if self.stamp_s != 0.0 else now_s

    def sample(self, now_s: float) -> tuple[np.ndarray, np.ndarray]:
        assert self.start_s is not None and self.before is not None
        first_at = self.start_s + self.times[0]
        if now_s < first_at:
            return interpolate(self.before, self.points[0], first_at - self.before_s, now_s - self.before_s)
        for i in range(len(self.points) - 1):
            t0, t1 = self.start_s + self.times[i], self.start_s + self.times[i + 1]
            if t0 <= now_s < t1:
                return interpolate(self.points[i], self.points[i + 1], t1 - t0, now_s - t0)
        last = self.points[-1]
        return last.pos.copy(), np.zeros_like(last.pos) if last.vel is None else last.vel.copy()


class Servo:
    """Position servos with a lag: each joint follows (q_ref, v_ref) as a critically damped
    second-order system (natural frequency omega), integrated in 1 ms steps."""

    def __init__(self, q: np.ndarray, omega: float, stuck: np.ndarray | None = None) -> None:
        self.q, self.v, self.omega = q.astype(float).copy(), np.zeros(len(q)), omega
        self.free = np.ones(len(q)) if stuck is None else (~stuck).astype(float)
        """0 for a joint held by an obstacle: it does not move whatever it is commanded"""

    def advance(self, dt: float, q_ref: np.ndarray, v_ref: np.ndarray) -> None:
        n = max(1, int(np.ceil(dt / 0.001)))
        h = dt / n
        w = self.omega
        for _ in range(n):
            acc = w * w * (q_ref - self.q) + 2 * w * (v_ref - self.v)
            self.v = (self.v + acc * h) * self.free
            self.q = self.q + self.v * h


class Controller:
    """One joint_trajectory_controller on its servos: holds where it starts (on_activate holds the
    current position), takes a new trajectory at the next update."""

    def __init__(self, name: str, joints: list[str], q: np.ndarray, vmax: float, cfg: dict[str, Any]) -> None:
        self.name, self.joints, self.vmax = name, joints, vmax
        self.active = name not in cfg.get("inactive", [])
        self.velocity_state = bool(cfg.get("velocity_state_interface", True))
        stuck = np.array([j in cfg.get("stuck_joints", []) for j in joints])
        self.servo = Servo(q, float(cfg.get("servo_omega_rad_s", 50.0)), stuck)
        self.command = (q.astype(float).copy(), np.zeros(len(q)))
        self.trajectory: Trajectory | None = None
        self.pending: Trajectory | None = None

    def measured(self) -> Point:
        return Point(self.servo.q.copy(), self.servo.v.copy() if self.velocity_state else None, None)

    def update(self, now_s: float, dt: float) -> None:
        """Advance to `now_s`: the controller samples its trajectory every 2 ms in between (as a
        real-time loop would, so a late wake-up of this process is not a jump of the reference),
        a new trajectory from the first of those samples at or after DDS received it (a starved
        stand-in replays the interval; the real-time loop it stands for could not have taken the
        message before it arrived)."""
        n = max(1, int(np.ceil(dt / 0.002)))
        for k in range(1, n + 1):
            t = now_s - dt + dt * k / n
            if self.pending is not None and t >= self.pending.received_s:
                self.trajectory, self.pending = self.pending, None
                self.trajectory.first_sample(t, self.measured())
            if self.trajectory is not None:
                self.command = self.trajectory.sample(t)
            self.servo.advance(dt / n, *self.command)


class Double:
    def __init__(self, nodes: dict[str, Any], cfg: dict[str, Any]) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, JointState
        from std_srvs.srv import SetBool
        from trajectory_msgs.msg import JointTrajectory

        self.nodes, self.cfg = nodes, cfg
        helper = nodes["jtc_double"]
        self.lock = threading.Lock()
        self.log_file = Path(cfg["log"]).open("a", encoding="utf-8")  # noqa: SIM115 (open for the process)
        init = cfg.get("initial", {})
        self.controllers: dict[str, Controller] = {}
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for name, joints in cfg["controllers"].items():
            q = np.array([float(init.get(j, 0.0)) for j in joints])
            c = Controller(name, list(joints), q, float(cfg.get("vmax", {}).get(name, 1.5)), cfg)
            self.controllers[name] = c
        self._subscribe_args = (JointTrajectory, reliable)
        self.subscribe_at = time.monotonic() + float(cfg.get("subscribe_after_s", 0.0))
        self.subscribed = False
        if float(cfg.get("subscribe_after_s", 0.0)) <= 0.0:
            self.subscribe()
        self.js_pub = nodes["joint_state_broadcaster"].create_publisher(
            JointState, cfg.get("joint_states_topic", "/joint_states"), reliable
        )
        self.diag_pub = nodes["controller_manager"].create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.publish_js = True
        helper.create_service(SetBool, "/jtc_double/joint_states", self._on_js_switch)
        self.cams = {
            t: (helper.create_publisher(Image, t, reliable), wh) for t, wh in cfg.get("cameras", {}).items()
        }
        self._JointState, self._Image, self._DiagnosticArray = JointState, Image, DiagnosticArray
        self.first_accepted: float | None = None
        self.first_end: float | None = None
        self.t_start = time.monotonic()
        self.t_update = time.monotonic()
        self.last_js: float | None = None
        truth = cfg.get("truth_topic", "")
        self.truth_pub = nodes["jtc_double"].create_publisher(JointState, truth, reliable) if truth else None
        self.rng = np.random.default_rng(int(cfg.get("seed", 0)))
        self.outbox: list[tuple[float, Any]] = []
        """(release time (monotonic), message): joint states held by the link, in order"""
        self.n_read = 0

    def subscribe(self) -> None:
        """Each controller subscribes to its command topic (as on_configure does)."""
        msg_type, qos = self._subscribe_args
        for name, c in self.controllers.items():
            self.nodes[name].create_subscription(
                msg_type, "~/joint_trajectory", lambda m, info, c=c: self._on_traj(c, m, info), qos
            )
        self.subscribed = True
        self.write({"event": "subscribed", "t": time.monotonic()})

    def write(self, event: dict[str, Any]) -> None:
        self.log_file.write(json.dumps(event) + "\n")
        self.log_file.flush()

    def _on_js_switch(self, req: Any, res: Any) -> Any:
        self.publish_js = bool(req.data)
        self.write({"event": "joint_states", "t": time.monotonic(), "publishing": self.publish_js})
        res.success = True
        return res

    def _on_traj(self, c: Controller, msg: Any, info: Any) -> None:
        now = time.monotonic()
        received_s = info["received_timestamp"] * 1e-9  # DDS's receipt, system time as ROS time here
        with self.lock:
            q = c.servo.q.copy()
        event: dict[str, Any] = {
            "event": "trajectory",
            "t": now,
            "controller": c.name,
            "points": len(msg.points),
            "actual": q.tolist(),
        }
        helper = self.nodes["jtc_double"]
        why = validate(msg, c.joints, helper.get_clock().now().nanoseconds * 1e-9)
        if why is not None:
            self.nodes[c.name].get_logger().error(why)
            self.write(event | {"accepted": False, "reason": why})
            return
        if not c.active:  # subscribed once configured; acts only while active
            self.write(event | {"accepted": False, "reason": "inactive: ignored"})
            return
        order = [list(msg.joint_names).index(j) for j in c.joints]
        times = np.array([_secs(p.time_from_start) for p in msg.points])

        def field(p: Any, attr: str) -> np.ndarray | None:
            values = list(getattr(p, attr))
            return np.array([values[i] for i in order], dtype=float) if values else None

        points = [
            Point(field(p, "positions"), field(p, "velocities"), field(p, "accelerations"))
            for p in msg.points
        ]
        pos = np.array([p.pos for p in points])
        # what the message requests: mean speeds from the measured pose and between points, velocity fields
        speeds = []
        prev_t, prev_q = 0.0, q
        for t, p in zip(times, pos, strict=True):
            gap = float(np.max(np.abs(p - prev_q)))
            speeds.append(gap / (t - prev_t) if t > prev_t else (0.0 if gap < 1e-9 else float("inf")))
            prev_t, prev_q = t, p
        fields = [float(np.max(np.abs(p.vel))) for p in points if p.vel is not None]
        peak = float(max(speeds + fields))
        event |= {
            "accepted": True,
            "first": pos[0].tolist(),
            "last": pos[-1].tolist(),
            "t_first": float(times[0]),
            "duration_s": float(times[-1]),
            "speed_rad_s": peak,
            "segment_speeds": speeds,  # from the measured pose to the first point, then between points
            "velocity_fields": fields,
            "times": times.tolist(),
            "actual_velocity": c.servo.v.tolist(),
            "over_cap": bool(peak > c.vmax * 1.001 + 1e-6),
            "kind": "linear" if points[0].vel is None else "cubic" if points[0].acc is None else "quintic",
            "stamp_s": _secs(msg.header.stamp),
        }
        with self.lock:
            c.pending = Trajectory(_secs(msg.header.stamp), times, points, received_s)
            if self.first_accepted is None:
                self.first_accepted, self.first_end = now, now + float(times[-1])
        self.write(event)

    def update(self) -> None:
        """One controller_manager update: read the hardware, update every active controller,
        then the broadcaster publishes the state it read."""
        now = time.monotonic()
        ros_now = self.nodes["controller_manager"].get_clock().now().nanoseconds * 1e-9
        truths = []
        with self.lock:
            dt = min(1.0, now - self.t_update)
            self.t_update = now
            # a late wake-up replays the interval in steps of at most TRUTH_STEP_S, each state on the
            # truth topic: the arm's motion stays densely measured whenever this process runs
            n = max(1, int(np.ceil(dt / TRUTH_STEP_S - 1e-9)))
            for k in range(1, n + 1):
                t_k = ros_now - dt + dt * k / n
                for c in self.controllers.values():
                    c.update(t_k, dt / n)  # the controllers' time is ROS time, as header stamps are
                state = {
                    j: (float(q), float(v))
                    for c in self.controllers.values()
                    for j, q, v in zip(c.joints, c.servo.q, c.servo.v, strict=True)
                }
                truths.append((t_k, state))
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
        ns = round((ros_now + float(cfg.get("stamp_offset_s", 0.0))) * 1e9)  # when the state was read
        for t_k, st in truths if self.truth_pub is not None else ():
            truth = self._JointState(name=list(st), position=[x[0] for x in st.values()])
            truth.velocity = [x[1] for x in st.values()]
            ns_k = round((t_k + float(cfg.get("stamp_offset_s", 0.0))) * 1e9)
            truth.header.stamp.sec, truth.header.stamp.nanosec = ns_k // 1_000_000_000, ns_k % 1_000_000_000
            self.truth_pub.publish(truth)
        if not self.publish_js:
            return
        self.n_read += 1
        if (self.n_read - 1) % max(1, int(cfg.get("joint_state_every", 1))):
            return
        msg = self._JointState()
        msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
        omit = set(cfg.get("omit_joints", []))
        names = [j for j in state if j not in omit]
        msg.name = names
        msg.position = [state[j][0] for j in names]
        mode = cfg.get("joint_state_velocity", "measured")
        if mode == "none":
            msg.velocity = []
        elif mode == "nan":
            msg.velocity = [float("nan")] * len(names)
        else:
            msg.velocity = [state[j][1] for j in names]
        msg.effort = [0.0] * len(names)
        self.outbox.append((now + self.latency(ros_now), msg))
        self.deliver(now)
        if self.last_js is not None and now - self.last_js > GAP_S:  # this process was late itself
            self.write({"event": "js_gap", "from": self.last_js, "to": now})
        self.last_js = now

    def latency(self, ros_now: float) -> float:
        """The link's delay for a state read at `ros_now`: the backlog's ramp plus the jitter."""
        backlog = float(self.cfg.get("joint_state_backlog_s", 0.0))
        period = float(self.cfg.get("joint_state_backlog_period_s", 0.1))
        jitter = float(self.cfg.get("joint_state_jitter_s", 0.0))
        ramp = backlog * (ros_now % period) / period if backlog > 0 else 0.0
        return ramp + (float(self.rng.uniform(0.0, jitter)) if jitter > 0 else 0.0)

    def deliver(self, now: float) -> float | None:
        """Publish the held joint states whose time has come, in order (a message waits for the
        ones before it: held messages go out together). Returns the next release time."""
        while self.outbox and self.outbox[0][0] <= now:
            self.js_pub.publish(self.outbox.pop(0)[1])
        return self.outbox[0][0] if self.outbox else None

    def publish_diagnostics(self) -> None:
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue

        node = self.nodes["controller_manager"]
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK,
            name=f"{node.get_name()}: Controllers Activity",
            message="All controllers are active"
            if all(c.active for c in self.controllers.values())
            else "Not all controllers are active",
            values=[
                KeyValue(key=f"{n}.state", value="active" if c.active else "inactive")
                for n, c in self.controllers.items()
            ],
        )
        arr = self._DiagnosticArray()
        arr.header.stamp = node.get_clock().now().to_msg()
        arr.status = [status]
        self.diag_pub.publish(arr)

    def publish_images(self, k: int) -> None:
        stop = float(self.cfg.get("stop_images_after_s", -1))
        if stop >= 0 and time.monotonic() - self.t_start > stop:
            return
        after = float(self.cfg.get("stop_images_after_trajectory_s", -1))
        started = self.first_accepted
        if after >= 0 and started is not None and time.monotonic() - started > after:
            return
        for topic, (pub, (w, h)) in self.cams.items():
            img = self._Image()
            img.header.stamp = self.nodes["jtc_double"].get_clock().now().to_msg()
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
    names = ["jtc_double", "controller_manager", "joint_state_broadcaster", *cfg["controllers"]]
    nodes = {n: rclpy.create_node(n) for n in names}
    double = Double(nodes, cfg)
    executor = SingleThreadedExecutor()
    for node in nodes.values():
        executor.add_node(node)
    spin = threading.Thread(target=executor.spin, daemon=True)
    spin.start()
    period = 1.0 / float(cfg.get("rate_hz", 100.0))
    img_period = 1.0 / float(cfg.get("image_rate_hz", 4.0))
    next_js = next_img = next_diag = time.monotonic()
    k = 0
    double.write({"event": "ready", "t": time.monotonic()})
    try:
        while rclpy.ok():
            now = time.monotonic()
            if not double.subscribed and now >= double.subscribe_at:
                double.subscribe()
            if now >= next_js:
                double.update()
                next_js += period
                if next_js < now:
                    next_js = now + period
            if now >= next_diag:
                double.publish_diagnostics()
                next_diag = now + 1.0
            if double.cams and now >= next_img:
                double.publish_images(k)
                k += 1
                next_img = now + img_period
            release = double.deliver(time.monotonic())
            wake = min(next_js, next_img if double.cams else next_js, release or next_js)
            time.sleep(max(0.0, wake - time.monotonic()))
    except KeyboardInterrupt:
        pass
    finally:
        rclpy.try_shutdown()
        spin.join(timeout=2)
        for node in nodes.values():
            node.destroy_node()
    return 0


if __name__ == "__main__":
    sys.exit(main())
