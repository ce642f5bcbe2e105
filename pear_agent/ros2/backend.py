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

import threading
import time
from typing import Any

import numpy as np

from pear_agent.loop.episode import JUDGED_ENDINGS
from pear_agent.robot.backend import EpisodeAborted, FrameSink, Observation, Outcome, PartCommand, TaskInfo
from pear_agent.robot.config import RobotConfig
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.motion import SettleJudge
from pear_agent.ros2 import conversions as cv
from pear_agent.ros2 import joint_velocity as jv
from pear_agent.ros2.braking import Braking
from pear_agent.ros2.cameras import Cameras
from pear_agent.ros2.graph import (
    is_compressed_topic,
    json_object,
    spin_own_node,
)
from pear_agent.ros2.joint_states import JointStates
from pear_agent.ros2.modes import ArmModeSettings, ShadowAndStep, scaled
from pear_agent.ros2.operator import Operator
from pear_agent.ros2.settings import (
    START_LATENESS_S,
    RosSettings,
    _PartSpec,
)
from pear_agent.ros2.stack_check import StackCheck


class RosBackend(Braking, StackCheck, Cameras, ShadowAndStep, JointStates):
    """Backend over a live ROS 2 graph. `node` must be spun by the caller (in another thread).
    `modes`: free, shadow or step, and the speed scale (`pear_agent.ros2.modes`); `twin`: the
    simulated backend a shadow runs each action in (needs `set_joints` and `execute_chunk`)."""

    def __init__(
        self,
        robot: RobotConfig,
        node: Any,
        task: TaskInfo,
        settings: RosSettings | None = None,
        kinematics: Kinematics | None = None,
        modes: ArmModeSettings | None = None,
        twin: Any = None,
    ) -> None:
        import rclpy  # optional: rclpy

        # optional: rclpy
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import CompressedImage, Image, JointState  # optional: rclpy
        from std_msgs.msg import Bool, String  # optional: rclpy
        from std_srvs.srv import Trigger  # optional: rclpy
        from trajectory_msgs.msg import JointTrajectory  # optional: rclpy

        self.robot = robot
        self.task = task
        self.node = node
        self.settings = s = settings or RosSettings()
        self.kin = kin = kinematics or Kinematics(robot)
        self.modes = modes or ArmModeSettings()
        if self.modes.arm_mode == "shadow" and twin is None:
            raise ValueError("mode shadow needs a simulated twin to run the actions in")
        self.twin = twin
        self.mode_records: list[dict[str, Any]] = []
        """Every shadow and step record (also written to `log`): for tests."""
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
        self.stop_sources: dict[str, str] = {}
        """topic -> what its last stop braked from: jv.PUBLISHED, jv.ESTIMATED, jv.TRAJECTORY, or
        jv.HOLD (nothing known to brake from: a slow point where it is)"""
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
            compressed = is_compressed_topic(cam_topic)
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
        self.operator = Operator(node, s.operator_service, s.operator_terminal, s.operator_answer_topic)
        self.operator.abort = lambda: self._estop_reason

    # -- callbacks (executor thread) ----------------------------------------------------
    def _on_image(self, camera: str, msg: Any, compressed: bool) -> None:
        with self._lock:
            self._images[camera] = (msg, compressed, time.monotonic())
            self._decoded.pop(camera, None)

    def _on_status(self, msg: Any) -> None:
        status = json_object(msg)
        if status is None:  # not a JSON object: the simulator's task status always is one
            return
        with self._lock:
            self._status = status
            self._status_t = time.monotonic()

    def _on_driver(self, part: str, msg: Any) -> None:
        status = json_object(msg)
        if status is not None:
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

    # -- state --------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._status)

    def _arm_limits(self, p: _PartSpec) -> cv.MoveLimits:
        """What every arm move of part `p` is planned within (slowed by `speed_scale`; a stop never is)."""
        s = self.settings
        limits = cv.MoveLimits(
            p.vmax, s.joint_acceleration_rad_s2, s.joint_jerk_rad_s3, p.lower, p.upper, s.trajectory_dt_s
        )
        return scaled(limits, self.modes.speed_scale)

    # -- Backend protocol ---------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        """Check the stack, (optionally, after the operator agrees) drive home at the limits,
        then observe from fresh data. Raises EpisodeAborted (no policy call) when the stack is
        incomplete, the home move does not reach home, or an e-stop comes."""
        s = self.settings
        self._t0 = time.monotonic()
        if self._estop_reason is not None:
            raise EpisodeAborted("stopped", f"{self._estop_reason}; no further motion")
        if not self._stack_ok:
            why = self.check_stack()
            if why is not None:
                raise EpisodeAborted("refused", why)
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
                    raise EpisodeAborted("stopped", f"during the home move: {outcome.detail}")
                if outcome.status != "reached":
                    raise EpisodeAborted("refused", f"the home move ended {outcome.describe()}")
        self._t0 = time.monotonic()
        why = self.fresh_check(self._required_joints()) or self.camera_check()
        if why is not None:
            raise EpisodeAborted("refused", why)
        if s.task_status_topic:
            self._wait_status(2.0)
        obs = self.observe()
        if self._estop_reason is not None:
            raise EpisodeAborted("stopped", f"{self._estop_reason}; no further motion")
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

    def _to_msg(self, plan: cv.TrajectoryPlan) -> Any:
        from builtin_interfaces.msg import Duration  # optional: rclpy
        from trajectory_msgs.msg import JointTrajectoryPoint  # optional: rclpy

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

    def _prepare(
        self, commands: dict[str, PartCommand]
    ) -> tuple[Outcome | None, dict[str, cv.TrajectoryPlan], dict[str, cv.TrajectoryPlan], dict[str, float]]:
        """Check the state and plan every part's move from it, sending nothing: (why not, arm
        plans, gripper plans, the gripper targets they command)."""
        none: tuple[dict[str, cv.TrajectoryPlan], dict[str, cv.TrajectoryPlan], dict[str, float]]
        none = ({}, {}, {})
        if self._estop_reason is not None:
            return Outcome("stopped", f"{self._estop_reason}; no further motion"), *none
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
                return Outcome("refused", f"{why}; no command was sent"), *none
        why = self.driver_check()
        if why is not None:  # a latched driver rejects every trajectory: say why, not "stalled"
            return Outcome("stopped", f"{why}; no command was sent"), *none
        plans: dict[str, cv.TrajectoryPlan] = {}
        gplans: dict[str, cv.TrajectoryPlan] = {}
        targets: dict[str, float] = {}
        for name, cmd in commands.items():
            p = self.parts[name]
            if cmd.joints_rad is not None:
                q0, v0 = self._read(p.joints)
                target = np.asarray(cmd.joints_rad, float)
                plans[name] = cv.ruckig_plan(p.joints, q0, target, self._arm_limits(p), v0=v0)
            if cmd.gripper is not None and p.gripper is not None and p.gripper_topic:
                g0, gv0 = self._read([p.g_joint])
                target = float(np.clip(p.gripper_position(cmd.gripper), p.g_lo, p.g_hi))
                if abs(self._gripper_target.get(name, np.nan) - target) < 1e-9:
                    continue  # already commanded: a new trajectory would restart from the measured
                    # finger position (the JTC's rule) and loosen a grip on an object
                targets[name] = target
                fingers = self._gripper_limits(p)
                gplans[name] = cv.ruckig_plan([p.g_joint], g0, np.array([target]), fingers, v0=gv0)
        return None, plans, gplans, targets

    def _gripper_limits(self, p: _PartSpec) -> cv.MoveLimits:
        """What every gripper move of part `p` is planned within (slowed by `speed_scale`)."""
        vmax = p.gripper_vmax
        fingers = cv.MoveLimits(
            vmax, 10 * vmax, 100 * vmax, np.array([p.g_lo]), np.array([p.g_hi]), self.settings.trajectory_dt_s
        )
        return scaled(fingers, self.modes.speed_scale)

    def execute(self, commands: dict[str, PartCommand]) -> Outcome:
        refused, plans, gplans, targets = self._prepare(commands)
        if refused is not None:
            return refused
        if self.modes.arm_mode == "shadow":
            return self._shadow([commands], plans, gplans)[0]
        if self.modes.arm_mode == "step" and (plans or gplans):
            rejected = self._ask_step(plans, gplans)
            if rejected is not None:
                return rejected
            # the answer took a while: plan again from a fresh state (the arm at rest: the same move)
            refused, plans, gplans, targets = self._prepare(commands)
            if refused is not None:
                return refused
        start = time.monotonic()
        for name, gplan in gplans.items():
            self._gripper_target[name] = targets[name]
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
        """A chunk: consecutive arm steps as ONE multi-point trajectory per controller
        (`ruckig_chain`: through the waypoints without stopping, within the speed, acceleration and
        jerk limits), which the stock joint_trajectory_controller follows; a step that changes a
        gripper ends a path: the arm reaches it, then the gripper moves and settles. An e-stop
        mid-chunk brakes along the path as for any motion. (outcome, steps reached)."""
        if self._estop_reason is not None:
            return Outcome("stopped", f"{self._estop_reason}; no further motion"), 0
        if self.modes.arm_mode == "shadow":
            return self._shadow_chunk(steps)
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

    def _prepare_chain(
        self, names: list[str], arm: list[dict[str, PartCommand]]
    ) -> tuple[Outcome | None, dict[str, cv.TrajectoryPlan], dict[str, list[float]]]:
        """Check the state and plan one trajectory per part through the waypoints, sending
        nothing: (why not, the plans, when each passes its waypoints)."""
        needed = [j for n in names for j in self.parts[n].joints]
        why = self.fresh_check(needed)
        if why is not None:
            return Outcome("refused", f"{why}; no command was sent"), {}, {}
        why = self.driver_check()
        if why is not None:
            return Outcome("stopped", f"{why}; no command was sent"), {}, {}
        plans: dict[str, cv.TrajectoryPlan] = {}
        passed: dict[str, list[float]] = {}
        for name in names:
            p = self.parts[name]
            q0, v0 = self._read(p.joints)
            wps, prev = [], np.asarray(q0, float)
            for st in arm:
                prev = np.asarray(st[name].joints_rad, float) if name in st else prev
                wps.append(prev)
            plans[name], passed[name] = cv.ruckig_chain(p.joints, q0, wps, self._arm_limits(p), v0=v0)
        return None, plans, passed

    def _follow_chunk(self, arm: list[dict[str, PartCommand]]) -> tuple[Outcome, int]:
        """One multi-point trajectory per moving part through the steps' waypoints; (outcome, how
        many waypoints the plan had passed when it ended)."""
        names = [n for n in self.parts if any(n in st for st in arm)]
        refused, plans, passed = self._prepare_chain(names, arm)
        if refused is None and self.modes.arm_mode == "step":
            refused = self._ask_step(plans, {})
            if refused is None:  # plan again from a fresh state (at rest: the same path)
                refused, plans, passed = self._prepare_chain(names, arm)
        if refused is not None:
            return refused, 0
        start = time.monotonic()
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
                unheard = self._hold_all(plans, gplans)
                if unheard is not None:  # the driver kept its trajectory: never claim a stop
                    return Outcome("stopped", f"{why} during the motion; {unheard}", t)
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

    def _hold_all(
        self, plans: dict[str, cv.TrajectoryPlan], gplans: dict[str, cv.TrajectoryPlan]
    ) -> str | None:
        """Brake every part in motion to rest (from the trajectory it follows when the joint
        states are stale: see `_stop_msg`). None once every driver that reports what it takes has
        taken its stop, else what `_stops_heard` did instead."""
        sent: dict[str, list[str]] = {}
        with self._pub_lock:
            if self._estop_reason is not None:
                return None
            before = self._driver_counts()
            for name in plans:
                p = self.parts[name]
                if (ident := self._stop_part(p, p.topic, p.joints)) is not None:
                    sent.setdefault(name, []).append(ident)
            for name in gplans:
                p = self.parts[name]
                self._gripper_target.pop(name, None)
                ident = self._stop_part(p, p.gripper_topic, [p.g_joint]) if p.gripper_topic else None
                if ident is not None:
                    sent.setdefault(name, []).append(ident)
        return self._stops_heard(sent, before)

    def _blocked(self, name: str, plan: cv.TrajectoryPlan, t: float, why: str) -> Outcome:
        latched = self.driver_check()
        if latched is not None:  # the driver stopped the arm: a latch, not a stall
            return Outcome("stopped", f"{latched}; the motion did not finish", t)
        p = self.parts[name]
        q, _ = self._read(p.joints)
        err = plan.positions[-1] - q
        bad = [p.joints[i] for i in np.flatnonzero(np.abs(err) >= self.settings.reach_tolerance_rad)]
        sent: dict[str, list[str]] = {}
        with self._pub_lock:
            before = self._driver_counts()
            if self._estop_reason is None and (ident := self._stop_part(p, p.topic, p.joints)) is not None:
                sent[name] = [ident]  # to rest where it is
        detail = f"{name} {why}; joints short of target: {', '.join(bad)} (max {np.max(np.abs(err)):.3f} rad)"
        unheard = self._stops_heard(sent, before)
        if unheard is not None:  # the driver kept its trajectory: never claim a stop
            return Outcome("stopped", f"{detail}; {unheard}", t, bad)
        return Outcome("blocked", detail, t, bad)

    def advance(self, duration_s: float) -> None:
        """A real robot's clock runs by itself: nothing to do."""

    # -- the operator (seam 2) ----------------------------------------------------------
    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        """The operator judges an episode that reached the end of a task attempt (JUDGED_ENDINGS),
        through std_srvs/SetBool on `operator_service` or the terminal; stops, refusals and failures
        of the loop are not asked about (None: the loop's failure stands), nor is no answer."""
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
