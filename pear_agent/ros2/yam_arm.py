"""The I2RT arm behind the YAM driver node: its description, making the i2rt robot (hardware or
I2RT's sim), following a trajectory, and telling a faulted robot by its motor feedback."""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from pear_agent.robot.loader import load_robot
from pear_agent.ros2.yam_physics import make_physics_yam
from pear_agent.ros2.yam_trajectory import (
    JointGroup,
    Spline,
    parse_trajectory,
    stop_spline,
)


class StartupError(RuntimeError):
    """The driver cannot start (configuration, missing library, no CAN device): one line, exit 2."""


class RobotFault(RuntimeError):
    """The robot failed while running: stop commanding, report, exit 1."""


class ShutdownRequest:
    """SIGINT or SIGTERM, noted (not raised): the driver's main loop sees it and shuts down in
    order, with the rclpy context still up so every step can be logged."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal_name = ""

    def handler(self, signum: int, frame: Any) -> None:
        if self.event.is_set():  # a second one: the orderly shutdown is stuck (e.g. in i2rt's start-up)
            raise KeyboardInterrupt
        self.signal_name = signal.Signals(signum).name
        self.event.set()

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self.handler)

    def is_set(self) -> bool:
        return self.event.is_set()


@dataclass
class ArmSpec:
    """What the driver needs of the robot YAML for one arm."""

    part: str
    arm: JointGroup
    gripper: JointGroup | None
    gripper_joints: list[str]
    """all finger joints published on /joint_states (the first is the controller's)"""
    gripper_closed: float
    gripper_open: float

    def gripper_to_i2rt(self, q: float) -> float:
        """YAML joint units -> i2rt's 0 (closed) .. 1 (open)."""
        return float(np.clip((q - self.gripper_closed) / (self.gripper_open - self.gripper_closed), 0.0, 1.0))

    def gripper_from_i2rt(self, u: float) -> float:
        return self.gripper_closed + float(u) * (self.gripper_open - self.gripper_closed)


def arm_spec(robot_name: str, part_name: str, vmax_override: float, gripper_vmax: float) -> ArmSpec:
    from pear_agent.robot.kinematics import Kinematics  # heavy: pinocchio

    robot = load_robot(robot_name)
    if part_name not in robot.parts:
        raise StartupError(f"robot {robot.name} has no part {part_name!r} (parts: {', '.join(robot.parts)})")
    part = robot.parts[part_name]
    if part.controller is None:
        raise StartupError(
            f"robot {robot.name}: part {part_name} has no `controller` (trajectory controller)"
        )
    if len(part.joints) != 6:
        raise StartupError(f"{part_name}: a YAM arm has 6 joints, the YAML lists {len(part.joints)}")
    lower, upper = Kinematics(robot).joint_limits(part_name)
    vmax = vmax_override if vmax_override > 0 else part.limits.joint_velocity_rad_s
    arm = JointGroup(part.controller, list(part.joints), lower, upper, vmax)
    g = part.gripper
    if g is None or not g.controller:
        return ArmSpec(part_name, arm, None, [], 0.0, 1.0)
    lo, hi = min(g.closed_joint_pos, g.open_joint_pos), max(g.closed_joint_pos, g.open_joint_pos)
    grip = JointGroup(g.controller, [g.joints[0]], lo, hi, gripper_vmax)
    return ArmSpec(part_name, arm, grip, list(g.joints), g.closed_joint_pos, g.open_joint_pos)


def make_i2rt_robot(channel: str, arm_type: str, gripper_type: str, sim: bool, zero_gravity: bool) -> Any:
    """I2RT's robot (CAN) or its MuJoCo SimRobot; a StartupError naming the channel if it cannot open."""
    try:
        from i2rt.robots.get_robot import get_yam_robot  # optional: i2rt
        from i2rt.robots.utils import ArmType, GripperType  # optional: i2rt
    except ImportError as exc:
        raise StartupError(
            f"the i2rt driver's dependencies are missing ({exc}); install them: pip install -e '.[yam]'"
        ) from None
    try:
        arm_t = ArmType.from_string_name(arm_type)
        grip_t = GripperType.from_string_name(gripper_type)
    except Exception as exc:
        raise StartupError(f"arm_type {arm_type!r} / gripper_type {gripper_type!r}: {exc}") from None
    try:
        return get_yam_robot(
            channel=channel, arm_type=arm_t, gripper_type=grip_t, zero_gravity_mode=zero_gravity, sim=sim
        )
    except Exception as exc:
        what = "I2RT's SimRobot" if sim else f"the robot on CAN channel {channel}"
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise StartupError(f"cannot start {what}: {text}") from None


def physics_factory(robot_name: str, part: str) -> Any:
    """A robot factory for `sim_physics`: I2RT's MotorChainRobot on the physics chain, starting at
    the part's home pose from the robot YAML."""

    def make(channel: str, arm_type: str, gripper_type: str, sim: bool, zero_gravity: bool) -> Any:
        home = np.array(load_robot(robot_name).parts[part].home.joints_rad, float)
        try:
            return make_physics_yam(home, zero_gravity, arm_type, gripper_type)
        except Exception as exc:
            raise StartupError(f"cannot start the physics YAM: {type(exc).__name__}: {exc}") from None

    return make


class _Follower:
    """The reference of one trajectory topic's joints: holding, following a spline, or stopping."""

    def __init__(self, group: JointGroup, q0: np.ndarray) -> None:
        self.group = group
        self.hold = np.asarray(q0, float).copy()
        self.spline: Spline | None = None
        self.start_s = 0.0
        self.stopping = False
        self.last_msg_s = time.monotonic()
        self.accepted = 0
        self.rejected = 0
        self.last_accepted_id = ""
        self.last_rejected_id = ""
        """`trajectory_identity` of the last trajectory taken and rejected ('' none yet): the
        agent confirms its stop by these, not by the counts, which may rise for an earlier message"""

    def reference(self, now_s: float) -> tuple[np.ndarray, np.ndarray]:
        zero = np.zeros(len(self.hold))
        if self.spline is None:
            return self.hold.copy(), zero
        t = now_s - self.start_s
        if t < 0:
            return self.spline.positions[0].copy(), zero
        if t >= self.spline.duration_s:
            self.hold = self.spline.final
            self.spline, self.stopping = None, False
            return self.hold.copy(), zero
        return self.spline.sample(t)

    @property
    def moving(self) -> bool:
        return self.spline is not None

    def accept(
        self, msg: Any, now_s: float, lateness_s: float, max_lateness_s: float, measured: np.ndarray | None
    ) -> Spline:
        """Like the stock JTC (closed loop): the new trajectory starts from the measured position;
        its start velocity is the commanded one (the motors' is noisy, SimRobot's reads 0)."""
        q, v = self.reference(now_s)
        if measured is not None:
            q = np.asarray(measured, float)
        v = np.clip(v, -self.group.vmax, self.group.vmax)
        spline = parse_trajectory(msg, self.group, q, v, lateness_s, max_lateness_s)
        self.spline, self.stopping = spline, False
        self.start_s = now_s + max(0.0, -lateness_s)
        self.accepted += 1
        return spline

    def stop(self, now_s: float, decel: float, jerk: float, dt_s: float) -> None:
        q, v = self.reference(now_s)
        ramp = stop_spline(q, v, self.group.vmax, decel, jerk, dt_s)
        if len(ramp.times_s) == 1:
            self.hold, self.spline = ramp.final, None
        else:
            self.spline, self.start_s, self.stopping = ramp, now_s, True

    def set_hold(self, q: np.ndarray) -> None:
        self.hold, self.spline, self.stopping = np.asarray(q, float).copy(), None, False


class FeedbackWatch:
    """The age of the motors' own feedback. i2rt's DM motor chain runs a CAN thread that replaces
    `motor_chain.state` (the feedback frames) with a new list on every bus cycle; its
    `read_states()`, and so `MotorChainRobot._joint_state.timestamp`, stamps whenever it is
    called, from whatever feedback is cached. So a stalled CAN thread (a bus that stops answering
    while `running` stays True) shows only here: the frames stop being replaced."""

    def __init__(self) -> None:
        self._frames: Any = None
        self._seen_mono = time.monotonic()
        self.seen_wall: float | None = None
        """system time the current feedback frames were first seen (the joint states' stamp)"""

    def age_s(self, robot: Any) -> float | None:
        """Seconds since the feedback frames last changed; None where the robot has no motor
        chain (I2RT's SimRobot)."""
        chain = getattr(robot, "motor_chain", None)
        if chain is None or not hasattr(chain, "state"):
            return None
        frames = chain.state
        if frames is not self._frames:
            self._frames, self._seen_mono, self.seen_wall = frames, time.monotonic(), time.time()
        return time.monotonic() - self._seen_mono


def robot_fault(robot: Any, fault_timeout_s: float, watch: FeedbackWatch | None = None) -> str | None:
    """Why i2rt's real robot is no longer under control (its threads stopped, its motors' feedback
    stopped changing), or None. SimRobot has none of these attributes."""
    thread = getattr(robot, "_server_thread", None)
    if thread is not None and not thread.is_alive():
        return "i2rt's robot control thread stopped (motor error or joint limit; see the log above)"
    chain = getattr(robot, "motor_chain", None)
    if chain is not None and getattr(chain, "running", True) is False:
        return "i2rt's motor chain stopped running"
    age = watch.age_s(robot) if watch is not None else None
    if age is not None and age > fault_timeout_s:
        return f"motor feedback (CAN) has not changed for {age:.2f} s (limit {fault_timeout_s:g} s)"
    return None
