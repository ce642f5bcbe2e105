"""One I2RT YAM arm (6 joints + gripper) behind stock joint_trajectory_controller topics.

Owns an i2rt robot (`i2rt.robots.get_robot.get_yam_robot`, over CAN, or I2RT's own MuJoCo `SimRobot`
with `sim: true`) and exposes the topic contract the agent speaks, for the arm named by `arm`
(a part of the robot YAML, e.g. `left_arm`):

- `/joint_states` (sensor_msgs/JointState): the arm's joints and both gripper finger joints, in the
  YAML's names and units, stamped, at `rate_hz`;
- `/<arm controller>/joint_trajectory` and `/<gripper controller>/joint_trajectory`
  (trajectory_msgs/JointTrajectory): validated like the stock controller, plus joint limits and the
  speed cap (see pear_agent.ros2.yam_trajectory); interpolated at `rate_hz` and streamed to i2rt's
  `command_joint_pos` (the gripper mapped from the YAML's joint units to i2rt's 0 = closed .. 1 = open);
- e-stop: `estop_topic` (std_msgs/Bool true) and the `~/estop` service ramp to rest, hold and latch
  (`~/release_estop` releases); status on `/diagnostics` and as JSON on `status_topic`.

At start it reads the arm where it is and holds there (i2rt's `zero_gravity_mode` off unless
`zero_gravity_mode: true`). With no trajectory it keeps holding. On a CAN or motor error it stops
commanding, publishes the reason, closes the robot and exits 1. On SIGINT or SIGTERM it brings the
arm to rest, holds, stops its control loop, calls i2rt's `close()` (torque off: on hardware the arm
then falls unless supported) and says each step in its log, then exits 0.

One process per arm: each arm is its own CAN bus and i2rt runs its control loop as Python threads,
so two arms in one process would share one interpreter lock between two 1 kHz motor loops; a fault
on one bus ends that arm's driver only (the agent then refuses on its stale joint states).

    python -m pear_agent.ros2.yam_driver_node --ros-args -r __node:=yam_left_driver \
        --params-file launch/config/yam_driver.yaml -p arm:=left_arm

Exit code: 0 on a clean shutdown, 1 on a robot fault, 2 on a configuration or start-up error.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pear_agent.robot.config import RobotConfigError
from pear_agent.ros2 import stack
from pear_agent.ros2.graph import declare_params, spin_in_background
from pear_agent.ros2.joint_velocity import ESTIMATED, PUBLISHED, VelocityEstimator
from pear_agent.ros2.yam_arm import (
    ArmSpec,
    FeedbackWatch,
    RobotFault,
    ShutdownRequest,
    StartupError,
    _Follower,
    arm_spec,
    make_i2rt_robot,
    physics_factory,
    robot_fault,
)
from pear_agent.ros2.yam_trajectory import (
    TrajectoryRejected,
    trajectory_identity,
)


class YamDriverSettings(BaseModel):
    """One YAM driver's ROS parameters (same names)."""

    model_config = ConfigDict(extra="forbid")

    robot: str = Field(stack.ROBOT, description="robot name in robots/ or a path to a robot YAML")
    arm: str = Field("left_arm", description="the robot YAML's part this driver moves")
    can_left: str = Field("can_follower_l", description="CAN interface of the left arm")
    can_right: str = Field("can_follower_r", description="CAN interface of the right arm")
    arm_type: str = Field("yam", description="I2RT's arm type")
    gripper_type: str = Field("linear_4310", description="I2RT's gripper type")
    sim: bool = Field(False, description="no hardware: I2RT's kinematic SimRobot")
    sim_physics: bool = Field(
        False,
        description="with sim: I2RT's MotorChainRobot over a physics stand-in for the CAN bus and motors "
        "(pear_agent.ros2.yam_physics) instead of the kinematic SimRobot",
    )
    zero_gravity_mode: bool = Field(
        False, description="I2RT's zero-gravity mode at start (gravity compensation only) instead of holding"
    )
    rate_hz: float = Field(100.0, description="control and joint-state rate")
    joint_states_topic: str = Field(stack.JOINT_STATES_TOPIC, description="joint states published here")
    estop_topic: str = Field(stack.ESTOP_TOPIC, description="std_msgs/Bool: true ramps to rest and latches")
    status_topic: str = Field("", description="JSON status ('' = /pear/driver/<arm>/status)")
    joint_velocity_max_rad_s: float = Field(
        0.0, description="speed cap (0 = the robot YAML's limits.joint_velocity_rad_s)"
    )
    gripper_velocity_max: float = Field(0.25, description="gripper speed cap (its units per second)")
    stop_deceleration_rad_s2: float = Field(20.0, description="an e-stop's ramp to rest: deceleration")
    stop_jerk_rad_s3: float = Field(400.0, description="an e-stop's ramp to rest: jerk")
    command_timeout_s: float = Field(
        0.0,
        description="0 = finish a trajectory even when no further message comes (the stock controller's "
        "behaviour); > 0 = ramp to rest and hold when no trajectory arrived for that long",
    )
    max_start_lateness_s: float = Field(
        0.1, description="a trajectory stamped more than this in the past is rejected"
    )
    fault_timeout_s: float = Field(
        0.25, description="motor feedback (CAN) unchanged for this long is a fault"
    )


PARAMS: dict[str, Any] = stack.parameter_defaults(YamDriverSettings)
"""ROS parameters and their defaults (`YamDriverSettings`)."""


class YamDriver:
    """The node's logic; `robot` is an i2rt Robot (command_joint_pos, get_observations, close)."""

    def __init__(self, node: Any, p: dict[str, Any], spec: ArmSpec, robot: Any, channel: str) -> None:
        from diagnostic_msgs.msg import DiagnosticArray  # optional: rclpy
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy  # optional: rclpy
        from sensor_msgs.msg import JointState  # optional: rclpy
        from std_msgs.msg import Bool, String  # optional: rclpy
        from std_srvs.srv import Trigger  # optional: rclpy
        from trajectory_msgs.msg import JointTrajectory  # optional: rclpy

        self.node, self.p, self.spec, self.robot, self.channel = node, p, spec, robot, channel
        self.log = node.get_logger()
        self.dt_s = 1.0 / p["rate_hz"]
        self._lock = threading.Lock()
        self._stop_loop = threading.Event()
        self.fault: str | None = None
        self.estop_reason: str | None = None
        self.estop_at: dict[str, Any] = {}
        """wall time and arm reference when the e-stop came (status, and the < 0.02 rad check)"""
        self.measured: np.ndarray | None = None
        self._velocity = VelocityEstimator()
        self.velocity_source = PUBLISHED
        """What /joint_states carries as velocity: the motors' (`published`) or, where i2rt's
        feedback has none (or not finite ones), `estimated` from the read positions' stamps."""
        """the last positions read (7: arm + gripper in YAML units)"""
        self.last_rejection = ""
        self.floating = bool(p["zero_gravity_mode"])
        self.feedback = FeedbackWatch()
        try:
            q = self._read()[0]
        except Exception as exc:
            raise RobotFault(f"cannot read the arm's joints at start: {type(exc).__name__}: {exc}") from None
        self.arm = _Follower(spec.arm, q[:6])
        self.grip = _Follower(spec.gripper, q[6:7]) if spec.gripper is not None else None
        self._JointState, self._String, self._DiagnosticArray = JointState, String, DiagnosticArray
        self.js_pub = node.create_publisher(JointState, p["joint_states_topic"], 10)
        status_topic = p["status_topic"] or f"/pear/driver/{spec.part}/status"
        latched = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        self.status_pub = node.create_publisher(String, status_topic, latched)
        self.diag_pub = node.create_publisher(DiagnosticArray, "/diagnostics", 10)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for follower in (self.arm, self.grip):
            if follower is None:
                continue
            topic = f"/{follower.group.controller.strip('/')}/joint_trajectory"
            node.create_subscription(
                JointTrajectory, topic, lambda m, f=follower: self._on_trajectory(f, m), reliable
            )
        node.create_subscription(Bool, p["estop_topic"], self._on_estop_msg, reliable)
        node.create_service(Trigger, "~/estop", self._on_estop_srv)
        node.create_service(Trigger, "~/release_estop", self._on_release_srv)
        self._status_dirty = True
        self._thread = threading.Thread(target=self._loop, name="yam_driver_control", daemon=True)
        where = (
            ("I2RT MotorChainRobot on physics" if p["sim_physics"] else "I2RT SimRobot")
            if p["sim"]
            else f"CAN {channel}"
        )
        self.log.info(
            f"{spec.part} on {where}: holding at {np.round(q, 3).tolist()} "
            f"(speed cap {spec.arm.vmax[0]:g} rad/s, {p['rate_hz']:g} Hz)"
        )

    # -- robot I/O (control thread) -----------------------------------------------------
    def _read(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions, velocities) as 7-vectors: 6 arm joints (rad) + gripper in YAML units."""
        # get_observations, not get_joint_state: i2rt's MotorChainRobot (the CAN robot) does not
        # implement get_joint_state (it inherits the Robot protocol's stub, which returns None)
        obs = self.robot.get_observations()
        pos = np.append(np.asarray(obs["joint_pos"], float), np.asarray(obs.get("gripper_pos", [0.0]), float))
        arm_vel = obs.get("joint_vel")
        arm_vel = np.full(6, np.nan) if arm_vel is None else np.asarray(arm_vel, float)
        grip_vel = obs.get("gripper_vel")
        grip_vel = np.full(1, np.nan) if grip_vel is None else np.asarray(grip_vel, float)
        vel = np.append(arm_vel, grip_vel)
        if pos.shape[0] != 7 or not np.all(np.isfinite(pos)):
            raise RobotFault(f"the robot reported joint positions {pos.tolist()}")
        if vel.shape[0] != 7:
            vel = np.full(7, np.nan)
        span = self.spec.gripper_open - self.spec.gripper_closed
        pos[6] = self.spec.gripper_from_i2rt(pos[6])
        vel[6] = vel[6] * span
        return pos, vel

    def _command(self, arm_q: np.ndarray, grip_q: float | None, arm_v: np.ndarray | None = None) -> None:
        """Position, and while following a trajectory on I2RT's motor robot the reference velocity
        as the motors' MIT-mode velocity target (`command_joint_state`): without it their kd
        brakes every motion and the arm lags kd x speed / kp behind (75 mrad at 1.2 rad/s on a YAM
        shoulder). Stops and holds send positions only: then that kd damps the arm to rest."""
        cmd = np.empty(7)
        cmd[:6] = arm_q
        cmd[6] = self.spec.gripper_to_i2rt(grip_q) if grip_q is not None else 0.0
        n = self.robot.num_dofs() if hasattr(self.robot, "num_dofs") else 7
        if arm_v is not None and hasattr(self.robot, "motor_chain"):
            vel = np.zeros(7)
            vel[:6] = arm_v
            self.robot.command_joint_state({"pos": cmd[:n].copy(), "vel": vel[:n]})
        else:
            self.robot.command_joint_pos(cmd[:n].copy())

    def _tick(self) -> None:
        now, wall = time.monotonic(), time.time()
        with self._lock:
            timeout = self.p["command_timeout_s"]
            for f in (self.arm, self.grip):
                if f is None or not f.moving or f.stopping or timeout <= 0:
                    continue
                if now - f.last_msg_s > timeout:
                    self.log.warning(
                        f"{f.group.controller}: no trajectory for {now - f.last_msg_s:.1f} s "
                        f"(command_timeout_s {timeout:g}): stopping and holding"
                    )
                    self._stop_follower(f, now)
            arm_q, arm_v = self.arm.reference(now)
            if self.arm.stopping or not self.arm.moving:
                arm_v = None  # braking and holding: position only, the motors' kd damps the stop
            grip_q = self.grip.reference(now)[0][0] if self.grip is not None else None
            floating = self.floating
        if not floating:
            self._command(arm_q, grip_q, arm_v)
        why = robot_fault(self.robot, self.p["fault_timeout_s"], self.feedback)  # SimRobot: never
        if why:
            raise RobotFault(why)
        pos, vel, read_s = self._read_consistent()
        stamp_s = self._stamp_s(wall, read_s)
        vel = self._fill_velocity(pos, vel, stamp_s)
        with self._lock:
            self.measured = pos.copy()
        if floating:
            with self._lock:
                self.arm.set_hold(pos[:6])
                if self.grip is not None:
                    self.grip.set_hold(pos[6:7])
        self._publish_joints(pos, vel, stamp_s)

    def _fill_velocity(self, pos: np.ndarray, vel: np.ndarray, stamp_s: float) -> np.ndarray:
        """Velocities where i2rt's feedback has none or non-finite ones: the mean over the last
        stamped positions, so the agent never reads a moving arm as at rest; 0 before
        two positions are known (the arm holds at start)."""
        missing = ~np.isfinite(vel)
        if not np.any(missing):
            if self.velocity_source != PUBLISHED:
                self.velocity_source, self._status_dirty = PUBLISHED, True
            return vel
        out = vel.copy()
        for i in np.flatnonzero(missing):
            self._velocity.add(str(i), stamp_s, float(pos[i]))
            est = self._velocity.estimate(str(i))
            out[i] = est.velocity if est is not None else 0.0
        if self.velocity_source != ESTIMATED:
            self.velocity_source, self._status_dirty = ESTIMATED, True
            self.log.warning(
                f"{self.spec.part}: the robot's feedback has no velocity for joints "
                f"{np.flatnonzero(missing).tolist()}: publishing velocities estimated from the positions"
            )
        return out

    def _read_timestamp(self) -> float | None:
        read = getattr(getattr(self.robot, "_joint_state", None), "timestamp", None)
        return read if isinstance(read, float) and read > 1e9 else None

    def _read_consistent(self) -> tuple[np.ndarray, np.ndarray, float | None]:
        """Positions and velocities with the time I2RT read them: its loop replaces its joint
        state concurrently, so read until the timestamp is the same before and after."""
        for _ in range(3):
            before = self._read_timestamp()
            pos, vel = self._read()
            after = self._read_timestamp()
            if before == after:
                break
        return pos, vel, after

    def _stamp_s(self, tick_wall_s: float, read_s: float | None = None) -> float:
        """When the published state was true. I2RT stamps its joint state when its loop read the
        cached feedback (`_joint_state.timestamp`): the positions belong to that read, and the
        feedback is no newer. Its frames unchanged since an earlier time make it that old: the
        stamp is the earlier of the two, so a stalled CAN thread shows as an aging state. On
        SimRobot, which has no motor chain, this tick's time."""
        seen = self.feedback.seen_wall
        if seen is None:
            return tick_wall_s
        return min(seen, read_s) if read_s is not None else seen

    def _publish_joints(self, pos: np.ndarray, vel: np.ndarray, stamp_s: float) -> None:
        msg = self._JointState()
        ns = round(stamp_s * 1e9)
        msg.header.stamp.sec, msg.header.stamp.nanosec = ns // 1_000_000_000, ns % 1_000_000_000
        names = list(self.spec.arm.joints) + self.spec.gripper_joints
        msg.name = names
        g = [float(pos[6])] * len(self.spec.gripper_joints)
        gv = [float(vel[6])] * len(self.spec.gripper_joints)
        msg.position = [float(x) for x in pos[:6]] + g
        msg.velocity = [float(x) for x in vel[:6]] + gv
        self.js_pub.publish(msg)

    def _loop(self) -> None:
        next_s = time.monotonic()
        ticks = 0
        while not self._stop_loop.is_set():
            try:
                self._tick()
            except Exception as exc:
                if self._stop_loop.is_set() or not self.node.context.ok():
                    return  # shutting down: the publishers are gone, not the robot
                reason = str(exc) if isinstance(exc, RobotFault) else f"{type(exc).__name__}: {exc}"
                self.fault = " ".join(reason.split())
                self.log.error(f"{self.spec.part}: robot fault, commanding stopped: {self.fault}")
                self._publish_status()
                return
            ticks += 1
            if self._status_dirty or ticks % max(1, int(self.p["rate_hz"])) == 0:
                self._publish_status()
            next_s += self.dt_s
            delay = next_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -5 * self.dt_s:
                next_s = time.monotonic()  # fell behind (a stall): do not burst to catch up

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop_loop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def come_to_rest(self, timeout_s: float = 1.0) -> np.ndarray:
        """Ramp every moving reference to rest (the e-stop's ramp, without latching) and wait until
        the control loop holds there; the arm's held reference."""
        now = time.monotonic()
        with self._lock:
            for f in (self.arm, self.grip):
                if f is not None and f.moving and not f.stopping and not self.floating:
                    self._stop_follower(f, now)
        deadline = now + timeout_s
        while time.monotonic() < deadline and self._thread.is_alive():
            with self._lock:
                moving = self.arm.moving or (self.grip is not None and self.grip.moving)
            if not moving:
                break
            time.sleep(0.01)
        with self._lock:
            return self.arm.reference(time.monotonic())[0]

    # -- callbacks (executor thread) ----------------------------------------------------
    def _on_trajectory(self, follower: _Follower, msg: Any) -> None:
        now = time.monotonic()
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        lateness = 0.0
        if stamp_s != 0.0:
            lateness = self.node.get_clock().now().nanoseconds * 1e-9 - stamp_s
        ctrl = follower.group.controller
        ident = trajectory_identity(msg)
        with self._lock:
            follower.last_msg_s = now
            try:
                if self.fault is not None:
                    raise TrajectoryRejected(f"robot fault ({self.fault})")
                if self.estop_reason is not None:
                    raise TrajectoryRejected(
                        f"e-stop latched ({self.estop_reason}); call ~/release_estop to command again"
                    )
                if self.floating:
                    q, _ = self._read()
                    self.arm.set_hold(q[:6])
                    if self.grip is not None:
                        self.grip.set_hold(q[6:7])
                measured = None
                if self.measured is not None:
                    measured = self.measured[:6] if follower is self.arm else self.measured[6:7]
                spline = follower.accept(msg, now, lateness, self.p["max_start_lateness_s"], measured)
                follower.last_accepted_id = ident
                self.floating = False
            except TrajectoryRejected as exc:
                follower.rejected += 1
                follower.last_rejected_id = ident
                self.last_rejection = f"{ctrl}: {exc}"
                self._status_dirty = True
                self.log.error(f"{ctrl}: rejected trajectory: {exc}")
                return
        self._status_dirty = True
        self.log.info(
            f"{ctrl}: accepted trajectory #{follower.accepted}: {len(msg.points)} point(s), "
            f"{spline.duration_s:.2f} s ({spline.kind})"
        )

    def _stop_follower(self, f: _Follower, now: float) -> None:
        f.stop(now, self.p["stop_deceleration_rad_s2"], self.p["stop_jerk_rad_s3"], self.dt_s)

    def emergency_stop(self, reason: str) -> bool:
        """Ramp to rest, hold, latch. False if it was latched already."""
        now = time.monotonic()
        with self._lock:
            if self.estop_reason is not None:
                return False
            self.estop_reason = reason
            q_arm, _ = self.arm.reference(now)
            self.estop_at = {
                "time_s": time.time(),
                "positions": dict(zip(self.spec.arm.joints, q_arm.tolist(), strict=True)),
            }
            if self.floating:  # nothing commanded yet: hold where the arm is
                q, _ = self._read()
                self.arm.set_hold(q[:6])
                if self.grip is not None:
                    self.grip.set_hold(q[6:7])
                self.floating = False
            for f in (self.arm, self.grip):
                if f is not None:
                    self._stop_follower(f, now)
            self._status_dirty = True
        self.log.warning(f"{self.spec.part}: {reason}: stopping and holding; latched")
        return True

    def _on_estop_msg(self, msg: Any) -> None:
        if msg.data:
            self.emergency_stop(f"e-stop on {self.p['estop_topic']}")

    def _on_estop_srv(self, request: Any, response: Any) -> Any:
        fresh = self.emergency_stop("e-stop through the ~/estop service")
        response.success = True
        response.message = (
            "stopped and holding; latched" if fresh else f"already latched: {self.estop_reason}"
        )
        return response

    def _on_release_srv(self, request: Any, response: Any) -> Any:
        with self._lock:
            was = self.estop_reason
            self.estop_reason, self.estop_at = None, {}
            self._status_dirty = True
        response.success = was is not None
        response.message = f"released ({was}); holding" if was else "no e-stop was latched"
        if was:
            self.log.warning(f"{self.spec.part}: e-stop released; holding, accepting trajectories again")
        return response

    # -- status -------------------------------------------------------------------------
    def state(self) -> str:
        if self.fault is not None:
            return "fault"
        if self.estop_reason is not None:
            return "estop"
        if self.floating:
            return "floating"
        moving = self.arm.moving or (self.grip is not None and self.grip.moving)
        return "moving" if moving else "holding"

    def status(self) -> dict[str, Any]:
        """The JSON status; `last_accepted_id` / `last_rejected_id` per controller are the
        `trajectory_identity` of its last trajectory taken / rejected, which the agent computes
        from what it sent to confirm a stop by (the counts may rise for an earlier message whose
        status had not reached it yet)."""
        followers = [f for f in (self.arm, self.grip) if f is not None]
        with self._lock:
            return {
                "arm": self.spec.part,
                "node": self.node.get_fully_qualified_name(),
                "state": self.state(),
                "sim": bool(self.p["sim"]),
                "channel": self.channel,
                "fault": self.fault or "",
                "estop": self.estop_reason or "",
                "estop_at": self.estop_at,
                "last_rejection": self.last_rejection,
                "accepted": self.arm.accepted + (self.grip.accepted if self.grip else 0),
                "rejected": self.arm.rejected + (self.grip.rejected if self.grip else 0),
                "last_accepted_id": {f.group.controller: f.last_accepted_id for f in followers},
                "last_rejected_id": {f.group.controller: f.last_rejected_id for f in followers},
                "velocity_source": self.velocity_source,
            }

    def _publish_status(self) -> None:
        from diagnostic_msgs.msg import DiagnosticStatus, KeyValue  # optional: rclpy

        self._status_dirty = False
        st = self.status()
        self.status_pub.publish(self._String(data=json.dumps(st)))
        level = {"fault": DiagnosticStatus.ERROR, "estop": DiagnosticStatus.WARN}.get(
            st["state"], DiagnosticStatus.OK
        )
        diag = DiagnosticStatus(
            level=level,
            name=f"yam_driver: {st['arm']}",
            message=st["fault"] or st["estop"] or st["state"],
            hardware_id="i2rt SimRobot" if st["sim"] else st["channel"],
            values=[KeyValue(key=k, value=str(v)) for k, v in st.items()],
        )
        arr = self._DiagnosticArray()
        arr.header.stamp = self.node.get_clock().now().to_msg()
        arr.status = [diag]
        self.diag_pub.publish(arr)


def run(
    node: Any, p: dict[str, Any], robot_factory: Any = None, shutdown: ShutdownRequest | None = None
) -> int:
    """Start the robot, drive it until shutdown or a fault; close it on every path. `robot_factory`
    (channel, arm_type, gripper_type, sim, zero_gravity) -> robot; default I2RT's. `shutdown`: the
    signal that ends a clean run (else the rclpy context's end)."""
    if p["rate_hz"] <= 0:
        raise StartupError(f"parameter rate_hz must be > 0, got {p['rate_hz']}")
    spec = arm_spec(p["robot"], p["arm"], p["joint_velocity_max_rad_s"], p["gripper_velocity_max"])
    side = "left" if "left" in spec.part else "right" if "right" in spec.part else ""
    if not side:
        raise StartupError(f"arm {spec.part!r}: cannot tell which CAN channel (can_left / can_right) is its")
    channel = p[f"can_{side}"]
    factory = robot_factory or make_i2rt_robot
    if robot_factory is None and p["sim"] and p["sim_physics"]:
        factory = physics_factory(p["robot"], spec.part)
    robot = factory(channel, p["arm_type"], p["gripper_type"], p["sim"], p["zero_gravity_mode"])
    log = node.get_logger()
    driver: YamDriver | None = None
    why = "the driver could not start"
    try:
        driver = YamDriver(node, p, spec, robot, channel)
        driver.start()
        while node.context.ok() and driver.fault is None and driver._thread.is_alive():
            if shutdown is not None and shutdown.is_set():
                break
            time.sleep(0.05)
        if driver.fault is not None:
            why = "robot fault"
            time.sleep(0.3)  # let the fault status reach subscribers
            return 1
        why = shutdown.signal_name if shutdown is not None and shutdown.is_set() else "shutdown"
        if driver._thread.is_alive():
            held = driver.come_to_rest()
            log.info(
                f"{spec.part}: {why}: at rest, holding at {np.round(held, 3).tolist()} (hold sent); "
                "stopping the control loop"
            )
        return 0
    finally:
        if driver is not None:
            driver.stop()
        _close(robot, spec.part, bool(p["sim"]), why, log)


def _close(robot: Any, part: str, sim: bool, why: str, log: Any) -> None:
    """i2rt's close() on every exit path, said before and after: on hardware it turns the motors'
    torque off and the arm falls unless it is supported."""
    what = "I2RT SimRobot" if sim else "the motors' torque goes off: the arm falls unless it is supported"
    _log_safely(log.warning, f"{part}: {why}: calling i2rt close() ({what})")
    try:
        robot.close()
    except Exception as exc:
        print(f"yam_driver_node: warning: {part}: robot close() failed: {exc}", file=sys.stderr, flush=True)
        return
    done = "SimRobot stopped" if sim else "torque off, the arm is no longer held"
    _log_safely(log.warning, f"{part}: close() done: {done}")


def _log_safely(say: Any, text: str) -> None:
    """The node's logger, or stderr when rclpy's logging is gone (interpreter exit)."""
    try:
        say(text)
    except Exception:
        print(f"yam_driver_node: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    import rclpy  # optional: rclpy
    from rclpy.signals import SignalHandlerOptions  # optional: rclpy

    # SIGINT / SIGTERM are noted, not raised: the arm is brought to rest and closed, in order, while
    # the node can still log; rclpy's own handlers would end the context first
    rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
    request = ShutdownRequest()
    request.install()
    node = rclpy.create_node("yam_driver")
    shutdown = spin_in_background(node)
    code = 2
    arm = "?"
    try:
        params = declare_params(node, PARAMS, stack.parameter_descriptions(YamDriverSettings))
        arm = params["arm"]
        code = run(node, params, shutdown=request)
    except (StartupError, RobotConfigError, ValueError) as exc:
        print(f"yam_driver_node: error: {arm}: {exc}", file=sys.stderr, flush=True)
    except RobotFault as exc:
        print(f"yam_driver_node: error: {arm}: robot fault: {exc}", file=sys.stderr, flush=True)
        code = 1
    except KeyboardInterrupt:
        code = 0
    finally:
        shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
