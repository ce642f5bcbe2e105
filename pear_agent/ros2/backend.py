"""The ROS 2 backend: the same contract as the simulator, over ros2_control's topic interfaces.

Reads `/joint_states` and camera topics (best-effort), commands each arm and gripper through its
joint_trajectory_controller (`/<controller>/joint_trajectory`, reliable), and decides reached /
blocked from the joint states it reads back. It refuses to command on stale or incomplete joint
states, and an e-stop (a `std_msgs/Bool` topic or a `std_srvs/Trigger` service) cancels the motion
with an empty trajectory (the controller's "hold position") and sends nothing more.

rclpy is imported here and in the nodes only; the turn loop never imports this module.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pear_agent.backend import FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.kinematics import Kinematics
from pear_agent.motion import SettleJudge
from pear_agent.robot_config import RobotConfig
from pear_agent.ros2 import conversions as cv


class RosSettings(BaseModel):
    """Backend parameters (ROS parameters of the agent node, same names)."""

    model_config = ConfigDict(extra="forbid")

    joint_states_topic: str = "/joint_states"
    joint_state_max_age_s: float = Field(0.5, gt=0, description="older joint states: refuse to command")
    wait_for_joint_states_s: float = Field(10.0, ge=0, description="at reset, wait this long for them")
    reach_tolerance_rad: float = Field(0.01, gt=0)
    still_velocity_rad_s: float = Field(0.03, gt=0)
    gripper_still_velocity: float = Field(0.004, gt=0, description="gripper joint units per second")
    stall_tracking_error_rad: float = Field(0.3, gt=0, description="tracking error that means a stall")
    settle_timeout_s: float = Field(3.0, gt=0)
    gripper_speed: float = Field(0.1, gt=0, description="gripper joint units per second (m/s: YAM)")
    trajectory_dt_s: float = Field(0.05, gt=0, description="spacing of trajectory points")
    go_home_on_reset: bool = True
    wait_for_images_s: float = Field(3.0, ge=0, description="at reset, wait this long for every camera")
    estop_topic: str = "/pear/estop"
    estop_service: str = "/pear/stop"
    task_status_topic: str = Field(
        "/pear/sim/task_status", description="sim-only task status (success, privileged); '' = none"
    )


def spin_in_background(node: Any) -> Any:
    """Spin `node` in a daemon thread (callbacks run there while the caller blocks). Returns a
    function that shuts rclpy down, joins the thread and destroys the node, in that order (any
    other order can abort the interpreter at exit)."""
    import contextlib

    import rclpy
    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException, KeyboardInterrupt):
            executor.spin()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()

    def shutdown() -> None:
        rclpy.try_shutdown()
        thread.join(timeout=2.0)
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()

    return shutdown


def declare_params(node: Any, defaults: dict[str, Any]) -> dict[str, Any]:
    """Declare ROS parameters with these defaults; ints are accepted for floats (YAML `1` for
    `1.0`), any other type mismatch is a ValueError naming the parameter (no rclpy traceback)."""
    from rcl_interfaces.msg import ParameterDescriptor

    out: dict[str, Any] = {}
    for key, default in defaults.items():
        value = node.declare_parameter(key, default, ParameterDescriptor(dynamic_typing=True)).value
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise ValueError(
                f"parameter {key}: expected {type(default).__name__}, got {type(value).__name__} {value!r}"
            )
        out[key] = value
    return out


def trajectory_topic(controller: str) -> str:
    return f"/{controller.strip('/')}/joint_trajectory"


class _PartSpec:
    def __init__(self, robot: RobotConfig, kin: Kinematics, name: str) -> None:
        part = robot.parts[name]
        self.name = name
        self.joints = list(part.joints)
        self.lower, self.upper = kin.joint_limits(name)
        self.vmax = part.limits.joint_velocity_rad_s
        self.home = np.array(part.home.joints_rad, dtype=float)
        self.home_gripper = part.home.gripper
        if part.controller is None:
            raise ValueError(
                f"robot {robot.name}: part {name} has no `controller` (ROS 2 trajectory controller)"
            )
        self.topic = trajectory_topic(part.controller)
        g = part.gripper
        self.gripper = g
        self.gripper_topic = trajectory_topic(g.controller) if g is not None and g.controller else None
        if g is not None:
            self.g_joint = g.joints[0]  # the driving joint; the controller couples the others
            self.g_lo = min(g.closed_joint_pos, g.open_joint_pos)
            self.g_hi = max(g.closed_joint_pos, g.open_joint_pos)

    def gripper_position(self, command: float) -> float:
        g = self.gripper
        assert g is not None
        return g.closed_joint_pos + float(np.clip(command, 0, 1)) * (g.open_joint_pos - g.closed_joint_pos)

    def gripper_opening(self, position: float) -> float:
        g = self.gripper
        assert g is not None
        return float(np.clip((position - g.closed_joint_pos) / (g.open_joint_pos - g.closed_joint_pos), 0, 1))


class RosBackend:
    """Backend over a live ROS 2 graph. `node` must be spun by the caller (in another thread)."""

    def __init__(
        self,
        robot: RobotConfig,
        node: Any,
        task: TaskInfo,
        settings: RosSettings | None = None,
        kinematics: Kinematics | None = None,
    ) -> None:
        from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger
        from trajectory_msgs.msg import JointTrajectory

        self.robot = robot
        self.task = task
        self.node = node
        self.settings = s = settings or RosSettings()
        kin = kinematics or Kinematics(robot)
        self.parts = {name: _PartSpec(robot, kin, name) for name in robot.parts}
        self._lock = threading.Lock()
        self._pub_lock = threading.RLock()  # an e-stop and a send never interleave
        self._joints: dict[str, tuple[float, float, float]] = {}  # name -> (pos, vel, receipt time)
        self._images: dict[str, tuple[Any, bool]] = {}
        self._decoded: dict[str, np.ndarray] = {}
        self._status: dict[str, Any] = {}
        self._status_t = 0.0
        self._estop_reason: str | None = None
        self._t0 = time.monotonic()
        self._JointTrajectory = JointTrajectory
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self._pubs: dict[str, Any] = {}
        for p in self.parts.values():
            self._pubs[p.topic] = node.create_publisher(JointTrajectory, p.topic, reliable)
            if p.gripper_topic:
                self._pubs[p.gripper_topic] = node.create_publisher(
                    JointTrajectory, p.gripper_topic, reliable
                )
        self.published: list[tuple[float, str, Any]] = []
        """(monotonic time, topic, message) of every trajectory sent: for logs and tests."""
        node.create_subscription(
            JointState, s.joint_states_topic, self._on_joint_state, qos_profile_sensor_data
        )
        for cam_name, cam in robot.cameras.items():
            if not cam.topic:
                continue
            compressed = cv.is_compressed_topic(cam.topic)
            node.create_subscription(
                CompressedImage if compressed else Image,
                cam.topic,
                lambda msg, n=cam_name, c=compressed: self._on_image(n, msg, c),
                qos_profile_sensor_data,
            )
        node.create_subscription(Bool, s.estop_topic, self._on_estop_msg, reliable)
        node.create_service(Trigger, s.estop_service, self._on_estop_srv)
        if s.task_status_topic:
            node.create_subscription(String, s.task_status_topic, self._on_status, reliable)

    # -- callbacks (executor thread) ----------------------------------------------------
    def _on_joint_state(self, msg: Any) -> None:
        now = time.monotonic()
        with self._lock:
            for i, name in enumerate(msg.name):
                pos = float(msg.position[i]) if i < len(msg.position) else float("nan")
                vel = float(msg.velocity[i]) if i < len(msg.velocity) else float("nan")
                self._joints[name] = (pos, vel, now)

    def _on_image(self, camera: str, msg: Any, compressed: bool) -> None:
        with self._lock:
            self._images[camera] = (msg, compressed)
            self._decoded.pop(camera, None)

    def _on_status(self, msg: Any) -> None:
        try:
            status = json.loads(msg.data)
        except ValueError:
            return
        with self._lock:
            self._status = status
            self._status_t = time.monotonic()

    def _on_estop_msg(self, msg: Any) -> None:
        if msg.data:
            self.emergency_stop(f"e-stop on {self.settings.estop_topic}")

    def _on_estop_srv(self, request: Any, response: Any) -> Any:
        self.emergency_stop(f"e-stop through the {self.settings.estop_service} service")
        response.success = True
        response.message = "stopped: holding the last pose; no further commands will be sent"
        return response

    # -- e-stop -------------------------------------------------------------------------
    def emergency_stop(self, reason: str) -> None:
        """Latching: cancel the motion (an empty trajectory makes joint_trajectory_controller hold
        its current position; the YAM drops if torque is cut) and never command again."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return
            self._estop_reason = reason
            for p in self.parts.values():
                self._publish_raw(p.topic, p.joints, None)
                if p.gripper_topic:
                    self._publish_raw(p.gripper_topic, [p.g_joint], None)
        self.node.get_logger().warning(f"{reason}: holding the last pose")

    @property
    def stopped_reason(self) -> str | None:
        return self._estop_reason

    # -- state --------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def joint_check(self, names: list[str]) -> str | None:
        """Why commanding is unsafe now (missing or stale joint states), or None."""
        now = time.monotonic()
        with self._lock:
            missing = [n for n in names if n not in self._joints]
            ages = [now - self._joints[n][2] for n in names if n in self._joints]
        if len(missing) == len(names):
            return "no joint states received"
        if missing:
            return f"joint states lack {', '.join(missing)}"
        age = max(ages)
        if age > self.settings.joint_state_max_age_s:
            return f"joint states are {age:.1f} s old (limit {self.settings.joint_state_max_age_s:g} s)"
        return None

    def _read(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            pos = np.array([self._joints[n][0] if n in self._joints else np.nan for n in names])
            vel = np.array([self._joints[n][1] if n in self._joints else np.nan for n in names])
        return pos, vel

    def _required_joints(self) -> list[str]:
        out = []
        for p in self.parts.values():
            out += p.joints
            if p.gripper is not None:
                out.append(p.g_joint)
        return out

    def wait_for_joint_states(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.joint_check(self._required_joints()) is None:
                return True
            time.sleep(0.02)
        return self.joint_check(self._required_joints()) is None

    # -- Backend protocol ---------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        """Wait for joint states, then (optionally) drive home. Never hangs: without joint states
        the observation reports the home pose and the first execute() refuses, saying why."""
        self._t0 = time.monotonic()
        ready = self.wait_for_joint_states(self.settings.wait_for_joint_states_s)
        if ready and self.settings.go_home_on_reset and self._estop_reason is None:
            self.execute(
                {
                    n: PartCommand(joints_rad=p.home, gripper=p.home_gripper if p.gripper else None)
                    for n, p in self.parts.items()
                }
            )
        self._t0 = time.monotonic()
        self._wait_images(self.settings.wait_for_images_s)
        if self.settings.task_status_topic:
            self._wait_status(min(2.0, self.settings.wait_for_joint_states_s))
        return self.observe()

    def _fresh_status(self, timeout_s: float = 0.3) -> dict[str, Any]:
        """A simulator's task status sent after this call (it publishes at ~10 Hz), so success and
        the privileged facts describe the settled state; the last one if none comes in time."""
        t_call = time.monotonic()
        if self.settings.task_status_topic and self._status_t > 0:
            while self._status_t < t_call and time.monotonic() - t_call < timeout_s:
                time.sleep(0.005)
        return self.status()

    def _wait_images(self, timeout_s: float) -> None:
        wanted = {n for n, c in self.robot.cameras.items() if c.topic}
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if wanted <= set(self._images):
                    return
            time.sleep(0.02)

    def _wait_status(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.status() and time.monotonic() < deadline:
            time.sleep(0.02)

    def observe(self, render: bool = True) -> Observation:
        """The latest data; never waits. Joints not heard of yet read as the home pose (execute
        refuses to move on them)."""
        joints, gripper = {}, {}
        for name, p in self.parts.items():
            pos, _ = self._read(p.joints)
            joints[name] = np.where(np.isnan(pos), p.home, pos)
            if p.gripper is not None:
                gpos, _ = self._read([p.g_joint])
                gripper[name] = p.home_gripper if np.isnan(gpos[0]) else p.gripper_opening(float(gpos[0]))
        images = self._latest_images() if render else {}
        status = self._fresh_status()
        return Observation(
            joints_rad=joints,
            gripper=gripper,
            images=images,
            time_s=time.monotonic() - self._t0,
            success=bool(status.get("success", False)),
            privileged=status.get("privileged", {}) or {},
        )

    def _latest_images(self) -> dict[str, np.ndarray]:
        out = {}
        with self._lock:
            pending = {k: v for k, v in self._images.items() if k not in self._decoded}
            out.update(self._decoded)
        for cam, (msg, compressed) in pending.items():
            try:
                img = cv.compressed_to_rgb(msg) if compressed else cv.image_to_rgb(msg)
            except cv.ImageDecodeError as exc:
                self.node.get_logger().warning(f"camera {cam}: {exc}")
                continue
            with self._lock:
                self._decoded[cam] = img
            out[cam] = img
        return {k: out[k] for k in self.robot.cameras if k in out}

    def _publish_raw(self, topic: str, joint_names: list[str], plan: cv.TrajectoryPlan | None) -> None:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        msg = self._JointTrajectory()
        msg.joint_names = list(joint_names)
        if plan is not None:
            cv.fill_trajectory(msg, plan, JointTrajectoryPoint, Duration)
        self.published.append((time.monotonic(), topic, msg))
        self._pubs[topic].publish(msg)

    def _send(self, topic: str, plan: cv.TrajectoryPlan) -> bool:
        """Publish unless stopped (checked at the last moment, under the lock's view)."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return False
            self._publish_raw(topic, plan.joint_names, plan)
            return True

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        s = self.settings
        if self._estop_reason is not None:
            return Outcome("stopped", f"{self._estop_reason}; no further motion")
        needed = []
        for name, cmd in commands.items():
            p = self.parts[name]
            if cmd.joints_rad is not None:
                needed += p.joints
            if cmd.gripper is not None and p.gripper is not None:
                needed.append(p.g_joint)
        if needed:
            why = self.joint_check(needed)
            if why is not None:
                return Outcome("refused", f"{why}; no command was sent")
        start = time.monotonic()
        plans: dict[str, cv.TrajectoryPlan] = {}
        grippers: dict[str, float] = {}
        for name, cmd in commands.items():
            p = self.parts[name]
            if cmd.joints_rad is not None:
                q0, _ = self._read(p.joints)
                plans[name] = cv.min_jerk_plan(
                    p.joints,
                    q0,
                    np.asarray(cmd.joints_rad, float),
                    p.vmax,
                    p.lower,
                    p.upper,
                    s.trajectory_dt_s,
                )
            if cmd.gripper is not None and p.gripper is not None and p.gripper_topic:
                g0, _ = self._read([p.g_joint])
                target = p.gripper_position(cmd.gripper)
                dur = max(cv.MIN_SEGMENT_S, abs(target - float(g0[0])) / s.gripper_speed)
                grippers[name] = dur
                gplan = cv.TrajectoryPlan(
                    [p.g_joint],
                    np.array([dur]),
                    np.array([[float(np.clip(target, p.g_lo, p.g_hi))]]),
                    np.zeros((1, 1)),
                )
                if not self._send(p.gripper_topic, gplan):
                    return Outcome("stopped", f"{self._estop_reason}; no further motion")
        for name, plan in plans.items():
            if not self._send(self.parts[name].topic, plan):
                return Outcome("stopped", f"{self._estop_reason}; no further motion")
        duration = max([pl.duration_s for pl in plans.values()] + list(grippers.values()) + [0.0])
        return self._wait(plans, grippers, start, duration)

    def _wait(
        self, plans: dict[str, cv.TrajectoryPlan], grippers: dict[str, float], start: float, duration: float
    ) -> Outcome:
        s = self.settings
        judge = SettleJudge(duration, s.reach_tolerance_rad, s.settle_timeout_s)
        watched = self._required_joints()
        while True:
            time.sleep(0.01)
            t = time.monotonic() - start
            if self._estop_reason is not None:
                return Outcome("stopped", f"{self._estop_reason}; holding the last pose", t)
            why = self.joint_check(watched)
            if why is not None:
                self._hold_all(plans)
                return Outcome("refused", f"{why} during the motion; holding and sending nothing more", t)
            errors = {}
            for name, plan in plans.items():
                q, _ = self._read(plan.joint_names)
                ref = plan.reference(t)
                track = np.abs(q - ref)
                if t <= plan.duration_s and float(np.max(track)) > s.stall_tracking_error_rad:
                    return self._blocked(name, plan, t, "stalled during the motion")
                errors[name] = np.abs(q - plan.positions[-1])
            verdict = judge.verdict(t, {n: float(np.max(e)) for n, e in errors.items()}, self._is_still())
            if verdict is None:
                continue
            what, name = verdict
            if what == "reached":
                return Outcome("reached", "", t)
            if name is None:
                return Outcome("timeout", "the robot did not come to rest", t)
            return self._blocked(name, plans[name], t, what)

    def _is_still(self) -> bool:
        s = self.settings
        for p in self.parts.values():
            _, v = self._read(p.joints)
            if np.any(np.abs(np.nan_to_num(v)) > s.still_velocity_rad_s):
                return False
            if p.gripper is not None:
                _, gv = self._read([p.g_joint])
                if abs(float(np.nan_to_num(gv[0]))) > s.gripper_still_velocity:
                    return False
        return True

    def _hold_all(self, plans: dict[str, cv.TrajectoryPlan]) -> None:
        for name in plans:
            p = self.parts[name]
            q, _ = self._read(p.joints)
            if not np.any(np.isnan(q)):
                self._send(p.topic, cv.hold_plan(p.joints, q, p.lower, p.upper))

    def _blocked(self, name: str, plan: cv.TrajectoryPlan, t: float, why: str) -> Outcome:
        p = self.parts[name]
        q, _ = self._read(p.joints)
        err = plan.positions[-1] - q
        bad = [p.joints[i] for i in np.flatnonzero(np.abs(err) >= self.settings.reach_tolerance_rad)]
        self._send(p.topic, cv.hold_plan(p.joints, q, p.lower, p.upper))  # hold where it is
        detail = f"{name} {why}; joints short of target: {', '.join(bad)} (max {np.max(np.abs(err)):.3f} rad)"
        return Outcome("blocked", detail, t, bad)

    def advance(self, duration_s: float) -> None:
        """A real robot's clock runs by itself: nothing to do."""

    def set_frame_sink(self, sink: FrameSink | None, fps: float = 10.0) -> None:
        """No video from the live robot (record the camera topics with `ros2 bag` instead)."""

    def stop(self) -> None:
        self.emergency_stop("stop() called")

    def close(self) -> None:
        pass
