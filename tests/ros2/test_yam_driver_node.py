"""The YAM i2rt driver node as separate processes over real DDS, on I2RT's own MuJoCo SimRobot (the
same `get_yam_robot` call as on CAN, `sim=True`), driven by the real agent_node or by a probe node in
the test process that publishes what a careless client might."""

from __future__ import annotations

import json
import os
import re
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

pytest.importorskip("rclpy", reason="ROS 2 wheels not installed (bash scripts/setup.sh --dev installs them)")
pytest.importorskip("i2rt.robots.get_robot", reason="I2RT driver deps missing (pip install -e '.[yam]')")
pytest.importorskip("can", reason="python-can missing (pip install -e '.[yam]')")
pytest.importorskip("diagnostic_msgs", reason="diagnostic_msgs missing (pip install -e '.[yam]')")

from pear_agent.robot.loader import load_robot
from pear_agent.ros2 import agent_node, yam_driver_node
from tests.ros2.conftest import STARTUP_S, NodeProcess

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]
DRIVER = "pear_agent.ros2.yam_driver_node"
AGENT = "pear_agent.ros2.agent_node"
YAM = load_robot("yam_bimanual")
ARMS = {name: list(part.joints) for name, part in YAM.parts.items()}
CAP = {name: part.limits.joint_velocity_rad_s for name, part in YAM.parts.items()}
SPEED_SLACK = 1.02
"""measured speed may exceed the cap by the driver's 1 % spline tolerance plus clock jitter"""
ESTOP_SPEED_SCALE = 0.5
"""the e-stop test's agent moves at half speed: every move then lasts over a second"""
ESTOP_RELAY_MARGIN_S = 1.0
"""an e-stop is sent with at least this much of the move to run: the agent's relay of its /pear/stop
service may be scheduled late on a loaded machine, and the test is of a stop mid-motion"""
AGENT_TOLERANCE_RAD = 0.01
"""the agent's reach_tolerance_rad"""


class Probe:
    """A node in the test process: every /joint_states message (with its stamp), the trajectories the
    agent sends, the agent's and the drivers' status; publishes camera images, e-stops, trajectories."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import Image, JointState
        from std_msgs.msg import Bool, String
        from trajectory_msgs.msg import JointTrajectory

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("yam_test_probe", context=self.context)
        self.lock = threading.Lock()
        self.states: list[tuple[float, dict[str, float]]] = []
        self.trajectories: list[tuple[float, str, Any]] = []
        self.agent_status: list[dict[str, Any]] = []
        self.driver_status: dict[str, dict[str, Any]] = {}
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(
            depth=200, reliability=ReliabilityPolicy.RELIABLE, durability=QoSDurabilityPolicy.TRANSIENT_LOCAL
        )
        self.node.create_subscription(JointState, "/joint_states", self._on_js, reliable)
        self.traj_pubs = {}
        for part in YAM.parts.values():
            for ctrl in (part.controller, part.gripper.controller):
                topic = f"/{ctrl}/joint_trajectory"
                self.node.create_subscription(
                    JointTrajectory, topic, lambda m, t=topic: self._on_traj(t, m), reliable
                )
                self.traj_pubs[ctrl] = self.node.create_publisher(JointTrajectory, topic, reliable)
        self.node.create_subscription(String, "/pear/agent/status", self._on_agent, latched)
        for arm in ARMS:
            self.node.create_subscription(
                String, f"/pear/driver/{arm}/status", lambda m, a=arm: self._on_driver(a, m), latched
            )
        self.estop_pub = self.node.create_publisher(Bool, "/pear/estop", reliable)
        self.cam_pubs = {n: self.node.create_publisher(Image, c.topic, 5) for n, c in YAM.cameras.items()}
        self._Bool, self._Image, self._JT = Bool, Image, JointTrajectory
        self._stop = threading.Event()
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._threads = [threading.Thread(target=self._spin, daemon=True)]
        self._threads[0].start()

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            self.executor.spin_once(timeout_sec=0.05)

    def _on_js(self, msg: Any) -> None:
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        with self.lock:
            self.states.append((stamp, dict(zip(msg.name, msg.position, strict=True))))

    def _on_traj(self, topic: str, msg: Any) -> None:
        with self.lock:
            self.trajectories.append((time.time(), topic, msg))

    def _on_agent(self, msg: Any) -> None:
        with self.lock:
            self.agent_status.append(json.loads(msg.data))

    def _on_driver(self, arm: str, msg: Any) -> None:
        with self.lock:
            self.driver_status[arm] = json.loads(msg.data)

    # -- helpers ---------------------------------------------------------------------------
    def start_cameras(self, rate_hz: float = 8.0) -> None:
        """Stand-ins for the camera drivers: rgb8 frames of the YAML's size on the YAML's topics."""

        def run() -> None:
            frames = {}
            for name, cam in YAM.cameras.items():
                img = self._Image()
                img.height, img.width, img.encoding, img.step = cam.height, cam.width, "rgb8", cam.width * 3
                img.data = bytes(np.full((cam.height, cam.width, 3), 90, np.uint8).tobytes())
                frames[name] = img
            while not self._stop.is_set():
                for name, img in frames.items():
                    img.header.stamp = self.node.get_clock().now().to_msg()
                    self.cam_pubs[name].publish(img)
                time.sleep(1.0 / rate_hz)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self._threads.append(t)

    def wait_for(self, cond: Callable[[], Any], timeout_s: float, what: str) -> Any:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = cond()
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    def series(self, joint: str, since_s: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """(stamps, positions) of one joint, in stamp order."""
        with self.lock:
            rows = [(t, s[joint]) for t, s in self.states if joint in s and t >= since_s]
        rows.sort()
        arr = np.array(rows).reshape(-1, 2)
        return arr[:, 0], arr[:, 1]

    def matrix(self, joints: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(stamps, N x J positions) from the messages that carry all `joints` (one driver's)."""
        with self.lock:
            rows = [(t, [s[j] for j in joints]) for t, s in self.states if all(j in s for j in joints)]
        rows.sort(key=lambda r: r[0])
        return np.array([r[0] for r in rows]), np.array([r[1] for r in rows]).reshape(len(rows), len(joints))

    def latest(self, joints: list[str]) -> np.ndarray | None:
        with self.lock:
            found: dict[str, float] = {}
            for _, s in reversed(self.states):
                for j in joints:
                    if j in s and j not in found:
                        found[j] = s[j]
                if len(found) == len(joints):
                    return np.array([found[j] for j in joints])
        return None

    def speed_now(self, joints: list[str], window_s: float = 0.05) -> float:
        """Peak joint speed over the last `window_s` of joint states."""
        out = 0.0
        for j in joints:
            t, q = self.series(j)
            if len(t) < 2:
                continue
            k = np.searchsorted(t, t[-1] - window_s)
            if t[-1] - t[k] > 0:
                out = max(out, abs(q[-1] - q[k]) / (t[-1] - t[k]))
        return out

    def event(self, kind: str) -> dict[str, Any] | None:
        with self.lock:
            return next((s for s in self.agent_status if s.get("event") == kind), None)

    def estop(self) -> None:
        self.estop_pub.publish(self._Bool(data=True))

    def call_trigger(self, service: str) -> Any:
        from std_srvs.srv import Trigger

        client = self.node.create_client(Trigger, service)
        assert client.wait_for_service(timeout_sec=STARTUP_S), f"{service} not available"
        future = client.call_async(Trigger.Request())
        self.wait_for(future.done, 10, f"the {service} reply")
        return future.result()

    def send(self, controller: str, msg: Any) -> None:
        self.traj_pubs[controller].publish(msg)

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=2)
        self.executor.shutdown(timeout_sec=1)
        self.node.destroy_node()
        self.context.try_shutdown()


def max_speeds(probe: Probe, joints: list[str], min_dt_s: float = 0.03) -> dict[str, float]:
    """Per joint, the peak speed measured from /joint_states over pairs of samples >= min_dt_s apart
    (finer pairs measure the publish jitter, not the arm)."""
    out = {}
    for j in joints:
        t, q = probe.series(j)
        peak = 0.0
        for i in range(len(t)):
            k = np.searchsorted(t, t[i] + min_dt_s)
            if k < len(t):
                peak = max(peak, abs(q[k] - q[i]) / (t[k] - t[i]))
        out[j] = peak
    return out


def trajectory_arrays(msg: Any) -> tuple[list[str], np.ndarray, np.ndarray]:
    names = list(msg.joint_names)
    times = np.array([p.time_from_start.sec + p.time_from_start.nanosec * 1e-9 for p in msg.points])
    pos = np.array([list(p.positions) for p in msg.points], float).reshape(len(msg.points), len(names))
    return names, times, pos


# -- fixtures --------------------------------------------------------------------------------
@pytest.fixture
def probe() -> Iterator[Probe]:
    p = Probe()
    yield p
    p.close()


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    started: list[NodeProcess] = []

    def start(module: str, name: str, params: dict[str, Any]) -> NodeProcess:
        p = NodeProcess(module, name, params, tmp_path, remap_name=True, stop_timeout_s=8.0)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        p.stop()


@pytest.fixture(scope="module")
def recorded_episode(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bimanual_pickup episode recorded now with the scripted expert in MuJoCo (`pear-agent run`),
    so it is in the current wire format."""
    runs = tmp_path_factory.mktemp("recorded")
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    cmd = [sys.executable, "-m", "pear_agent", "run", "--robot", "yam_bimanual", "--task", "bimanual_pickup"]
    out = subprocess.run(
        [*cmd, "--runs-dir", str(runs), "--no-video", "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    log = next(runs.rglob("episode.jsonl"))
    assert json.loads(out.stdout.strip().splitlines()[-1])["success"]
    return log


def _replies(log: Path) -> int:
    rows = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return sum(1 for r in rows if r.get("kind") == "turn" and r.get("reply"))


def start_drivers(procs: Callable[..., NodeProcess], **extra: Any) -> dict[str, NodeProcess]:
    return {
        arm: procs(DRIVER, f"yam_{arm.split('_')[0]}_driver", {"arm": arm, "sim": True, **extra})
        for arm in ARMS
    }


def start_agent(procs: Callable[..., NodeProcess], log: Path, runs: Path, **overrides: Any) -> NodeProcess:
    wanted = {
        "policy": "replay",
        "replay_path": str(log),
        "task": "bimanual_pickup",
        "max_turns": _replies(log),
        "runs_dir": str(runs),
        "task_status_topic": "",  # no simulator: as on the real robot
        "instruction": "pick up the bar with both arms",
        "go_home_on_reset": True,
        "confirm_home": False,
        "operator_terminal": False,
        "operator_timeout_s": 1.0,
        "wait_for_images_s": 10.0,
        "image_max_age_s": 5.0,  # the stand-in cameras share 2 busy cores with everything else
        "wait_for_joint_states_s": 20.0,
        "wait_for_controllers_s": 20.0,
        **overrides,
    }
    params = {k: v for k, v in wanted.items() if k in agent_node.PARAMS}
    return procs(AGENT, "pear_agent", params)


def all_joints() -> list[str]:
    return [j for joints in ARMS.values() for j in joints]


def wait_for_drivers(probe: Probe) -> None:
    probe.wait_for(
        lambda: probe.latest(all_joints()) is not None, STARTUP_S, "joint states from both drivers"
    )


# -- the agent replays a recorded episode against both drivers ----------------------------------
def test_agent_replays_bimanual_pickup_against_the_i2rt_drivers(
    tmp_path: Path, procs, probe: Probe, recorded_episode: Path
) -> None:
    drivers = start_drivers(procs)
    probe.start_cameras()
    wait_for_drivers(probe)
    start_q = probe.latest(all_joints())
    agent = start_agent(procs, recorded_episode, tmp_path / "runs")
    code = agent.wait(240)
    log = agent.log()
    done = probe.wait_for(lambda: probe.event("done"), 30, "the agent's final status")
    turns = [s for s in probe.agent_status if s.get("event") == "turn"]
    # the episode ends cleanly: every recorded turn replayed and reached, no refusal, no e-stop
    assert code in (0, 1), log[-3000:]
    assert len(turns) == _replies(recorded_episode), log[-3000:]
    assert all(t["outcome"] == "reached" for t in turns), [t["outcome"] for t in turns]
    assert done["end_reason"] not in ("refused", "stopped", "error"), done
    # every trajectory the agent sent was accepted by the driver (and none rejected)
    sent = [(topic, msg) for _, topic, msg in probe.trajectories]
    assert len(sent) >= 2 * len(turns)
    driver_logs = {arm: p.log() for arm, p in drivers.items()}
    accepted = sum(text.count(": accepted trajectory #") for text in driver_logs.values())
    assert accepted == len(sent), (accepted, len(sent))
    assert not any("rejected trajectory" in text for text in driver_logs.values()), driver_logs
    # the arms reached each arm trajectory's target within the agent's tolerance
    for _, topic, msg in probe.trajectories:
        arm = next((a for a, p in YAM.parts.items() if topic == f"/{p.controller}/joint_trajectory"), None)
        if arm is None or len(msg.points) == 0:
            continue
        names, _, pos = trajectory_arrays(msg)
        # some joint state equals the final point (the agent waited for it before the next turn)
        _, q = probe.matrix(names)
        err = np.max(np.abs(q - pos[-1]), axis=1)
        assert float(np.min(err)) < AGENT_TOLERANCE_RAD, (
            f"{topic}: target {pos[-1].round(3).tolist()} never reached"
        )
    # the arms moved (home, then the episode) and no joint exceeded the cap, measured from /joint_states
    end_q = probe.latest(all_joints())
    assert np.max(np.abs(end_q - start_q)) > 0.5
    for arm, joints in ARMS.items():
        speeds = max_speeds(probe, joints)
        print(f"{arm}: peak measured joint speed {max(speeds.values()):.3f} rad/s (cap {CAP[arm]})")
        assert max(speeds.values()) > 0.5 * CAP[arm], speeds  # it really moved, near the cap
        assert max(speeds.values()) <= CAP[arm] * SPEED_SLACK, speeds
    for arm in ARMS:
        st = probe.wait_for(lambda a=arm: probe.driver_status.get(a), 5, f"{arm} status")
        assert st["state"] in ("holding", "moving") and st["rejected"] == 0, st


def _wait_moving(probe: Probe, joints: list[str], timeout_s: float) -> None:
    probe.wait_for(lambda: probe.speed_now(joints) > 0.5, timeout_s, "a joint moving faster than 0.5 rad/s")


def _arm_motion_left_s(probe: Probe) -> float:
    """How long the newest arm trajectory still runs: its start (header stamp, or its receipt where
    unstamped, as the driver takes it) plus its last point's time_from_start, minus now."""
    arm_topics = {f"/{part.controller}/joint_trajectory" for part in YAM.parts.values()}
    newest: dict[str, tuple[float, Any]] = {}
    with probe.lock:
        for t_recv, topic, msg in probe.trajectories:
            if topic in arm_topics:
                newest[topic] = (t_recv, msg)
    left = 0.0
    for t_recv, msg in newest.values():
        stamp = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        _, times, _ = trajectory_arrays(msg)
        if len(times):
            left = max(left, (stamp if stamp > 0 else t_recv) + float(times[-1]) - time.time())
    return left


def _wait_mid_move(
    probe: Probe, joints: list[str], speed_rad_s: float, left_s: float, timeout_s: float
) -> None:
    """Until an arm moves faster than `speed_rad_s` with at least `left_s` of its trajectory to run:
    an e-stop sent then lands mid-motion even when it is relayed late on a loaded machine."""
    probe.wait_for(
        lambda: probe.speed_now(joints) > speed_rad_s and _arm_motion_left_s(probe) > left_s,
        timeout_s,
        f"an arm moving faster than {speed_rad_s:g} rad/s with {left_s:g} s of its move to run",
    )


@pytest.mark.parametrize("source", ["topic", "agent_service"])
def test_estop_mid_motion_stops_within_the_ramp_and_latches(
    tmp_path: Path, procs, probe: Probe, recorded_episode: Path, source: str
) -> None:
    """`topic`: true on /pear/estop (agent and drivers hear it); `agent_service`: the agent's
    /pear/stop service (the agent passes it on to the drivers on /pear/estop).

    The agent runs at `ESTOP_SPEED_SCALE`, so its moves last long enough that an e-stop sent with
    `ESTOP_RELAY_MARGIN_S` of a move to run is sure to land mid-motion (at full speed only the
    episode's first move lasts over a second). Braking at full speed is tested in test_stops.py."""
    drivers = start_drivers(procs)
    probe.start_cameras()
    wait_for_drivers(probe)
    agent = start_agent(procs, recorded_episode, tmp_path / "runs", speed_scale=ESTOP_SPEED_SCALE)
    joints = all_joints()
    fastest = max(CAP.values()) * ESTOP_SPEED_SCALE
    _wait_mid_move(probe, joints, fastest / 3, ESTOP_RELAY_MARGIN_S, 120)
    t_send = time.time()
    if source == "topic":
        probe.estop()
    else:
        probe.call_trigger("/pear/stop")
    for arm in ARMS:
        probe.wait_for(lambda a=arm: (probe.driver_status.get(a) or {}).get("estop_at"), 5, f"{arm} e-stop")
    time.sleep(1.5)
    moved_after = {}
    for arm, joints_of_arm in ARMS.items():
        at = probe.driver_status[arm]["estop_at"]
        assert at["time_s"] >= t_send - 0.01
        for j in joints_of_arm:
            t, q = probe.series(j, since_s=at["time_s"])
            assert len(t) > 50, f"{j}: no joint states after the e-stop"
            moved_after[j] = float(np.max(np.abs(q - at["positions"][j])))
    # SimRobot is kinematic: it moves exactly the stop ramp, at most its length from the scaled cap
    # at the driver's default deceleration and jerk (v^2 / 2a + v a / 2j)
    a = float(yam_driver_node.PARAMS["stop_deceleration_rad_s2"])
    jerk = float(yam_driver_node.PARAMS["stop_jerk_rad_s3"])
    ramp = fastest**2 / (2 * a) + fastest * a / (2 * jerk)
    assert max(moved_after.values()) < ramp + 0.005, (ramp, moved_after)
    print(f"e-stop: max joint motion after it {max(moved_after.values()):.4f} rad")
    # ... and the stop was asked mid-motion: some arm moved faster than 0.1 rad/s just before it was
    # sent (with ESTOP_RELAY_MARGIN_S of a move to run). Through the agent's service the agent brakes
    # the arms itself before it relays the e-stop, so by the time a driver latches, the arm may
    # already be at rest: the premise is measured where the stop was asked, not where it latched.
    speeds_before = []
    for joints_of_arm in ARMS.values():
        t, q = probe.matrix(joints_of_arm)
        k = (t >= t_send - 0.2) & (t <= t_send)
        if k.sum() >= 2:
            tk, qk = t[k], q[k]
            speeds_before.append(float(np.max(np.abs(qk[-1] - qk[0]))) / (tk[-1] - tk[0]))
    assert max(speeds_before) > 0.1, speeds_before
    assert all(probe.driver_status[a]["state"] == "estop" for a in ARMS)
    # latched: a valid one-point hold sent afterwards is rejected, with the reason logged
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    left = ARMS["left_arm"]
    msg = JointTrajectory(joint_names=left)
    msg.points = [
        JointTrajectoryPoint(
            positions=[float(x) for x in probe.latest(left)],
            velocities=[0.0] * 6,
            time_from_start=Duration(sec=1),
        )
    ]
    probe.send("left_arm_controller", msg)
    probe.wait_for(lambda: "e-stop latched" in drivers["left_arm"].log(), 5, "the latched rejection")
    agent.wait(60)


def test_killing_the_agent_mid_motion_the_driver_finishes_then_holds(
    tmp_path: Path, procs, probe: Probe, recorded_episode: Path
) -> None:
    start_drivers(procs)
    probe.start_cameras()
    wait_for_drivers(probe)
    agent = start_agent(procs, recorded_episode, tmp_path / "runs")
    joints = all_joints()
    _wait_moving(probe, joints, 120)
    agent.proc.kill()  # SIGKILL: no goodbye, no hold message
    agent.proc.wait()
    t_kill = time.time()
    # the last trajectory per controller is what the driver must finish
    last: dict[str, Any] = {}
    with probe.lock:
        for _, topic, msg in probe.trajectories:
            last[topic] = msg
    longest = max(trajectory_arrays(m)[1][-1] for m in last.values())
    time.sleep(longest + 0.3)
    t_hold = time.time()
    time.sleep(2.0)
    for topic, msg in last.items():
        names, _, pos = trajectory_arrays(msg)
        for j, target in zip(names, pos[-1], strict=True):
            t, q = probe.series(j, since_s=t_hold)
            assert len(t) > 100, f"{j}: the driver stopped publishing after the agent died"
            drift = float(np.max(q) - np.min(q))
            assert drift < 1e-3, f"{j} drifted {drift:.4f} rad over 2 s"
            assert abs(q[-1] - target) < 1e-3, f"{topic}: {j} at {q[-1]:.4f}, last target {target:.4f}"
    assert t_hold > t_kill


# -- rejections: one driver, a probe publishing bad messages ------------------------------------
def _traj(names: list[str], times: list[float], positions: list[list[float]], vel: bool = True) -> Any:
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    msg = JointTrajectory(joint_names=list(names))
    for t, p in zip(times, positions, strict=True):
        ns = round(t * 1e9)
        pt = JointTrajectoryPoint(positions=[float(x) for x in p])
        if vel:
            pt.velocities = [0.0] * len(p)
        pt.time_from_start = Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        msg.points.append(pt)
    return msg


@pytest.fixture
def left_driver(procs, probe: Probe) -> NodeProcess:
    driver = procs(DRIVER, "yam_left_driver", {"arm": "left_arm", "sim": True})
    probe.wait_for(lambda: probe.latest(ARMS["left_arm"]) is not None, STARTUP_S, "left joint states")
    probe.wait_for(
        lambda: probe.traj_pubs["left_arm_controller"].get_subscription_count() > 0,
        20,
        "the driver's subscription",
    )
    return driver


def _expect_rejection(probe: Probe, driver: NodeProcess, msg: Any, reason: str) -> None:
    joints = ARMS["left_arm"]
    before = probe.latest(joints)
    probe.send("left_arm_controller", msg)
    probe.wait_for(lambda: "rejected trajectory" in driver.log(), 10, "a rejection in the driver's log")
    line = next(x for x in driver.log().splitlines() if "rejected trajectory" in x)
    assert reason in line, line
    st = probe.wait_for(
        lambda: (probe.driver_status.get("left_arm") or {}).get("last_rejection"), 5, "status"
    )
    assert reason in st
    time.sleep(0.5)
    after = probe.latest(joints)
    assert np.max(np.abs(after - before)) < 1e-9, "a rejected trajectory moved the arm"


def test_rejects_an_empty_trajectory(probe: Probe, left_driver: NodeProcess) -> None:
    _expect_rejection(probe, left_driver, _traj(ARMS["left_arm"], [], []), "empty trajectory (no points)")


def test_rejects_an_unknown_joint(probe: Probe, left_driver: NodeProcess) -> None:
    names = [*ARMS["left_arm"][:5], "right_joint6"]
    msg = _traj(names, [1.0], [[0.0] * 6])
    _expect_rejection(probe, left_driver, msg, "incoming joint right_joint6 is not one of")


def test_rejects_a_non_increasing_time(probe: Probe, left_driver: NodeProcess) -> None:
    msg = _traj(ARMS["left_arm"], [1.0, 1.0], [[0.1] * 6, [0.2] * 6])
    _expect_rejection(probe, left_driver, msg, "not strictly increasing between points 0 and 1")


def test_rejects_an_over_speed_message(probe: Probe, left_driver: NodeProcess) -> None:
    # 0.5 rad in 0.2 s: 2.5 rad/s mean, over the 1.5 rad/s cap (the YAML's joint_velocity_rad_s)
    msg = _traj(ARMS["left_arm"], [0.2], [[0.5, 0.5, 0.5, 0.0, 0.0, 0.0]])
    _expect_rejection(probe, left_driver, msg, "over-speed: left_joint1 would move at")


# -- no CAN device ----------------------------------------------------------------------------
def test_without_a_can_device_it_exits_with_one_line_naming_the_channel(tmp_path: Path) -> None:
    params = tmp_path / "p.yaml"
    channel = "can_pear_none"
    params.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"sim": False, "can_left": channel}}}))
    out = subprocess.run(
        [sys.executable, "-m", DRIVER, "--ros-args", "--params-file", str(params)],
        cwd=REPO,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("yam_driver_node: error: left_arm:")
    assert f"CAN channel {channel}" in lines[0]
    assert "Traceback" not in out.stdout + out.stderr


# -- watchdog and the driver's own e-stop services ------------------------------------------------
def test_command_timeout_ramps_to_rest_and_holds_when_the_client_goes_quiet(procs, probe: Probe) -> None:
    driver = procs(DRIVER, "yam_left_driver", {"arm": "left_arm", "sim": True, "command_timeout_s": 0.3})
    joints = ARMS["left_arm"]
    probe.wait_for(lambda: probe.latest(joints) is not None, STARTUP_S, "left joint states")
    probe.wait_for(
        lambda: probe.traj_pubs["left_arm_controller"].get_subscription_count() > 0, 20, "the subscription"
    )
    start = probe.latest(joints)
    target = start + np.array([1.0, 0, 0, 0, 0, 0])
    probe.send("left_arm_controller", _traj(joints, [4.0], [target.tolist()]))  # 4 s, then silence
    probe.wait_for(lambda: "command_timeout_s" in driver.log(), 5, "the watchdog's warning")
    time.sleep(0.3)
    t_hold = time.time()
    t_end = t_hold + 1.0
    # a second of the driver's states (by their stamps), however late a loaded machine delivers them
    probe.wait_for(lambda: bool(np.any(probe.matrix(joints)[0] >= t_end)), 10, "a second of held states")
    t, q = probe.matrix(joints)
    held = q[(t >= t_hold) & (t <= t_end)]
    assert len(held) > 10, len(held)
    assert float(np.max(np.ptp(held, axis=0))) < 1e-9, "it kept moving after the timeout"
    # where the watchdog fired (its warning's stamp; a loaded machine may tick it late): the arm
    # ramps to rest from there (20 rad/s2 from under 0.5 rad/s: within 10 mrad), early in the move
    warning = next(x for x in driver.log().splitlines() if "command_timeout_s" in x)
    stamp = re.search(r"\[(\d+\.\d+)\]", warning)
    assert stamp is not None, warning
    q_fired = float(np.interp(float(stamp.group(1)), t, q[:, 0]))
    assert 0.0 < held[-1][0] - start[0] < 0.5, "it should have stopped early in the 4 s move to 1 rad"
    assert abs(held[-1][0] - q_fired) < 0.03, (held[-1][0], q_fired, warning)
    assert probe.wait_for(lambda: probe.driver_status.get("left_arm"), 5, "status")["state"] == "holding"


def test_driver_estop_service_latches_and_release_accepts_again(
    probe: Probe, left_driver: NodeProcess
) -> None:
    def call(name: str) -> Any:
        return probe.call_trigger(f"/yam_left_driver/{name}")

    joints = ARMS["left_arm"]
    here = probe.latest(joints).tolist()
    assert call("estop").success
    probe.send("left_arm_controller", _traj(joints, [0.5], [here]))
    probe.wait_for(lambda: "e-stop latched" in left_driver.log(), 5, "the latched rejection")
    assert probe.wait_for(lambda: probe.driver_status.get("left_arm"), 5, "status")["state"] == "estop"
    reply = call("release_estop")
    assert reply.success and "released" in reply.message
    probe.send("left_arm_controller", _traj(joints, [0.5], [here]))
    probe.wait_for(lambda: "accepted trajectory #1" in left_driver.log(), 5, "acceptance after the release")


def test_zero_gravity_mode_floats_until_the_first_trajectory(procs, probe: Probe) -> None:
    driver = procs(DRIVER, "yam_left_driver", {"arm": "left_arm", "sim": True, "zero_gravity_mode": True})
    joints = ARMS["left_arm"]
    probe.wait_for(lambda: probe.latest(joints) is not None, STARTUP_S, "left joint states")
    st = probe.wait_for(lambda: probe.driver_status.get("left_arm"), 10, "status")
    assert st["state"] == "floating"
    probe.wait_for(
        lambda: probe.traj_pubs["left_arm_controller"].get_subscription_count() > 0, 20, "the subscription"
    )
    target = probe.latest(joints) + np.array([0.2, 0.1, 0, 0, 0, 0])
    probe.send("left_arm_controller", _traj(joints, [1.0], [target.tolist()]))
    probe.wait_for(lambda: np.max(np.abs(probe.latest(joints) - target)) < 1e-6, 30, "the target")
    assert "accepted trajectory #1" in driver.log()
    probe.wait_for(lambda: probe.driver_status["left_arm"]["state"] == "holding", 15, "holding after it")
