"""Fixtures for the ROS 2 tests: an isolated DDS domain, node processes, and a probe node in the
test process that records what crosses the wire."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 120.0
"""How long a node process may take to come up and be discovered (its first joint states, its
subscriptions and services matched). Each wait ends at the event, so only a failing test waits it
out: on a 2-core machine loaded by other test runs, starting sim_robot_node took over 30 s."""
# one DDS domain per test session, discovery on this machine only: parallel runs do not cross-talk
os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 100)))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("MUJOCO_GL", "egl")
_DOMAINS = iter(range(int(os.environ["ROS_DOMAIN_ID"]), 10**6))


@pytest.fixture(autouse=True)
def _fresh_dds_domain() -> Iterator[None]:
    """A DDS domain of its own for every test: nodes of an earlier test (or their discovery
    records, which outlive a killed process for the lease time) never answer in this one."""
    saved = os.environ["ROS_DOMAIN_ID"]
    os.environ["ROS_DOMAIN_ID"] = str(1 + next(_DOMAINS) % 200)
    yield
    os.environ["ROS_DOMAIN_ID"] = saved


class NodeProcess:
    """`python -m <module> --ros-args --params-file <yaml>`; the environment is passed through
    unchanged (the ROS wheels' bootstrap needs its LD_LIBRARY_PATH)."""

    def __init__(
        self,
        module: str,
        node_name: str,
        params: dict[str, Any],
        workdir: Path,
        remap_name: bool = False,
        stop_timeout_s: float = 5.0,
    ) -> None:
        """`remap_name`: start the node under `node_name` (`-r __node:=...`), for several
        processes of one executable."""
        self.name, self.stop_timeout_s = node_name, stop_timeout_s
        self.params_file = workdir / f"{node_name}.yaml"
        self.params_file.write_text(yaml.safe_dump({node_name: {"ros__parameters": params}}))
        self.log_path = workdir / f"{node_name}.log"
        self._log = self.log_path.open("w")
        remap = ["-r", f"__node:={node_name}"] if remap_name else []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "--ros-args", *remap, "--params-file", str(self.params_file)],
            cwd=REPO,
            env=dict(os.environ),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.stop()
            tail = self.log()[-4000:]
            raise AssertionError(f"{self.name} did not finish in {timeout_s} s:\n{tail}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(2)  # SIGINT: rclpy shuts down cleanly
            try:
                self.proc.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator[Callable[[str, str, dict[str, Any]], NodeProcess]]:
    procs: list[NodeProcess] = []

    def start(module: str, node_name: str, params: dict[str, Any]) -> NodeProcess:
        p = NodeProcess(module, node_name, params, tmp_path)
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


LOADED = {"wait_for_fresh_state_s": 2.0}
"""On a loaded machine the stand-in's joint-state stream can pause for a few hundred ms (seen: 0.29 s
at a load of 30 on 2 cores): the agent then waits up to this long for a fresh state instead of
ending the episode `refused` (freshness has its own tests, test_safety.py and test_load.py; the
tests that use this ask something else)."""

TRUTH_TOPIC = "/jtc_double/true_joint_states"


class Probe:
    """A node in the test process: records trajectories, joint states and agent status."""

    TRAJ_TOPICS = (
        "/left_arm_controller/joint_trajectory",
        "/right_arm_controller/joint_trajectory",
        "/left_gripper_controller/joint_trajectory",
        "/right_gripper_controller/joint_trajectory",
    )

    def __init__(self) -> None:
        import rclpy
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger
        from trajectory_msgs.msg import JointTrajectory

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("pear_test_probe", context=self.context)
        self.lock = threading.Lock()
        self.trajectories: list[tuple[float, str, Any, dict[str, float] | None]] = []
        self.joint_states: list[tuple[float, dict[str, float]]] = []
        self.stamped: list[tuple[float, dict[str, float]]] = []
        """(header stamp, positions) of every joint state: for speeds and decelerations"""
        self.truth: list[tuple[float, dict[str, float]]] = []
        """(stamp, positions) of every state the JTC stand-in read, on TRUTH_TOPIC where its
        `truth_topic` is that: the arm's motion whatever the delivery of /joint_states"""
        self.truth_velocity: list[tuple[float, dict[str, float]]] = []
        """(stamp, velocities) of the same states: the servos' own velocities, not differences"""
        self.status: list[dict[str, Any]] = []
        self.sim_status: dict[str, Any] = {}
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        for topic in self.TRAJ_TOPICS:
            self.node.create_subscription(
                JointTrajectory, topic, lambda m, t=topic: self._on_traj(t, m), reliable
            )
        self.node.create_subscription(JointState, "/joint_states", self._on_js, 50)
        # deep enough for seconds of the stand-in's states: a probe kept off the CPU loses none
        deep = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, TRUTH_TOPIC, self._on_truth, deep)
        status_qos = QoSProfile(
            depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        self.node.create_subscription(String, "/pear/agent/status", self._on_status, status_qos)
        sim_qos = QoSProfile(
            depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        self.node.create_subscription(String, "/pear/sim/task_status", self._on_sim, sim_qos)
        self.js_pub = self.node.create_publisher(JointState, "/joint_states", reliable)
        self.estop_pub = self.node.create_publisher(Bool, "/pear/estop", reliable)
        self.instruction_pub = self.node.create_publisher(String, "/pear/instruction", 10)
        self.stop_client = self.node.create_client(Trigger, "/pear/stop")
        self._JointState, self._Bool, self._Trigger = JointState, Bool, Trigger
        self._shutdown_spin = self._spin()

    def _spin(self) -> Callable[[], None]:
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        stop = threading.Event()

        def spin() -> None:
            while not stop.is_set() and self.context.ok():
                executor.spin_once(timeout_sec=0.05)

        thread = threading.Thread(target=spin, daemon=True)
        thread.start()

        def shutdown() -> None:
            stop.set()
            thread.join(timeout=2)
            executor.shutdown(timeout_sec=1)

        return shutdown

    def _on_traj(self, topic: str, msg: Any) -> None:
        with self.lock:
            last = self.joint_states[-1][1] if self.joint_states else None
            self.trajectories.append((time.monotonic(), topic, msg, last))

    def _on_js(self, msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self.lock:
            self.joint_states.append((time.monotonic(), dict(zip(msg.name, msg.position, strict=False))))
            self.stamped.append((stamp, dict(zip(msg.name, msg.position, strict=False))))
            if len(self.joint_states) > 2000:
                del self.joint_states[:1000]
            if len(self.stamped) > 6000:
                del self.stamped[:3000]

    def _on_truth(self, msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self.lock:
            self.truth.append((stamp, dict(zip(msg.name, msg.position, strict=False))))
            self.truth_velocity.append((stamp, dict(zip(msg.name, msg.velocity, strict=False))))
            if len(self.truth) > 6000:
                del self.truth[:3000]
                del self.truth_velocity[:3000]

    def _on_status(self, msg: Any) -> None:
        with self.lock:
            self.status.append(json.loads(msg.data))

    def _on_sim(self, msg: Any) -> None:
        with self.lock:
            self.sim_status = json.loads(msg.data)

    def event(self, kind: str) -> dict[str, Any] | None:
        with self.lock:
            return next((s for s in self.status if s.get("event") == kind), None)

    def wait_for(self, cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    def final_status(self, agent: NodeProcess, timeout_s: float = 30.0) -> dict[str, Any]:
        """The agent's `done` event; when it never comes, the failure says how the agent exited
        and what it logged (a crash and a lost message read the same otherwise)."""
        try:
            return self.wait_for(lambda: self.event("done"), timeout_s, "the agent's final status")
        except AssertionError as exc:
            code = agent.proc.poll()
            raise AssertionError(f"{exc} (agent exit code {code}):\n{agent.log()[-4000:]}") from None

    def latest_joints(self) -> dict[str, float]:
        with self.lock:
            return dict(self.joint_states[-1][1]) if self.joint_states else {}

    def publish_joints(self, positions: dict[str, float]) -> None:
        msg = self._JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.name = list(positions)
        msg.position = [float(v) for v in positions.values()]
        msg.velocity = [0.0] * len(positions)
        self.js_pub.publish(msg)

    def publish_instruction(self, text: str) -> None:
        from std_msgs.msg import String

        self.instruction_pub.publish(String(data=text))

    def estop_subscribed(self, timeout_s: float = STARTUP_S) -> None:
        """DDS discovery takes a moment after a node starts: an e-stop published before the agent's
        subscription has matched goes nowhere (as it would from any publisher)."""
        self.wait_for(
            lambda: self.estop_pub.get_subscription_count() > 0, timeout_s, "the e-stop subscription"
        )
        self.estop_pub.publish(self._Bool(data=False))  # ignored by the agent; completes the match

    def estop_topic(self) -> None:
        assert self.estop_pub.get_subscription_count() > 0, "no e-stop subscriber matched yet"
        self.estop_pub.publish(self._Bool(data=True))

    def estop_service(self) -> str:
        assert self.stop_client.wait_for_service(timeout_sec=STARTUP_S), "/pear/stop service not available"
        future = self.stop_client.call_async(self._Trigger.Request())
        self.wait_for(future.done, 10, "the /pear/stop reply")
        return future.result().message

    def close(self) -> None:
        self._shutdown_spin()
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def probe() -> Iterator[Probe]:
    p = Probe()
    yield p
    p.close()


def home_joints(robot: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in robot.parts.values():
        out.update(zip(part.joints, part.home.joints_rad, strict=True))
        if part.gripper is not None:
            g = part.gripper
            for j in g.joints:
                out[j] = g.closed_joint_pos + part.home.gripper * (g.open_joint_pos - g.closed_joint_pos)
    return out


def as_array(d: dict[str, float], names: list[str]) -> np.ndarray:
    return np.array([d[n] for n in names])


class DoubleProcess:
    """tests/ros2/jtc_double.py in its own process; its JSONL log is what it saw."""

    def __init__(self, cfg: dict[str, Any], workdir: Path) -> None:
        self.log_path = workdir / "jtc_double.jsonl"
        cfg = {"log": str(self.log_path)} | cfg
        self.cfg_path = workdir / "jtc_double.json"
        self.cfg_path.write_text(json.dumps(cfg))
        self._out = (workdir / "jtc_double.out").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.ros2.jtc_double", str(self.cfg_path)],
            cwd=REPO,
            env=dict(os.environ),
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 20
        while not any(e["event"] == "ready" for e in self.events()):
            assert time.monotonic() < deadline and self.proc.poll() is None, "the JTC double did not start"
            time.sleep(0.05)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        out = [json.loads(x) for x in self.log_path.read_text().splitlines() if x.strip()]
        return [e for e in out if kind is None or e["event"] == kind]

    def trajectories(self, controller: str | None = None) -> list[dict[str, Any]]:
        return [e for e in self.events("trajectory") if controller is None or e["controller"] == controller]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def double_config(robot: Any, **extra: Any) -> dict[str, Any]:
    """The stack a YAM owner runs: one JTC per arm and gripper (names from the robot YAML), the
    joint_state_broadcaster at 100 Hz, and 160x120 rgb8 cameras at 10 Hz on the YAML's topics."""
    controllers: dict[str, list[str]] = {}
    vmax: dict[str, float] = {}
    for part in robot.parts.values():
        controllers[part.controller] = list(part.joints)
        vmax[part.controller] = part.limits.joint_velocity_rad_s
        if part.gripper is not None and part.gripper.controller:
            controllers[part.gripper.controller] = [part.gripper.joints[0]]
            vmax[part.gripper.controller] = 0.1  # the agent's gripper_speed
    return {
        "controllers": controllers,
        "vmax": vmax,
        "initial": home_joints(robot),
        "rate_hz": 100.0,
        "cameras": {c.topic: [160, 120] for c in robot.cameras.values() if c.topic},
        "image_rate_hz": 10.0,  # small and frequent: a lost best-effort frame or two stays young
    } | extra


@pytest.fixture
def start_double(tmp_path: Path) -> Iterator[Callable[..., DoubleProcess]]:
    procs: list[DoubleProcess] = []

    def start(cfg: dict[str, Any]) -> DoubleProcess:
        d = DoubleProcess(cfg, tmp_path)
        procs.append(d)
        return d

    yield start
    for d in procs:
        d.stop()


class InProcessAgent:
    """RosBackend on a node spun exactly as agent_node spins its own (spin_in_background)."""

    def __init__(self, robot: Any, **settings: Any) -> None:
        import rclpy

        from pear_agent.robot.backend import TaskInfo
        from pear_agent.ros2.backend import RosBackend
        from pear_agent.ros2.graph import spin_in_background
        from pear_agent.ros2.settings import RosSettings

        rclpy.init()
        self.node = rclpy.create_node("pear_agent")
        defaults = {"disabled_cameras": "all", "operator_terminal": False, "wait_for_joint_states_s": 20.0}
        self.settings = RosSettings(**(defaults | settings))
        self.backend = RosBackend(robot, self.node, TaskInfo("stop_test", "", 30), self.settings)
        self._shutdown = spin_in_background(self.node)

    def close(self) -> None:
        self._shutdown()


@pytest.fixture
def agent(yam: Any) -> Iterator[Callable[..., InProcessAgent]]:
    """`agent(**settings)`: an InProcessAgent on the YAM with these RosSettings, closed after the test."""
    made: list[InProcessAgent] = []

    def make(**settings: Any) -> InProcessAgent:
        a = InProcessAgent(yam, **settings)
        made.append(a)
        return a

    yield make
    for a in made:
        a.close()
