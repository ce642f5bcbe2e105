"""A MuJoCo robot behind the topics a ros2_control stack offers, so the agent runs with no hardware.

Publishes `/joint_states` (every arm and finger joint, position + velocity), one image topic per
camera (sensor_msgs/Image rgb8, or CompressedImage JPEG where the topic ends in /compressed), and
follows trajectory_msgs/JointTrajectory on `/<controller>/joint_trajectory` like ros2_controllers'
joint_trajectory_controller: it rejects what the JTC rejects (an empty trajectory, a partial or
unknown joint set, times not increasing, a non-zero final velocity, ...: see
`conversions.jtc_rejection`) and keeps its current motion then; a valid trajectory replaces the
active one, starting from the measured position AND velocity (the JTC in closed loop with a velocity
state interface), interpolated like the JTC's splines (linear with positions only, cubic with
velocities, quintic with accelerations), from its header stamp when it has one; the MuJoCo position
servos track that reference with their own lag; a one-point trajectory at the current pose holds.
It also publishes the task's status as JSON (success, privileged facts, object poses) on
`task_status_topic`: that is sim-only, for tests and the scripted expert.

    python -m pear_agent.ros2.sim_robot_node --ros-args --params-file sim.yaml
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from pear_agent.loop.registry import make_backend
from pear_agent.robot.config import RobotConfigError
from pear_agent.robot.loader import load_robot
from pear_agent.ros2 import stack
from pear_agent.ros2.graph import declare_params, is_compressed_topic, spin_in_background, trajectory_topic
from pear_agent.ros2.yam_trajectory import Spline


class SimRobotSettings(BaseModel):
    """The simulated robot's ROS parameters (same names)."""

    model_config = ConfigDict(extra="forbid")

    robot: str = Field(stack.ROBOT, description="robot name in robots/ or a path to a robot YAML")
    task: str = Field("bimanual_pickup", description="the MuJoCo task whose scene the robot stands in")
    seed: int = Field(0, description="the task's seed (its objects' start)")
    joint_states_topic: str = Field(stack.JOINT_STATES_TOPIC, description="joint states published here")
    joint_states_rate_hz: float = Field(50.0, description="joint states per second")
    publish_images: bool = Field(True, description="publish the robot YAML's cameras")
    image_rate_hz: float = Field(2.0, description="images per second per camera")
    task_status_topic: str = Field(
        "/pear/sim/task_status", description="the task's status as JSON (sim-only: success, privileged facts)"
    )
    task_status_rate_hz: float = Field(10.0, description="task status messages per second")
    realtime_factor: float = Field(1.0, description="simulated seconds per wall-clock second")


PARAMS: dict[str, Any] = stack.parameter_defaults(SimRobotSettings)
"""ROS parameters and their defaults (`SimRobotSettings`)."""


@dataclass
class _Active:
    joints: list[str]
    start_t: float
    """sim time of the spline's time 0"""
    spline: Any
    """pear_agent.ros2.yam_trajectory.Spline: the JTC's interpolation"""
    end_t: float

    def reference(self, t: float) -> np.ndarray:
        return self.spline.sample(t - self.start_t)[0]


def jtc_spline(
    q0: np.ndarray,
    v0: np.ndarray,
    times: np.ndarray,
    pos: np.ndarray,
    vel: np.ndarray | None,
    acc: np.ndarray | None,
    offset_s: float,
) -> tuple[Any, float]:
    """The reference joint_trajectory_controller follows: from the measured state (q0, v0) now
    through the points at `offset_s` + time_from_start (offset < 0: a stamp in the past), cubic
    where the points carry velocities (zero-filled at the start when the state lacks them), quintic
    with accelerations. A first point already past starts inside the trajectory, as the JTC
    does. Returns (spline, its time 0 relative to now)."""
    t = offset_s + times
    if t[0] > 0:
        kt = np.concatenate([[0.0], t])
        kp = np.vstack([q0[None, :], pos])
        kv = None if vel is None else np.vstack([v0[None, :], vel])
        ka = None if acc is None or kv is None else np.vstack([np.zeros((1, q0.size)), acc])
        return Spline(kt, kp, kv, ka), 0.0
    if len(t) == 1 or t[-1] <= 0:
        return Spline(np.array([0.0]), pos[-1:].copy()), 0.0
    return Spline(t - t[0], pos, vel, acc if vel is not None else None), float(t[0])


class SimRobot:
    """Physics in the caller's thread; ROS callbacks only queue messages."""

    def __init__(self, node: Any, params: dict[str, Any]) -> None:
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy  # optional: rclpy
        from sensor_msgs.msg import CompressedImage, Image, JointState  # optional: rclpy
        from std_msgs.msg import String  # optional: rclpy
        from trajectory_msgs.msg import JointTrajectory  # optional: rclpy

        self.node, self.p = node, params
        self.robot = load_robot(params["robot"])
        self.sim = make_backend(params["task"], self.robot, render=bool(params["publish_images"]))
        self.sim.reset(int(params["seed"]))
        self.m, self.d = self.sim.model, self.sim.data
        self._lock = threading.Lock()
        self._inbox: list[tuple[str, Any]] = []
        self._active: dict[str, _Active] = {}
        self._JointState, self._Image, self._CompressedImage, self._String = (
            JointState,
            Image,
            CompressedImage,
            String,
        )
        self.controllers: dict[str, tuple[str, list[str]]] = {}  # topic -> (part, joint names)
        reliable = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        for name, part in self.robot.parts.items():
            if part.controller:
                self.controllers[trajectory_topic(part.controller)] = (name, list(part.joints))
            if part.gripper is not None and part.gripper.controller:
                self.controllers[trajectory_topic(part.gripper.controller)] = (name, [part.gripper.joints[0]])
        for topic in self.controllers:
            node.create_subscription(
                JointTrajectory, topic, lambda msg, t=topic: self._queue(t, msg), reliable
            )
        self.js_pub = node.create_publisher(JointState, params["joint_states_topic"], reliable)
        self.js_names: list[str] = []
        self.js_qadr: list[int] = []
        self.js_dadr: list[int] = []
        for part in self.robot.parts.values():
            for j in list(part.joints) + (list(part.gripper.joints) if part.gripper else []):
                self.js_names.append(j)
                self.js_qadr.append(int(self.m.joint(j).qposadr[0]))
                self.js_dadr.append(int(self.m.joint(j).dofadr[0]))
        self.cam_pubs = {}
        if params["publish_images"]:
            for cam, c in self.robot.cameras.items():
                if c.topic and c.sim:
                    compressed = is_compressed_topic(c.topic)
                    msg_type = CompressedImage if compressed else Image
                    self.cam_pubs[cam] = (node.create_publisher(msg_type, c.topic, reliable), compressed)
        status_qos = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        self.status_pub = (
            node.create_publisher(String, params["task_status_topic"], status_qos)
            if params["task_status_topic"]
            else None
        )
        self.free_bodies = [
            self.m.body(int(self.m.jnt_bodyid[j])).name for j in range(self.m.njnt) if self.m.jnt_type[j] == 0
        ]

    def _queue(self, topic: str, msg: Any) -> None:
        with self._lock:
            self._inbox.append((topic, msg))

    # -- trajectories ---------------------------------------------------------------------
    def _apply_inbox(self) -> None:
        from pear_agent.ros2.conversions import jtc_rejection, trajectory_arrays  # heavy: cv2

        with self._lock:
            inbox, self._inbox = self._inbox, []
        for topic, msg in inbox:
            part_name, expected = self.controllers[topic]
            why = jtc_rejection(msg, expected, self.node.get_clock().now().nanoseconds * 1e-9)
            if why is not None:
                self.node.get_logger().error(f"{topic}: {why} (rejected, like joint_trajectory_controller)")
                continue
            names, times, pos, vel = trajectory_arrays(msg)
            order = [names.index(j) for j in expected]
            has_vel = all(len(p.velocities) for p in msg.points)
            has_acc = has_vel and all(len(p.accelerations) for p in msg.points)
            acc = np.array([list(p.accelerations) for p in msg.points], float)[:, order] if has_acc else None
            io = self.sim.parts[part_name]
            gripper = expected == [self.robot.parts[part_name].gripper.joints[0]] if io.gripper else False
            q0, v0 = self._measured(part_name, gripper)
            stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
            offset = 0.0
            if stamp > 0:
                factor = float(self.p["realtime_factor"])
                offset = (stamp - self.node.get_clock().now().nanoseconds * 1e-9) * factor
            spline, t0 = jtc_spline(
                q0, v0, times, pos[:, order], vel[:, order] if has_vel else None, acc, offset
            )
            now = float(self.d.time)
            self._active[topic] = _Active(expected, now + t0, spline, now + offset + float(times[-1]))

    def _measured(self, part: str, gripper: bool) -> tuple[np.ndarray, np.ndarray]:
        """Where a new trajectory starts: the measured position and velocity, as the JTC does in
        closed loop with a velocity state interface."""
        io = self.sim.parts[part]
        if gripper:
            return np.array([float(self.d.qpos[io.g_qadr[0]])]), np.array([float(self.d.qvel[io.g_dadr[0]])])
        dadr = [int(self.m.joint(j).dofadr[0]) for j in self.robot.parts[part].joints]
        return self.d.qpos[io.qadr].copy(), self.d.qvel[dadr].copy()

    def _set_gripper(self, part: str, position: float) -> None:
        io = self.sim.parts[part]
        g = io.gripper
        io.set_gripper(self.d, (position - g.closed_joint_pos) / (g.open_joint_pos - g.closed_joint_pos))

    def _track(self) -> None:
        t = float(self.d.time)
        for topic, act in list(self._active.items()):
            part_name, _ = self.controllers[topic]
            io = self.sim.parts[part_name]
            ref = act.reference(t)
            if io.gripper is not None and act.joints == [io.gripper.joints[0]]:
                self._set_gripper(part_name, float(ref[0]))
            else:
                self.d.ctrl[io.act] = ref
            if t > act.end_t + 1.0:
                del self._active[topic]

    # -- publishing -----------------------------------------------------------------------
    def snapshot_joints(self) -> None:
        """The state the joint-state thread publishes (copied after each physics step)."""
        snap = ([float(x) for x in self.d.qpos[self.js_qadr]], [float(x) for x in self.d.qvel[self.js_dadr]])
        with self._lock:
            self._snap = snap

    def publish_joint_states(self) -> None:
        with self._lock:
            snap = getattr(self, "_snap", None)
        if snap is None:
            return
        msg = self._JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(self.js_names)
        msg.position, msg.velocity = snap
        self.js_pub.publish(msg)

    def joint_state_thread(self, should_stop: Any) -> threading.Thread:
        """Joint states at their own rate, like joint_state_broadcaster, so rendering a camera
        image in the physics thread does not leave a gap in them."""
        period = 1.0 / float(self.p["joint_states_rate_hz"])

        def loop() -> None:
            due = time.monotonic()
            while not should_stop():
                self.publish_joint_states()
                due = max(due + period, time.monotonic())
                time.sleep(max(0.0, due - time.monotonic()))

        thread = threading.Thread(target=loop, daemon=True)
        thread.start()
        return thread

    def publish_images(self) -> None:
        from pear_agent.ros2.conversions import fill_compressed, fill_image  # heavy: cv2

        stamp = self.node.get_clock().now().to_msg()
        for cam, (pub, compressed) in self.cam_pubs.items():
            rgb = self.sim.render(cam)
            msg = self._CompressedImage() if compressed else self._Image()
            msg.header.stamp = stamp
            msg.header.frame_id = cam
            pub.publish(fill_compressed(msg, rgb) if compressed else fill_image(msg, rgb))

    def status(self) -> dict[str, Any]:
        task = self.sim._task
        objects = {
            b: [round(float(v), 5) for v in (*self.d.body(b).xpos, *self.d.body(b).xquat)]
            for b in self.free_bodies
        }
        return {
            "task": task.name,
            "instruction": task.instruction,
            "max_turns": task.max_turns,
            "seed": int(self.p["seed"]),
            "sim_time_s": round(float(self.d.time), 4),
            "success": bool(task.success(self.m, self.d)),
            "privileged": task.privileged(self.m, self.d),
            "objects": objects,
        }

    def publish_status(self) -> None:
        if self.status_pub is not None:
            self.status_pub.publish(self._String(data=json.dumps(self.status())))

    # -- the loop -------------------------------------------------------------------------
    def run(self, should_stop: Any) -> None:
        import mujoco  # heavy: mujoco

        p = self.p
        factor = float(p["realtime_factor"])
        substeps = self.sim.settings.control_substeps
        ctrl_dt = self.m.opt.timestep * substeps
        periods = {
            "img": 1.0 / float(p["image_rate_hz"]) if p["image_rate_hz"] > 0 else float("inf"),
            "status": 1.0 / float(p["task_status_rate_hz"]),
        }
        due = dict.fromkeys(periods, 0.0)
        wall0, sim0 = time.monotonic(), float(self.d.time)
        self.snapshot_joints()
        js_thread = self.joint_state_thread(should_stop)
        while not should_stop():
            now = time.monotonic()
            target = sim0 + (now - wall0) * factor
            if target - self.d.time > 0.25:  # fell behind (rendering, a busy machine): slow down
                wall0 += (target - self.d.time - 0.25) / factor
            n = 0
            while self.d.time < target and n < 25:
                self._apply_inbox()
                self._track()
                mujoco.mj_step(self.m, self.d, nstep=substeps)
                n += 1
            now = time.monotonic()
            if n:
                self.snapshot_joints()
            if now >= due["status"]:
                self.publish_status()
                due["status"] = now + periods["status"]
            if self.cam_pubs and now >= due["img"]:
                self.publish_images()
                due["img"] = now + periods["img"]
            if n == 0:
                time.sleep(min(ctrl_dt, 0.005))
        js_thread.join(timeout=1.0)


def main(argv: list[str] | None = None) -> int:
    import rclpy  # optional: rclpy

    rclpy.init(args=argv if argv is not None else sys.argv)
    node = rclpy.create_node("pear_sim_robot")
    try:
        params = declare_params(node, PARAMS, stack.parameter_descriptions(SimRobotSettings))
        robot = SimRobot(node, params)
    except (RobotConfigError, ValueError, KeyError) as exc:
        print(f"sim_robot_node: error: {exc}", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    shutdown = spin_in_background(node)
    node.get_logger().info(
        f"sim robot ready: {params['robot']} / {params['task']} / seed {params['seed']}; "
        f"controllers {sorted(robot.controllers)}"
    )
    try:
        robot.run(lambda: not rclpy.ok())
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
