"""The ROS 2 backend: the same contract as the simulator, over ros2_control's topic interfaces.

Reads `/joint_states` and camera topics, commands each arm and gripper through its stock
joint_trajectory_controller (`/<controller>/joint_trajectory`, reliable), and decides reached /
blocked from the joint states it reads back. Safety, in the controller's own terms:

- It checks the stack before moving (joint states of every joint, a subscriber on every
  controller's command topic, every camera publishing) and refuses with one line naming what
  is missing; the policy is never called on a made-up state.
- It plans and judges stalls only from joint states younger than `joint_state_max_age_s`
  (default 0.1 s at 50 Hz; the age is the header stamp's, so a late delivery counts); every move
  (the home move too) is a ruckig time-optimal, jerk-limited profile from the measured state
  within the speed cap and the acceleration limit. Joint states and the e-stop are served by a
  node and executor of their own in a thread of their own, so image work and policy calls cannot
  delay them.
- Every stop (the e-stop, a stall, joint states going stale mid-motion) is a braking profile
  (ruckig, within `stop_deceleration_rad_s2` and `stop_jerk_rad_s3`) from the arm's state now to
  rest, sent as a multi-point trajectory on the controller's topic that ends where the arm comes
  to rest: the stock joint_trajectory_controller starts every new trajectory from the position
  AND velocity it measures, so a one-point "hold" at an older pose would overshoot and come back.
  At rest it is one point where the arm is. Nothing is ever clipped into the limits to hold.
- An e-stop (a `std_msgs/Bool` topic or a `std_srvs/Trigger` service) latches: nothing is sent
  until the node restarts. It is not a hardware e-stop: the robot's own button is.

rclpy is imported here and in the nodes only; the turn loop never imports this module.
"""

from __future__ import annotations

import json
import os
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
from pear_agent.ros2 import joint_velocity as jv

START_LATENESS_S = 0.25
"""A controller may start a trajectory this much after it was sent (DDS and a busy machine)
before falling behind the reference counts as a stall."""

UNKNOWN_NODE = "_NODE_NAME_UNKNOWN_"
"""The node name the ROS graph gives an endpoint before its node's discovery info has arrived."""

LIMIT_SLACK_RAD = 1e-3
"""An arm joint this far outside its limits still counts as inside (encoder noise at a stop)."""


class ResetAborted(Exception):
    """The episode ends before the first policy call: the stack check failed, the home move did not
    reach home, or an e-stop came during the reset. `status` is "refused" or "stopped"."""

    def __init__(self, status: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class RosSettings(BaseModel):
    """Backend parameters (ROS parameters of the agent node, same names)."""

    model_config = ConfigDict(extra="forbid")

    joint_states_topic: str = "/joint_states"
    joint_state_max_age_s: float = Field(
        0.1, gt=0, description="plan, hold and judge only from joint states younger than this (50 Hz: 0.1)"
    )
    wait_for_fresh_state_s: float = Field(
        0.3, ge=0, description="wait this long for a fresh one, else refuse"
    )
    wait_for_joint_states_s: float = Field(5.0, ge=0, description="stack check: wait this long for them")
    wait_for_controllers_s: float = Field(3.0, ge=0, description="stack check: wait for controller topics")
    controller_manager: str = Field(
        "/controller_manager",
        description="list_controllers is asked here where controller_manager_msgs exists",
    )
    reach_tolerance_rad: float = Field(0.01, gt=0)
    still_velocity_rad_s: float = Field(0.03, gt=0)
    gripper_still_velocity: float = Field(0.004, gt=0, description="gripper joint units per second")
    stall_tracking_error_rad: float = Field(0.3, gt=0, description="tracking error that means a stall")
    settle_timeout_s: float = Field(3.0, gt=0)
    gripper_speed: float = Field(0.1, gt=0, description="gripper joint units per second (m/s: YAM)")
    joint_acceleration_rad_s2: float = Field(4.0, gt=0, description="acceleration limit of every move")
    joint_jerk_rad_s3: float = Field(40.0, gt=0, description="jerk limit of every move")
    trajectory_dt_s: float = Field(0.05, gt=0, description="spacing of trajectory points")
    hold_time_s: float = Field(0.1, gt=0, description="shortest time_from_start of a one-point hold")
    stop_deceleration_rad_s2: float = Field(
        8.0, gt=0, description="deceleration limit of every stop (e-stop, stall, stale state mid-motion)"
    )
    stop_jerk_rad_s3: float = Field(100.0, gt=0, description="jerk limit of every stop")
    command_latency_s: float = Field(
        0.005,
        ge=0,
        le=0.1,
        description="send -> the controller acting on it (DDS + half an update period): a stop starts "
        "from the state predicted that far ahead",
    )
    go_home_on_reset: bool = Field(False, description="drive to the home pose before the first turn")
    confirm_home: bool = Field(True, description="ask the operator before the home move")
    wait_for_images_s: float = Field(3.0, ge=0, description="stack check: wait this long for every camera")
    image_max_age_s: float = Field(1.0, gt=0, description="an older camera image ends the episode (refused)")
    disabled_cameras: str = Field(
        "", description="comma-separated cameras of the robot YAML not to use ('all' = none)"
    )
    video_camera: str = Field(
        "", description="camera recorded to episode.mp4 ('' = the first, 'none' = no video)"
    )
    estop_topic: str = "/pear/estop"
    estop_service: str = "/pear/stop"
    operator_service: str = "/pear/operator/judge"
    operator_terminal: bool = Field(True, description="also ask on the terminal when stdin is one")
    operator_timeout_s: float = Field(120.0, gt=0, description="wait this long for the operator's answer")
    task_status_topic: str = Field(
        "", description="sim-only task status (success, privileged facts): '' on a real robot"
    )
    driver_status_topic: str = Field(
        "/pear/driver/{part}/status",
        description="a driver's JSON status per part (yam_driver_node): a latched or faulted driver is "
        "refused by name; '' = none (a ros2_control stack)",
    )


DRIVER_STATUS_MAX_AGE_S = 3.0
"""A driver republishes its status every second; an older one tells nothing (the joint-state check
speaks for a driver that is gone)."""


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
        while _EXTRA_SPINNERS:
            _EXTRA_SPINNERS.pop()()
        node.destroy_node()

    return shutdown


_EXTRA_SPINNERS: list[Any] = []
"""Stops of the nodes a RosBackend spins itself (its joint-state / e-stop node): run by
spin_in_background's shutdown after rclpy's, before the caller's node is destroyed."""


def spin_own_node(node: Any) -> Any:
    """Spin `node` in a daemon thread of its own (its callbacks never queue behind another node's);
    returns its stop function, also registered to run at spin_in_background's shutdown."""
    import contextlib

    from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

    executor = SingleThreadedExecutor(context=node.context)
    executor.add_node(node)

    def spin() -> None:
        with contextlib.suppress(ExternalShutdownException, KeyboardInterrupt):
            executor.spin()

    thread = threading.Thread(target=spin, daemon=True, name=f"spin {node.get_name()}")
    thread.start()
    done = threading.Event()

    def stop() -> None:
        if done.is_set():
            return
        done.set()
        executor.shutdown(timeout_sec=1.0)
        thread.join(timeout=2.0)
        node.destroy_node()

    _EXTRA_SPINNERS.append(stop)
    return stop


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


def controller_states(node: Any, controller_manager: str, timeout_s: float = 2.0) -> dict[str, str] | None:
    """Controller name -> state from controller_manager's list_controllers, where its message package
    is installed (it is not among the PyPI ROS wheels); None where it cannot be asked. `node` must be
    spun by another thread."""
    try:
        from controller_manager_msgs.srv import ListControllers  # type: ignore[import-not-found]
    except ImportError:
        return None
    client = node.create_client(ListControllers, f"{controller_manager}/list_controllers")
    try:
        if not client.wait_for_service(timeout_sec=min(1.0, timeout_s)):
            return None
        future = client.call_async(ListControllers.Request())
        deadline = time.monotonic() + timeout_s
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not future.done() or future.result() is None:
            return None
        return {c.name: c.state for c in future.result().controller}
    finally:
        node.destroy_client(client)


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
        self.gripper_vmax = 0.1
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
        import rclpy
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger
        from trajectory_msgs.msg import JointTrajectory

        from pear_agent.ros2.operator import Operator

        self.robot = robot
        self.task = task
        self.node = node
        self.settings = s = settings or RosSettings()
        kin = kinematics or Kinematics(robot)
        self.parts = {name: _PartSpec(robot, kin, name) for name in robot.parts}
        for p in self.parts.values():
            p.gripper_vmax = s.gripper_speed
        self._lock = threading.Lock()
        self._pub_lock = threading.RLock()  # an e-stop and a send never interleave
        self._joints: dict[str, tuple[float, float, float, float, float | None]] = {}
        """name -> (position, velocity, receipt time (monotonic), transit counted in its age, raw
        receipt - header stamp on the system clock or None when unstamped)"""
        self._clock_note = ""
        self._estimator = jv.VelocityEstimator()
        self._velocity_from: dict[str, tuple[str, float]] = {}
        """name -> (where its velocity in `_joints` comes from: jv.PUBLISHED / jv.ESTIMATED / "" when
        unknown, the estimate's lag behind its position in s: 0 when published, inf when unknown)"""
        self._active: dict[str, tuple[cv.TrajectoryPlan, float]] = {}
        """topic -> (the last trajectory sent, monotonic time sent): where the controller is going"""
        self._images: dict[str, tuple[Any, bool, float]] = {}  # camera -> (msg, compressed, receipt)
        self._decoded: dict[str, np.ndarray] = {}
        self._status: dict[str, Any] = {}
        self._status_t = 0.0
        self._estop_reason: str | None = None
        self._gripper_target: dict[str, float] = {}  # part -> the last gripper position commanded
        self._stack_ok = False
        self._drivers: dict[str, tuple[dict[str, Any], float]] = {}  # part -> (driver status, receipt)
        self._t0 = time.monotonic()
        self._JointTrajectory = JointTrajectory
        self.judged = False
        """Set once judge_success() has run (so agent_node knows whether the loop called it)."""
        self.operator_verdict: dict[str, Any] = {}
        self.log: Any = None
        """A callable taking a dict (RunWriter.log): image stamps per observation go there."""
        self.video_fps = 10.0
        """The rate video frames are handed over at: the mp4's (agent_node sets its `video_fps`)."""
        self._sink: FrameSink | None = None
        self._sink_period_s = 0.1
        self._sink_due = 0.0  # monotonic time the next video frame is due
        self._sink_frame: tuple[float, np.ndarray] | None = None  # (receipt time, decoded) last sent
        self.cameras = self._active_cameras()
        self.video_camera = self._pick_video_camera(s.video_camera)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        # joint states, the e-stop and the trajectory publishers live on a node of their own, spun
        # by an executor in a thread of their own: image callbacks, service calls and the caller's
        # work (decoding, the policy) never queue in front of them
        self.safety_node = rclpy.create_node(f"{node.get_name()}_safety", context=node.context)
        self._pubs: dict[str, Any] = {}
        for p in self.parts.values():
            for topic in filter(None, (p.topic, p.gripper_topic)):
                self._pubs[topic] = self.safety_node.create_publisher(JointTrajectory, topic, reliable)
        self.published: list[tuple[float, str, Any]] = []
        """(monotonic time, topic, message) of every trajectory sent: for logs and tests."""
        self.safety_node.create_subscription(
            JointState, s.joint_states_topic, self._on_joint_state, qos_profile_sensor_data
        )
        for cam_name, cam_topic in self.cameras.items():
            compressed = cv.is_compressed_topic(cam_topic)
            node.create_subscription(
                CompressedImage if compressed else Image,
                cam_topic,
                lambda msg, n=cam_name, c=compressed: self._on_image(n, msg, c),
                qos_profile_sensor_data,
            )
        self.safety_node.create_subscription(Bool, s.estop_topic, self._on_estop_msg, reliable)
        self._estop_pub = self.safety_node.create_publisher(Bool, s.estop_topic, reliable)
        self._Bool = Bool
        self.safety_node.create_service(Trigger, s.estop_service, self._on_estop_srv)
        self._stop_safety_spin = spin_own_node(self.safety_node)
        if s.task_status_topic:
            node.create_subscription(String, s.task_status_topic, self._on_status, reliable)
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        for part in self.parts if s.driver_status_topic else ():
            node.create_subscription(
                String, self.driver_status_topic(part), lambda m, n=part: self._on_driver(n, m), latched
            )
        self.operator = Operator(node, s.operator_service, s.operator_terminal)
        self.operator.abort = lambda: self._estop_reason

    def _active_cameras(self) -> dict[str, str]:
        """Camera name -> topic: the robot YAML's cameras with a topic, less `disabled_cameras`."""
        off = {c.strip() for c in self.settings.disabled_cameras.split(",") if c.strip()}
        unknown = off - set(self.robot.cameras) - {"all"}
        if unknown:
            raise ValueError(
                f"disabled_cameras: {sorted(unknown)} are not cameras of robot {self.robot.name}"
            )
        return {
            n: c.topic for n, c in self.robot.cameras.items() if c.topic and n not in off and "all" not in off
        }

    def _pick_video_camera(self, wanted: str) -> str | None:
        cams = list(self.cameras)
        if wanted == "none":
            return None
        if not wanted:
            return cams[0] if cams else None
        if wanted not in cams:
            raise ValueError(
                f"video_camera {wanted!r}: not a camera with a topic in robot {self.robot.name} ({cams})"
            )
        return wanted

    # -- callbacks (executor thread) ----------------------------------------------------
    def _on_joint_state(self, msg: Any) -> None:
        now = time.monotonic()
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        transit = self._transit_s(stamp_s)
        raw = time.time() - stamp_s if stamp_s > 0 else None
        t_est = stamp_s if stamp_s > 0 else now  # the broadcaster's stamps: free of delivery jitter
        with self._lock:
            for i, name in enumerate(msg.name):
                pos = float(msg.position[i]) if i < len(msg.position) else float("nan")
                vel = float(msg.velocity[i]) if i < len(msg.velocity) else float("nan")
                if np.isfinite(vel):
                    self._velocity_from[name] = (jv.PUBLISHED, 0.0)
                else:  # no velocity state interface (empty array) or a driver's NaN: from the motion
                    self._estimator.add(name, t_est, pos)
                    est = self._estimator.estimate(name)
                    vel = est.velocity if est is not None else float("nan")
                    self._velocity_from[name] = (jv.ESTIMATED, est.lag_s) if est else ("", float("inf"))
                self._joints[name] = (pos, vel, now, transit, raw)

    def _transit_s(self, stamp_s: float) -> float:
        """How old a message already was when it arrived: receipt (system clock) - header stamp.
        0 for an unstamped message; a stamp more than 1 s off is a clock not shared with the
        robot (noted once in the log) and counts from receipt."""
        if stamp_s <= 0.0:
            return 0.0
        transit = time.time() - stamp_s
        if -0.05 <= transit <= 1.0:
            return max(0.0, transit)
        if not self._clock_note:
            self._clock_note = f"joint state stamps are {transit:+.2f} s off this computer's clock"
            self.node.get_logger().warning(
                f"{self._clock_note}: synchronise the clocks (chrony/PTP); ages count from receipt"
            )
        return 0.0

    def _on_image(self, camera: str, msg: Any, compressed: bool) -> None:
        with self._lock:
            self._images[camera] = (msg, compressed, time.monotonic())
            self._decoded.pop(camera, None)

    def _on_status(self, msg: Any) -> None:
        try:
            status = json.loads(msg.data)
        except ValueError:
            return
        with self._lock:
            self._status = status
            self._status_t = time.monotonic()

    def _on_driver(self, part: str, msg: Any) -> None:
        try:
            status = json.loads(msg.data)
        except ValueError:
            return
        if isinstance(status, dict):
            with self._lock:
                self._drivers[part] = (status, time.monotonic())

    def _on_estop_msg(self, msg: Any) -> None:
        if msg.data:
            self.emergency_stop(f"e-stop on {self.settings.estop_topic}")

    def _on_estop_srv(self, request: Any, response: Any) -> Any:
        self.emergency_stop(f"e-stop through the {self.settings.estop_service} service")
        response.success = True
        response.message = "stopped: holding the last pose; no further commands will be sent"
        return response

    # -- e-stop and stops ---------------------------------------------------------------
    def emergency_stop(self, reason: str) -> None:
        """Latching: every controller gets a braking trajectory from the arm's state now to rest
        (see `_stop_msg`), built first and then sent back to back, and nothing is sent again
        until the node restarts. On the topic interface there is no goal to cancel: a new
        trajectory replaces whatever the controller was following."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return
            self._estop_reason = reason
            missing, stops = [], []
            for p in self.parts.values():
                for topic, names in self._targets(p):
                    msg = self._stop_msg(p, topic, names)
                    if msg is None:
                        missing.append(topic)
                    else:
                        stops.append((topic, msg))
            for topic, msg in stops:
                self._publish_msg(topic, msg)
            if not reason.startswith(f"e-stop on {self.settings.estop_topic}"):
                # a service call or a crash: latch whatever else listens to the e-stop topic (the
                # i2rt driver nodes stop by themselves then); our own subscription returns early
                self._estop_pub.publish(self._Bool(data=True))
        extra = f"; no joint states to stop from for {', '.join(missing)}" if missing else ""
        self.node.get_logger().warning(f"{reason}: braking to rest, sending nothing more{extra}")

    def _targets(self, p: _PartSpec) -> list[tuple[str, list[str]]]:
        out = [(p.topic, p.joints)]
        if p.gripper is not None and p.gripper_topic:
            out.append((p.gripper_topic, [p.g_joint]))
        return out

    def _stop_msg(self, p: _PartSpec, topic: str, names: list[str]) -> Any:
        """A braking trajectory to rest from the arm's state now (None when nothing is known):
        from the fresh measured state, carried forward by its age at its measured velocity; from a
        stale one, the state of the trajectory the controller is following (it keeps following
        it), never the stale measurement; at rest, one point where the arm is (never clipped into
        the limits).

        Timing: the controller starts it from the state it measures when it takes it, some
        milliseconds later, when the arm has moved on (speed x that latency). Where the robot's
        clock is ours (joint-state stamps agree with it), the stop carries header.stamp = now, so
        the controller places its points in time as planned and its first cubic joins the arm's
        state on the profile; elsewhere it starts on receipt, planned `command_latency_s` ahead."""
        s = self.settings
        q, v, age = self._read_aged(names)
        arm = names == p.joints
        decel = s.stop_deceleration_rad_s2 if arm else 10 * p.gripper_vmax
        jerk = s.stop_jerk_rad_s3 if arm else 100 * p.gripper_vmax
        active = self._active.get(topic)
        synced = self._clocks_agree(names)
        ahead = 0.0 if synced else s.command_latency_s
        planned = None
        if active is not None:
            plan, sent = active
            planned = plan.state(time.monotonic() - sent + ahead)
        fresh = age <= s.joint_state_max_age_s and not np.any(np.isnan(q))
        source, lag = self.velocity_source(names)
        if fresh and source == jv.PUBLISHED:
            q, v = cv.predict_state(q, v, age + ahead, s.joint_state_max_age_s + 0.1)
            plan = cv.brake_plan(names, q, v, decel, jerk, s.trajectory_dt_s, hold_s=s.hold_time_s)
        elif fresh and (
            chosen := jv.choose_velocity(
                np.array([]), v, lag + age, None if planned is None else planned[1], s.joint_state_max_age_s
            )
        ):
            # no published velocity: the estimated motion (or the trajectory followed), anchored on
            # the measured position, never an assumed rest
            plan = cv.anchored_brake_plan(
                names, q, chosen[0], age + ahead, s.joint_state_max_age_s + 0.1, decel, jerk,
                s.trajectory_dt_s, hold_s=s.hold_time_s,
            )  # fmt: skip
            v = chosen[0]
        elif planned is not None:
            q, v = planned
            plan = cv.brake_plan(names, q, v, decel, jerk, s.trajectory_dt_s, hold_s=s.hold_time_s)
        elif np.any(np.isnan(q)):
            return None
        else:  # stale, or its velocity unknown, and nothing commanded by us: a slow point where it is
            duration = cv.hold_time_s(age, None if np.any(np.isnan(v)) else v, decel, s.hold_time_s)
            return self._to_msg(cv.hold_plan(names, q, q, q, duration))
        if synced and float(np.max(np.abs(np.nan_to_num(v)))) >= 1e-3:  # braking, not at rest
            plan = cv.TrajectoryPlan(
                plan.joint_names,
                np.append(plan.times_s, plan.duration_s + cv.BRAKE_SETTLE_S),
                np.vstack([plan.positions, plan.positions[-1:]]),
                np.vstack([plan.velocities, np.zeros((1, len(names)))]),
                stamp_s=time.time(),
            )
        self._active[topic] = (plan, time.monotonic())
        return self._to_msg(plan)

    def velocity_source(self, names: list[str]) -> tuple[str, float]:
        """Where the velocities of `names` come from (the worst of them: jv.PUBLISHED, jv.ESTIMATED,
        or "" when one is unknown) and the oldest estimate's lag behind its position (s)."""
        with self._lock:
            rows = [self._velocity_from.get(n, ("", float("inf"))) for n in names]
        lag = max((r[1] for r in rows), default=float("inf"))
        if any(r[0] == "" for r in rows) or not rows:
            return "", lag
        return (jv.ESTIMATED if any(r[0] == jv.ESTIMATED for r in rows) else jv.PUBLISHED), lag

    def velocity_report(self) -> dict[str, dict[str, Any]]:
        """Per controller: whether /joint_states publishes its joints' velocities, and what a stop
        brakes from (the stack check logs it)."""
        out: dict[str, dict[str, Any]] = {}
        for name, p in self.parts.items():
            for topic, names in self._targets(p):
                controller = (
                    self.robot.parts[name].controller
                    if names == p.joints
                    else getattr(p.gripper, "controller", None)
                ) or topic
                source, _ = self.velocity_source(names)
                stop = jv.PUBLISHED if source == jv.PUBLISHED else jv.ESTIMATED
                out[controller] = {
                    "velocities_published": source == jv.PUBLISHED,
                    "stop_velocity_source": stop,
                    "fallback": None if source == jv.PUBLISHED else jv.TRAJECTORY,
                }
        return out

    def _clocks_agree(self, names: list[str]) -> bool:
        """The last joint states of `names` were stamped by a clock that agrees with ours: they
        arrived 0..50 ms after their stamps (a later arrival or a stamp from the future is a
        clock of its own, or a late message: no stamped stop then)."""
        with self._lock:
            rows = [self._joints.get(n) for n in names]
        if any(r is None for r in rows):
            return False
        transits = [r[4] for r in rows]  # type: ignore[index]
        return all(t is not None and -0.005 <= t <= 0.05 for t in transits)

    def _stop_part(self, p: _PartSpec, topic: str, names: list[str]) -> bool:
        """Publish a braking trajectory to rest (False when there is no state to stop from)."""
        msg = self._stop_msg(p, topic, names)
        if msg is not None:
            self._publish_msg(topic, msg)
        return msg is not None

    @property
    def stopped_reason(self) -> str | None:
        return self._estop_reason

    # -- state --------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def _read_aged(self, names: list[str]) -> tuple[np.ndarray, np.ndarray, float]:
        """Positions, velocities and the age of the oldest of them (inf when one is missing): the
        time since its header stamp (since receipt where the clocks disagree), so a message that
        arrived late counts as old as it is."""
        now = time.monotonic()
        with self._lock:
            rows = [self._joints.get(n) for n in names]
        if any(r is None for r in rows):
            return np.full(len(names), np.nan), np.full(len(names), np.nan), float("inf")
        pos = np.array([r[0] for r in rows])
        vel = np.array([r[1] for r in rows])
        return pos, vel, max(now - r[2] + r[3] for r in rows)

    def _read(self, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        pos, vel, _ = self._read_aged(names)
        return pos, vel

    def joint_check(self, names: list[str]) -> str | None:
        """Why commanding is unsafe now (missing or stale joint states), or None."""
        topic = self.settings.joint_states_topic
        now = time.monotonic()
        with self._lock:
            missing = [n for n in names if n not in self._joints]
            ages = [now - self._joints[n][2] + self._joints[n][3] for n in names if n in self._joints]
        if len(missing) == len(names):
            return f"no joint states on {topic}"
        if missing:
            return f"joint states on {topic} lack {', '.join(missing)}"
        age = max(ages)
        if age > self.settings.joint_state_max_age_s:
            limit = self.settings.joint_state_max_age_s
            return f"joint states on {topic} are {age:.2f} s old (limit {limit:g} s)"
        return None

    def fresh_check(self, names: list[str]) -> str | None:
        """joint_check after waiting up to `wait_for_fresh_state_s` for a fresh message."""
        deadline = time.monotonic() + self.settings.wait_for_fresh_state_s
        why = self.joint_check(names)
        while why is not None and time.monotonic() < deadline:
            time.sleep(0.005)
            why = self.joint_check(names)
        return why

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

    # -- the drivers' own state (yam_driver_node) -----------------------------------------
    def driver_status_topic(self, part: str) -> str:
        return self.settings.driver_status_topic.replace("{part}", part)

    def _driver_node(self, part: str) -> str:
        """The node publishing a part's driver status, e.g. /yam_right_driver ('' when unknown)."""
        try:
            infos = self.node.get_publishers_info_by_topic(self.driver_status_topic(part))
        except Exception:  # the graph is shutting down
            return ""
        for info in infos:
            if info.node_name.startswith("_NODE_NAME_UNKNOWN"):  # not discovered by name yet
                continue
            ns = info.node_namespace.rstrip("/")
            return f"{ns}/{info.node_name}"
        return ""

    def driver_states(self) -> dict[str, dict[str, Any]]:
        """Per part, its driver's last status if it is younger than DRIVER_STATUS_MAX_AGE_S."""
        now = time.monotonic()
        with self._lock:
            items = dict(self._drivers)
        return {p: st for p, (st, t) in items.items() if now - t <= DRIVER_STATUS_MAX_AGE_S}

    def driver_check(self) -> str | None:
        """A driver that is latched by an e-stop or faulted, in one line with what releases it; or
        None (no driver status: a ros2_control stack, whose controllers say nothing of the kind)."""
        for part, st in self.driver_states().items():
            node = self._driver_node(part)
            who = f"the {part} driver" + (f" ({node})" if node else "")
            if st.get("state") == "fault":
                fault = st.get("fault") or "no detail"
                return f"{who} reports a fault ({fault}): fix it and restart that driver"
            if st.get("state") == "estop":
                how = f" (or call {node}/release_estop)" if node else ""
                return (
                    f"{who} is latched by an e-stop ({st.get('estop') or 'no reason given'}): release it "
                    f"with `pear-agent ros release`{how}, then start the agent again"
                )
        return None

    def _wait_driver_status(self, timeout_s: float) -> None:
        """A driver that publishes a status (transient local) is heard before the check reads it."""
        if not self.settings.driver_status_topic:
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                heard = set(self._drivers)
            waiting = [
                p
                for p in self.parts
                if p not in heard and self.node.count_publishers(self.driver_status_topic(p)) > 0
            ]
            if not waiting:
                return
            time.sleep(0.02)

    # -- the stack check ----------------------------------------------------------------
    def check_stack(self) -> str | None:
        """Before anything moves: joint states of every joint, no driver latched or faulted, a
        controller behind every command topic (active, where list_controllers can be asked), every
        camera publishing. One line naming what is missing, or None. Bounded by the wait settings."""
        s = self.settings
        log = self.node.get_logger()
        domain = os.environ.get("ROS_DOMAIN_ID", "0")
        topic = s.joint_states_topic
        required = self._required_joints()
        deadline = time.monotonic() + s.wait_for_joint_states_s
        next_note = 0.0
        while self.joint_check(required) is not None and time.monotonic() < deadline:
            if time.monotonic() >= next_note:
                log.info(f"waiting for joint states on {topic} (ROS_DOMAIN_ID={domain})")
                next_note = time.monotonic() + 2.0
            time.sleep(0.02)
        why = self.joint_check(required)
        if why is not None:
            with self._lock:
                heard = bool(self._joints)
            if not heard:
                return (
                    f"no joint states on {topic} within {s.wait_for_joint_states_s:g} s "
                    f"(ROS_DOMAIN_ID={domain}): is the robot's joint_state_broadcaster running on "
                    "this domain?"
                )
            return f"{why}: check the joint names in robots/{self.robot.name}.yaml against the robot's"
        self._wait_driver_status(2.0)
        why = self.driver_check() or self.limits_check()
        if why is not None:
            return why
        topics = {}
        for name, p in self.parts.items():
            topics[p.topic] = (name, self.robot.parts[name].controller)
            if p.gripper_topic and p.gripper is not None:
                topics[p.gripper_topic] = (name, p.gripper.controller)
        deadline = time.monotonic() + s.wait_for_controllers_s
        missing = list(topics)
        while missing and time.monotonic() < deadline:
            # ... and our own publisher matched with every subscriber the graph shows (a message sent
            # before DDS has matched the two is lost, reliable or not)
            missing = [
                t
                for t in topics
                if not self._controller_listens(t, topics[t][1])
                or self._pubs[t].get_subscription_count() < len(self.node.get_subscriptions_info_by_topic(t))
            ]
            if missing:
                time.sleep(0.05)
        absent = [t for t in missing if not self._controller_listens(t, topics[t][1])]
        if absent:
            names = ", ".join(f"{t} (controller {topics[t][1]} of {topics[t][0]})" for t in absent)
            return (
                f"no controller subscribes to {names} within {s.wait_for_controllers_s:g} s: is it loaded "
                f"and active under that name (robots/{self.robot.name}.yaml)?"
            )
        if missing:
            return (
                f"the subscribers of {', '.join(missing)} did not match this node's publisher within "
                f"{s.wait_for_controllers_s:g} s (DDS discovery, or a QoS the publisher cannot serve)"
            )
        managed = [c for t, (_, c) in topics.items() if c and self._controller_node_listens(t, c)]
        inactive = self._inactive_controllers(managed)
        if inactive:
            return (
                f"controllers not active: {inactive}: activate them (controller_manager's "
                "switch_controllers) before running the agent"
            )
        why = self._wait_images(s.wait_for_images_s)
        if why is not None:
            return why
        self._log_velocity_sources()
        self._stack_ok = True
        return None

    def _log_velocity_sources(self) -> None:
        """One line per controller whose joint states carry no velocities: its stops brake from
        the estimated motion (a warning: the robot's broadcaster lacks a velocity interface)."""
        report = self.velocity_report()
        log = self.node.get_logger()
        for controller, r in report.items():
            if r["velocities_published"]:
                log.info(f"{controller}: stops brake from {jv.SOURCES[jv.PUBLISHED]}")
            else:
                log.warning(
                    f"{controller}: {self.settings.joint_states_topic} carries no (finite) velocities "
                    f"for its joints: stops brake from {jv.SOURCES[jv.ESTIMATED]} (else "
                    f"{jv.SOURCES[jv.TRAJECTORY]})"
                )

    def limits_check(self) -> str | None:
        """An arm joint outside the limits the agent plans within (the model's, from the robot
        YAML): it would not start from there (a hold clipped into the limits would move it)."""
        for name, p in self.parts.items():
            q, _ = self._read(p.joints)
            for j, x, lo, hi in zip(p.joints, q, p.lower, p.upper, strict=True):
                if x < lo - LIMIT_SLACK_RAD or x > hi + LIMIT_SLACK_RAD:
                    side = f"below its lower limit {lo:.4f}" if x < lo else f"above its upper limit {hi:.4f}"
                    return (
                        f"{name}: {j} is at {x:.4f} rad, {side} (robots/{self.robot.name}.yaml): move the "
                        "arm inside its limits before starting; the agent does not start outside them"
                    )
        return None

    def _controller_node_listens(self, topic: str, controller: str) -> bool:
        """The command topic's subscriber is a node named after the controller: a ros2_control
        controller (it subscribes once configured, but acts only once active)."""
        names = [i.node_name for i in self.node.get_subscriptions_info_by_topic(topic)]
        return controller.strip("/").split("/")[-1] in names

    def _controller_listens(self, topic: str, controller: str | None) -> bool:
        """A subscriber on the command topic from a node named after the controller (as
        ros2_control names each controller's node), or, for single-node drivers (sim_robot_node, a
        YAM driver), from any node that is not only a recorder: `ros2 topic echo` and `ros2 bag`
        nodes do not count. A subscriber whose node DDS has not named yet (the graph reports
        `_NODE_NAME_UNKNOWN_` until the node's discovery info arrives) counts as not yet seen: it
        may be a controller whose activity must be asked."""
        infos = self.node.get_subscriptions_info_by_topic(topic)
        names = [i.node_name for i in infos]
        if any(n == UNKNOWN_NODE for n in names):
            return False
        if controller and controller.strip("/").split("/")[-1] in names:
            return True
        recorders = ("_ros2cli_", "rosbag2")
        return any(not n.startswith(recorders) for n in names)

    def _inactive_controllers(self, names: list[str]) -> str | None:
        """ros2_control controllers that are not 'active', or None when all are. A configured but
        inactive controller subscribes to its command topic yet ignores what arrives there, so a
        subscriber proves nothing. The state comes from controller_manager: its list_controllers
        service where controller_manager_msgs is installed (not among the PyPI wheels), else the
        'Controllers Activity' status it publishes on /diagnostics (diagnostic_msgs; once a second)
        with one `<controller>.state` value per controller (`<controller>` before 2024). No word
        on a controller within `wait_for_controllers_s` refuses too: nothing would move."""
        if not names:
            return None
        states = controller_states(self.node, self.settings.controller_manager)
        if states is None:
            states = self._diagnosed_controller_states(names, self.settings.wait_for_controllers_s)
        bad = []
        wait = self.settings.wait_for_controllers_s
        for n in names:
            state = states.get(n)
            if state is None:
                bad.append(
                    f"{n} with no state (no list_controllers answer and no 'Controllers Activity' "
                    f"diagnostics naming it on /diagnostics within {wait:g} s)"
                )
            elif state != "active":
                bad.append(f"{n} {state}")
        return ", ".join(bad) or None

    def _diagnosed_controller_states(self, names: list[str], timeout_s: float) -> dict[str, str]:
        """controller -> state from controller_manager's /diagnostics, waiting until every one of
        `names` is named or `timeout_s` passes."""
        from diagnostic_msgs.msg import DiagnosticArray

        states: dict[str, str] = {}
        lock = threading.Lock()

        def on_diag(msg: Any) -> None:
            for st in msg.status:
                if not st.name.endswith("Controllers Activity"):
                    continue
                with lock:
                    for kv in st.values:
                        key = kv.key[: -len(".state")] if kv.key.endswith(".state") else kv.key
                        if key in names:
                            states[key] = kv.value

        sub = self.node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                with lock:
                    if all(n in states for n in names):
                        break
                time.sleep(0.02)
        finally:
            self.node.destroy_subscription(sub)
        with lock:
            return dict(states)

    def _wait_images(self, timeout_s: float) -> str | None:
        """Every camera with a topic publishing fresh images, or why not."""
        cams = self.cameras
        deadline = time.monotonic() + timeout_s
        while True:
            why = self.camera_check(cams)
            if why is None or time.monotonic() >= deadline:
                return why if why is None or "old" in why else f"{why} within {timeout_s:g} s"
            time.sleep(0.02)

    def camera_check(self, cams: dict[str, str] | None = None) -> str | None:
        """A camera with no image, or one older than `image_max_age_s`, or None."""
        cams = self.cameras if cams is None else cams
        if not cams:
            return None
        now = time.monotonic()
        with self._lock:
            seen = {n: v[2] for n, v in self._images.items()}
        missing = [n for n in cams if n not in seen]
        if missing:
            return "no image from camera " + ", ".join(f"{n} on {cams[n]}" for n in missing)
        limit = self.settings.image_max_age_s
        old = [(n, now - seen[n]) for n in cams if now - seen[n] > limit]
        if old:
            return (
                "camera "
                + ", ".join(f"{n}: last image on {cams[n]} is {a:.1f} s old" for n, a in old)
                + (f" (limit {limit:g} s)")
            )
        return None

    # -- Backend protocol ---------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        """Check the stack, (optionally, after the operator agrees) drive home at the limits,
        then observe from fresh data. Raises ResetAborted (no policy call) when the stack is
        incomplete, the home move does not reach home, or an e-stop comes."""
        s = self.settings
        self._t0 = time.monotonic()
        if self._estop_reason is not None:
            raise ResetAborted("stopped", f"{self._estop_reason}; no further motion")
        if not self._stack_ok:
            why = self.check_stack()
            if why is not None:
                raise ResetAborted("refused", why)
        if s.go_home_on_reset:
            go = True
            if s.confirm_home:
                answer, who = self.operator.ask(
                    "move both arms to the home pose now?", s.operator_timeout_s, "home"
                )
                go = bool(answer)
                self.node.get_logger().info(f"home move {'confirmed' if go else 'skipped'} ({who})")
            if go:
                outcome = self.execute(
                    {
                        n: PartCommand(joints_rad=p.home, gripper=p.home_gripper if p.gripper else None)
                        for n, p in self.parts.items()
                    }
                )
                if outcome.status == "stopped":
                    raise ResetAborted("stopped", f"during the home move: {outcome.detail}")
                if outcome.status != "reached":
                    raise ResetAborted("refused", f"the home move ended {outcome.describe()}")
        self._t0 = time.monotonic()
        why = self.fresh_check(self._required_joints()) or self.camera_check()
        if why is not None:
            raise ResetAborted("refused", why)
        if s.task_status_topic:
            self._wait_status(2.0)
        obs = self.observe()
        if self._estop_reason is not None:
            raise ResetAborted("stopped", f"{self._estop_reason}; no further motion")
        return obs

    def _fresh_status(self, timeout_s: float = 0.3) -> dict[str, Any]:
        """A simulator's task status sent after this call (it publishes at ~10 Hz), so success and
        the privileged facts describe the settled state; the last one if none comes in time."""
        t_call = time.monotonic()
        if self.settings.task_status_topic and self._status_t > 0:
            while self._status_t < t_call and time.monotonic() - t_call < timeout_s:
                time.sleep(0.005)
        return self.status()

    def _wait_status(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.status() and time.monotonic() < deadline:
            time.sleep(0.02)

    def observe(self, render: bool = True) -> Observation:
        """The latest data; never waits (reset and execute have checked that they are fresh)."""
        joints, gripper = {}, {}
        for name, p in self.parts.items():
            pos, _ = self._read(p.joints)
            joints[name] = np.where(np.isnan(pos), p.home, pos)
            if p.gripper is not None:
                gpos, _ = self._read([p.g_joint])
                gripper[name] = p.home_gripper if np.isnan(gpos[0]) else p.gripper_opening(float(gpos[0]))
        images = self._latest_images() if render else {}
        if render:
            # an image that aged past the limit since execute's check is withheld, never shown;
            # the next command is refused by that check
            info = self.image_info()
            stale = {k: v for k, v in info.items() if v["age_s"] > self.settings.image_max_age_s}
            images = {k: v for k, v in images.items() if k not in stale}
            if self.log is not None:
                record = {"kind": "images", "time_s": time.monotonic() - self._t0}
                record["cameras"] = {k: v for k, v in info.items() if k not in stale}
                if stale:
                    record["withheld_stale"] = stale
                self.log(record)
        self._pump_video()
        status = self._fresh_status()
        return Observation(
            joints_rad=joints,
            gripper=gripper,
            images=images,
            time_s=time.monotonic() - self._t0,
            success=bool(status.get("success", False)),
            privileged=status.get("privileged", {}) or {},
        )

    def image_info(self) -> dict[str, dict[str, Any]]:
        """Per camera: the header stamp, the age at receipt-to-now and the native size."""
        now = time.monotonic()
        out = {}
        with self._lock:
            items = dict(self._images)
        for cam, (msg, compressed, t) in items.items():
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            info: dict[str, Any] = {"stamp_s": round(stamp, 6), "age_s": round(now - t, 4)}
            if not compressed:
                info["native"] = [int(msg.width), int(msg.height)]
            out[cam] = info
        return out

    def _decode(self, cam: str, msg: Any, compressed: bool) -> np.ndarray | None:
        try:
            img = cv.compressed_to_rgb(msg) if compressed else cv.image_to_rgb(msg)
        except cv.ImageDecodeError as exc:
            self.node.get_logger().warning(f"camera {cam}: {exc}")
            return None
        c = self.robot.cameras[cam]
        return cv.fit_image(img, c.width, c.height)

    def _latest_images(self) -> dict[str, np.ndarray]:
        """Each camera's latest image, resized to the robot YAML's declared resolution."""
        out = {}
        with self._lock:
            pending = {k: v for k, v in self._images.items() if k not in self._decoded}
            out.update(self._decoded)
        for cam, (msg, compressed, _) in pending.items():
            img = self._decode(cam, msg, compressed)
            if img is None:
                continue
            with self._lock:
                self._decoded[cam] = img
            out[cam] = img
        return {k: out[k] for k in self.robot.cameras if k in out}

    def _pump_video(self) -> None:
        """Hand the sink one frame per period of its rate while the caller waits on a motion and at
        each observation: the video camera's newest image, or the last one again when the camera is
        slower than the video, so the mp4 plays the motion at its real speed."""
        if self._sink is None or self.video_camera is None:
            return
        now = time.monotonic()
        if now < self._sink_due:
            return
        with self._lock:
            item = self._images.get(self.video_camera)
        if item is None:
            return
        frame = self._sink_frame
        if frame is None or item[2] > frame[0]:
            img = self._decode(self.video_camera, item[0], item[1])
            if img is not None:
                frame = self._sink_frame = (item[2], img)
        if frame is None:
            return
        self._sink(frame[1])
        # on schedule; after a pause (the model deciding: nothing moved) start afresh
        behind = now - self._sink_due > self._sink_period_s
        self._sink_due = (now if behind else self._sink_due) + self._sink_period_s

    def _to_msg(self, plan: cv.TrajectoryPlan) -> Any:
        from builtin_interfaces.msg import Duration
        from trajectory_msgs.msg import JointTrajectoryPoint

        return cv.fill_trajectory(self._JointTrajectory(), plan, JointTrajectoryPoint, Duration)

    def _publish_msg(self, topic: str, msg: Any) -> None:
        self._pubs[topic].publish(msg)
        self.published.append((time.monotonic(), topic, msg))

    def _publish_raw(self, topic: str, plan: cv.TrajectoryPlan) -> None:
        self._publish_msg(topic, self._to_msg(plan))

    def _send(self, topic: str, plan: cv.TrajectoryPlan) -> bool:
        """Publish unless stopped (checked at the last moment, under the lock's view)."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return False
            self._publish_raw(topic, plan)
            self._active[topic] = (plan, time.monotonic())
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
            why = self.fresh_check(needed)
            if why is not None:
                return Outcome("refused", f"{why}; no command was sent")
        why = self.driver_check()
        if why is not None:  # a latched driver rejects every trajectory: say why, not "stalled"
            return Outcome("stopped", f"{why}; no command was sent")
        start = time.monotonic()
        plans: dict[str, cv.TrajectoryPlan] = {}
        gplans: dict[str, cv.TrajectoryPlan] = {}
        for name, cmd in commands.items():
            p = self.parts[name]
            if cmd.joints_rad is not None:
                q0, v0 = self._read(p.joints)
                plans[name] = cv.ruckig_plan(
                    p.joints,
                    q0,
                    np.asarray(cmd.joints_rad, float),
                    p.vmax,
                    s.joint_acceleration_rad_s2,
                    s.joint_jerk_rad_s3,
                    p.lower,
                    p.upper,
                    s.trajectory_dt_s,
                    v0=v0,
                )
            if cmd.gripper is not None and p.gripper is not None and p.gripper_topic:
                g0, gv0 = self._read([p.g_joint])
                target = float(np.clip(p.gripper_position(cmd.gripper), p.g_lo, p.g_hi))
                if abs(self._gripper_target.get(name, np.nan) - target) < 1e-9:
                    continue  # already commanded: a new trajectory would restart from the measured
                    # finger position (the JTC's rule) and loosen a grip on an object
                self._gripper_target[name] = target
                gplans[name] = cv.ruckig_plan(
                    [p.g_joint],
                    g0,
                    np.array([target]),
                    p.gripper_vmax,
                    10 * p.gripper_vmax,
                    100 * p.gripper_vmax,
                    np.array([p.g_lo]),
                    np.array([p.g_hi]),
                    s.trajectory_dt_s,
                    v0=gv0,
                )
        for name, gplan in gplans.items():
            if not self._send(self.parts[name].gripper_topic or "", gplan):
                return Outcome("stopped", f"{self._estop_reason}; no further motion")
        for name, plan in plans.items():
            if not self._send(self.parts[name].topic, plan):
                return Outcome("stopped", f"{self._estop_reason}; no further motion")
        duration = max([pl.duration_s for pl in [*plans.values(), *gplans.values()]] + [0.0])
        outcome = self._wait(plans, gplans, start, duration)
        if outcome.status in ("reached", "blocked", "timeout"):
            why = self.camera_check()
            if why is not None:
                return Outcome("refused", f"{why}: the model is not shown an old image", outcome.duration_s)
        return outcome

    def execute_chunk(self, steps: list[dict[str, PartCommand]]) -> tuple[Outcome, int]:
        """A chunk (issue 29): consecutive arm steps as ONE multi-point trajectory per controller
        (`ruckig_chain`: through the waypoints without stopping, within the speed, acceleration and
        jerk limits), which the stock joint_trajectory_controller follows; a step that changes a
        gripper ends a path: the arm reaches it, then the gripper moves and settles. An e-stop
        mid-chunk brakes along the path as for any motion. (outcome, steps reached)."""
        if self._estop_reason is not None:
            return Outcome("stopped", f"{self._estop_reason}; no further motion"), 0
        reached, path, elapsed = 0, [], 0.0
        commanded = dict(self._gripper_target)
        for i, step in enumerate(steps):
            path.append(step)
            changes = False
            for name, cmd in step.items():
                p = self.parts[name]
                if cmd.gripper is not None and p.gripper is not None:
                    target = float(np.clip(p.gripper_position(cmd.gripper), p.g_lo, p.g_hi))
                    changes = changes or abs(commanded.get(name, np.nan) - target) >= 1e-9
                    commanded[name] = target
            if not (changes or i == len(steps) - 1):
                continue
            arm = [
                {n: PartCommand(joints_rad=c.joints_rad) for n, c in st.items() if c.joints_rad is not None}
                for st in path
            ]
            grip = {n: PartCommand(gripper=c.gripper) for n, c in path[-1].items() if c.gripper is not None}
            moving = [a for a in arm if a]
            if len(moving) <= 1:  # one waypoint: the single-action path
                together = bool(arm[-1])  # the gripper step moves too: both at once, as one action
                first = dict(moving[0]) if moving else {}
                if together:
                    for n, c in grip.items():
                        joints = first[n].joints_rad if n in first else None
                        first[n] = PartCommand(joints_rad=joints, gripper=c.gripper)
                for cmds in [first] + ([] if together or not grip else [grip]):
                    outcome = self.execute(cmds) if cmds else Outcome("reached")
                    elapsed += outcome.duration_s
                    if outcome.status != "reached":
                        n_ok = reached + (len(path) - 1 if cmds is grip else 0)
                        return Outcome(outcome.status, outcome.detail, elapsed, outcome.blocked_joints), n_ok
                reached += len(path)
            else:
                outcome, n_passed = self._follow_chunk(arm)
                elapsed += outcome.duration_s
                if outcome.status != "reached":
                    n = min(n_passed, len(path) - 1)
                    return Outcome(
                        outcome.status, outcome.detail, elapsed, outcome.blocked_joints
                    ), reached + n
                if grip:
                    outcome = self.execute(grip)
                    elapsed += outcome.duration_s
                    if outcome.status != "reached":
                        return (
                            Outcome(outcome.status, outcome.detail, elapsed, outcome.blocked_joints),
                            reached + len(path) - 1,
                        )
                reached += len(path)
            path = []
        return Outcome("reached", "", elapsed), reached

    def _follow_chunk(self, arm: list[dict[str, PartCommand]]) -> tuple[Outcome, int]:
        """One multi-point trajectory per moving part through the steps' waypoints; (outcome, how
        many waypoints the plan had passed when it ended)."""
        s = self.settings
        names = [n for n in self.parts if any(n in st for st in arm)]
        needed = [j for n in names for j in self.parts[n].joints]
        why = self.fresh_check(needed)
        if why is not None:
            return Outcome("refused", f"{why}; no command was sent"), 0
        why = self.driver_check()
        if why is not None:
            return Outcome("stopped", f"{why}; no command was sent"), 0
        start = time.monotonic()
        plans: dict[str, cv.TrajectoryPlan] = {}
        passed: dict[str, list[float]] = {}
        for name in names:
            p = self.parts[name]
            q0, v0 = self._read(p.joints)
            wps, prev = [], np.asarray(q0, float)
            for st in arm:
                prev = np.asarray(st[name].joints_rad, float) if name in st else prev
                wps.append(prev)
            plans[name], passed[name] = cv.ruckig_chain(
                p.joints,
                q0,
                wps,
                p.vmax,
                s.joint_acceleration_rad_s2,
                s.joint_jerk_rad_s3,
                p.lower,
                p.upper,
                s.trajectory_dt_s,
                v0=v0,
            )
        self.chunk_waypoint_times_s = {n: list(v) for n, v in passed.items()}
        """When each part's last chunk trajectory passes its waypoints (s after the send)."""
        for name, plan in plans.items():
            if not self._send(self.parts[name].topic, plan):
                return Outcome("stopped", f"{self._estop_reason}; no further motion"), 0
        duration = max(pl.duration_s for pl in plans.values())
        outcome = self._wait(plans, {}, start, duration)
        t = outcome.duration_s
        n = min(sum(1 for x in passed[name] if x <= t) for name in plans)
        return outcome, n

    def _wait(
        self,
        plans: dict[str, cv.TrajectoryPlan],
        gplans: dict[str, cv.TrajectoryPlan],
        start: float,
        duration: float,
    ) -> Outcome:
        s = self.settings
        judge = SettleJudge(duration, s.reach_tolerance_rad, s.settle_timeout_s)
        watched = self._required_joints()
        stale_since: float | None = None
        while True:
            time.sleep(0.005)
            self._pump_video()
            t = time.monotonic() - start
            if self._estop_reason is not None:
                return Outcome("stopped", f"{self._estop_reason}; braked to rest", t)
            why = self.joint_check(watched)
            if why is not None:
                # the controller follows the trajectory meanwhile: wait for a fresh state as
                # long as before a command (wait_for_fresh_state_s), judge nothing from a stale one
                now = time.monotonic()
                stale_since = now if stale_since is None else stale_since
                if now - stale_since < s.wait_for_fresh_state_s:
                    continue
                self._hold_all(plans, gplans)
                return Outcome(
                    "refused",
                    f"{why} during the motion; braked to rest along the trajectory, sending nothing more",
                    t,
                )
            stale_since = None
            errors = {}
            for name, plan in plans.items():
                q, _, age = self._read_aged(plan.joint_names)
                # where the arm should have been when measured, allowing the controller to have
                # started the trajectory up to START_LATENESS_S late (delivery on a loaded machine)
                track = min(
                    float(np.max(np.abs(q - plan.reference(t - age - lag))))
                    for lag in np.linspace(0.0, START_LATENESS_S, 6)
                )
                if t <= plan.duration_s and track > s.stall_tracking_error_rad:
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

    def _hold_all(self, plans: dict[str, cv.TrajectoryPlan], gplans: dict[str, cv.TrajectoryPlan]) -> None:
        """Brake every part in motion to rest (from the trajectory it follows when the joint
        states are stale: see `_stop_msg`)."""
        with self._pub_lock:
            if self._estop_reason is not None:
                return
            for name in plans:
                p = self.parts[name]
                self._stop_part(p, p.topic, p.joints)
            for name in gplans:
                p = self.parts[name]
                self._gripper_target.pop(name, None)
                if p.gripper_topic:
                    self._stop_part(p, p.gripper_topic, [p.g_joint])

    def _blocked(self, name: str, plan: cv.TrajectoryPlan, t: float, why: str) -> Outcome:
        latched = self.driver_check()
        if latched is not None:  # the driver stopped the arm: a latch, not a stall
            return Outcome("stopped", f"{latched}; the motion did not finish", t)
        p = self.parts[name]
        q, _ = self._read(p.joints)
        err = plan.positions[-1] - q
        bad = [p.joints[i] for i in np.flatnonzero(np.abs(err) >= self.settings.reach_tolerance_rad)]
        with self._pub_lock:
            if self._estop_reason is None:
                self._stop_part(p, p.topic, p.joints)  # to rest where it is
        detail = f"{name} {why}; joints short of target: {', '.join(bad)} (max {np.max(np.abs(err)):.3f} rad)"
        return Outcome("blocked", detail, t, bad)

    def advance(self, duration_s: float) -> None:
        """A real robot's clock runs by itself: nothing to do."""

    def set_frame_sink(self, sink: FrameSink | None, fps: float | None = None) -> None:
        """Frames of `video_camera` (resized like the model's images) go to `sink` at `fps` (default
        `video_fps`, the rate the mp4 is written at) while a motion runs and at each observation."""
        fps = fps or self.video_fps
        self._sink = sink
        self._sink_period_s = 1.0 / fps if fps > 0 else 0.1
        self._sink_due = 0.0
        self._sink_frame = None

    # -- the operator (seam 2) ----------------------------------------------------------
    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        """On a robot without a simulator's success check, the operator judges an episode that
        reached the end of a task attempt (the model's `done`, the turn limit: JUDGED_ENDINGS), through
        std_srvs/SetBool on `operator_service` or the terminal. Stops, refusals and failures of the
        loop (policy errors, invalid replies, the context budget) are not asked about: None, the
        loop's failure stands. No answer = None."""
        from pear_agent.episode import JUDGED_ENDINGS

        self.judged = True
        if self.settings.task_status_topic or end_reason not in JUDGED_ENDINGS:
            return None
        answer, who = self.operator.ask(
            f"episode ended ({end_reason}: {detail}) - success?", self.settings.operator_timeout_s, "success"
        )
        if self._estop_reason is not None:  # stopped while (or before) the operator was asked: no verdict
            answer, who = None, f"not asked any more: {self._estop_reason}"
        self.operator_verdict = {"success": answer, "by": who, "end_reason": end_reason}
        return answer

    def stop(self) -> None:
        self.emergency_stop("stop() called")

    def close(self) -> None:
        pass
