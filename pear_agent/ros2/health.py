"""`pear-agent ros health`: what the agent's stack check will find, before it is started, in one
table: joint states (rate, age, joints), a controller behind every command topic (and its state,
where controller_manager can be asked), every camera (rate, age, size), each YAM driver's state and
latch, who hears the e-stop, and what the agent is doing. Exit 0 when nothing fails, else 1."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pear_agent.robot.loader import load_robot
from pear_agent.ros2.graph import controller_states, is_compressed_topic, trajectory_topic
from pear_agent.ros2.ros_session import (
    AgentStatus,
    DriverStatus,
    Session,
    describe_event,
    domain,
    wait_until,
)

OK, FAIL, INFO = "ok", "FAIL", "--"
RECORDERS = ("rosbag2",)


@dataclass
class _Stream:
    """Receipt times and the last message of one topic."""

    times: list[float] = field(default_factory=list)
    joint_times: dict[str, list[float]] = field(default_factory=dict)
    last: Any = None

    def since(self, t0: float) -> _Stream:
        """A copy holding only what came after `t0` (the listening window)."""
        return _Stream(
            [t for t in self.times if t >= t0],
            {j: kept for j, ts in self.joint_times.items() if (kept := [t for t in ts if t >= t0])},
            self.last,
        )


def _rate_hz(times: list[float]) -> float:
    if len(times) < 2 or times[-1] <= times[0]:
        return 0.0
    return (len(times) - 1) / (times[-1] - times[0])


def _listen(
    s: Session, p: dict[str, Any], cameras: dict[str, str]
) -> tuple[dict[str, _Stream], threading.Lock]:
    """Subscriptions to the joint states and every camera; (the streams, their lock)."""
    from rclpy.qos import qos_profile_sensor_data  # optional: rclpy
    from sensor_msgs.msg import CompressedImage, Image, JointState  # optional: rclpy

    streams: dict[str, _Stream] = {}
    lock = threading.Lock()

    def on_js(msg: Any) -> None:
        now = time.monotonic()
        with lock:
            st = streams.setdefault(p["joint_states_topic"], _Stream())
            st.times.append(now)
            for name in msg.name:
                st.joint_times.setdefault(name, []).append(now)

    def on_image(topic: str, msg: Any) -> None:
        with lock:
            st = streams.setdefault(topic, _Stream())
            st.times.append(time.monotonic())
            st.last = msg

    s.node.create_subscription(JointState, p["joint_states_topic"], on_js, qos_profile_sensor_data)
    for topic in cameras.values():
        kind = CompressedImage if is_compressed_topic(topic) else Image
        s.node.create_subscription(kind, topic, lambda m, t=topic: on_image(t, m), qos_profile_sensor_data)
    return streams, lock


def _required(robot: Any) -> tuple[list[str], dict[str, str]]:
    """The joints the agent needs, and command topic -> controller."""
    joints: list[str] = []
    topics: dict[str, str] = {}
    for part in robot.parts.values():
        joints += list(part.joints)
        if part.controller:
            topics[trajectory_topic(part.controller)] = part.controller
        if part.gripper is not None:
            joints.append(part.gripper.joints[0])
            if part.gripper.controller:
                topics[trajectory_topic(part.gripper.controller)] = part.gripper.controller
    return joints, topics


def _cameras(robot: Any, disabled: str) -> dict[str, str]:
    off = {c.strip() for c in disabled.split(",") if c.strip()}
    if "all" in off:
        return {}
    return {n: c.topic for n, c in robot.cameras.items() if c.topic and n not in off}


def check_health(p: dict[str, Any], window_s: float, wait_s: float = 0.0, discovery_s: float = 10.0) -> int:
    """Print the table for the agent parameters `p`, measured over the last `window_s` once every
    joint, camera and driver was heard (or `discovery_s` passed); with `wait_s`, measure again until
    nothing fails or that time is up. 0 when no row fails."""
    robot = load_robot(p["robot"])
    cameras = _cameras(robot, p["disabled_cameras"])
    with Session("health") as s:
        streams, lock = _listen(s, p, cameras)
        status = AgentStatus(s, p["status_topic"])
        drivers = DriverStatus(s, p)
        t0 = time.monotonic()
        joints, _ = _required(robot)

        def discovered() -> bool:  # every joint, camera and driver heard from (or the time is up)
            with lock:
                js = streams.get(p["joint_states_topic"])
                joints_in = set(js.joint_times) if js else set()
                cams_in = {t for t in cameras.values() if streams.get(t) and streams[t].times}
            return set(joints) <= joints_in and cams_in == set(cameras.values()) and drivers.settled(t0)

        wait_until(discovered, discovery_s)  # a new node finds its peers one by one; then the window
        deadline = time.monotonic() + wait_s
        while True:
            time.sleep(window_s)
            now = time.monotonic()
            with lock:
                snap = {k: v.since(now - window_s) for k, v in streams.items()}
            rows = _rows(s, p, robot, cameras, snap, drivers.snapshot(), status, now, window_s)
            if not any(v == FAIL for v, _ in rows) or time.monotonic() >= deadline:
                break
    print(f"ROS_DOMAIN_ID={domain()}, robot {robot.name}, listened {window_s:g} s")
    for verdict, text in rows:
        print(f"{verdict:<5s}{text}")
    bad = sum(1 for v, _ in rows if v == FAIL)
    print("healthy: the agent's stack check finds what it needs" if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


def _rows(
    s: Session,
    p: dict[str, Any],
    robot: Any,
    cameras: dict[str, str],
    snap: dict[str, _Stream],
    drivers: dict[str, dict[str, Any]],
    status: AgentStatus,
    now: float,
    window_s: float,
) -> list[tuple[str, str]]:
    joints, command_topics = _required(robot)
    rows = [_joint_row(s, p, snap.get(p["joint_states_topic"]), joints, now, window_s)]
    for topic, controller in command_topics.items():
        subs = [n for n in s.subscribers(topic) if not n.startswith(RECORDERS)]
        if subs:
            rows.append((OK, f"{topic}: subscribed by {', '.join(subs)}"))
        else:
            rows.append((FAIL, f"{topic}: no subscriber (controller {controller}: loaded and active?)"))
    if not drivers:
        states = controller_states(s.node, p["controller_manager"], 1.0)
        if states is None:
            rows.append(
                (INFO, "controller states: not asked (controller_manager_msgs is not installed here)")
            )
        else:
            for controller in command_topics.values():
                state = states.get(controller, "not loaded")
                rows.append((OK if state == "active" else FAIL, f"controller {controller}: {state}"))
    rows += _camera_rows(snap, cameras, p, now, window_s)
    rows += _driver_rows(s, p, robot, drivers)
    hear = s.subscribers(p["estop_topic"])
    rows.append((INFO, f"{p['estop_topic']} (e-stop) is heard by {', '.join(hear) or 'nobody'}"))
    rows.append(_mode_row(p))
    last = status.snapshot()[-1:] if s.publishers(p["status_topic"]) else []
    rows.append(_agent_row(p, last, status))
    return rows


def _joint_row(
    s: Session, p: dict[str, Any], st: _Stream | None, joints: list[str], now: float, window_s: float
) -> tuple[str, str]:
    topic = p["joint_states_topic"]
    pubs = ", ".join(s.publishers(topic)) or "no publisher"
    if st is None or not st.times:
        return FAIL, f"{topic}: no message within {window_s:g} s ({pubs})"
    missing = [j for j in joints if j not in st.joint_times]
    if missing:
        return FAIL, f"{topic}: lacks {', '.join(missing)} ({pubs})"
    rate = min(_rate_hz(st.joint_times[j]) for j in joints)
    age = max(now - st.joint_times[j][-1] for j in joints)
    limit = p["joint_state_max_age_s"]
    text = f"{topic}: {len(joints)}/{len(joints)} joints at >= {rate:.1f} Hz, oldest {age:.2f} s old ({pubs})"
    if age > limit or rate < 1.0 / limit:
        return FAIL, f"{text}: the agent needs them younger than {limit:g} s"
    return OK, text + ("" if rate >= 50 else " (the checklist asks >= 50 Hz)")


def _camera_rows(
    snap: dict[str, _Stream], cameras: dict[str, str], p: dict[str, Any], now: float, window_s: float
) -> list[tuple[str, str]]:
    if not cameras:
        return [(INFO, f"cameras: none in use (disabled_cameras: {p['disabled_cameras'] or 'none'})")]
    rows = []
    for name, topic in cameras.items():
        st = snap.get(topic)
        if st is None or not st.times:
            rows.append((FAIL, f"camera {name}: no image on {topic} within {window_s:g} s"))
            continue
        age = now - st.times[-1]
        size = f", {st.last.width}x{st.last.height} {st.last.encoding}" if hasattr(st.last, "width") else ""
        text = f"camera {name}: {topic} at {_rate_hz(st.times):.1f} Hz, last {age:.2f} s old{size}"
        limit = p["image_max_age_s"]
        rows.append((FAIL, f"{text}: older than {limit:g} s") if age > limit else (OK, text))
    return rows


def _driver_rows(
    s: Session, p: dict[str, Any], robot: Any, drivers: dict[str, dict[str, Any]]
) -> list[tuple[str, str]]:
    if not drivers:
        return [(INFO, "drivers: no yam_driver_node status (a ros2_control stack publishes none)")]
    rows = []
    for part in robot.parts:
        st = drivers.get(part)
        topic = p["driver_status_topic"].replace("{part}", part)
        node = ", ".join(s.publishers(topic)) or "?"
        if st is None:
            rows.append((FAIL, f"driver {part}: no status on {topic}"))
        elif st.get("state") == "estop":
            rows.append(
                (
                    FAIL,
                    f"driver {part} ({node}): latched by an e-stop ({st.get('estop')}): "
                    "release with `pear-agent ros release`",
                )
            )
        elif st.get("state") == "fault":
            rows.append((FAIL, f"driver {part} ({node}): fault: {st.get('fault')}: restart it"))
        else:
            sim = ", I2RT SimRobot" if st.get("sim") else ""
            rows.append(
                (OK, f"driver {part} ({node}): {st.get('state')}{sim}, {st.get('rejected', 0)} rejected")
            )
    return rows


def _agent_row(p: dict[str, Any], last: list[dict[str, Any]], status: AgentStatus) -> tuple[str, str]:
    if not last:
        return INFO, f"agent: not running (nothing on {p['status_topic']})"
    question = status.open_question("success") or status.open_question("home")
    if question:
        return INFO, "agent: " + describe_event(question)
    return INFO, "agent: last said " + describe_event(last[-1])


def _mode_row(p: dict[str, Any]) -> tuple[str, str]:
    """How the agent file lets the model move the arm: its arm mode and speed scale."""
    mode, scale = p["arm_mode"], float(p["speed_scale"])
    said = {
        "shadow": f"shadow (nothing is sent to the controllers; a MuJoCo twin in {p['twin_task']} "
        "runs each action)",
        "step": f"step (each motion waits for `pear-agent ros approve`; {float(p['step_timeout_s']):g} s "
        "without an answer = reject)",
        "free": "free (actions move the arm)",
    }.get(mode)
    if said is None or not 0.0 < scale <= 1.0:
        return FAIL, f"arm mode {mode!r}, speed scale {scale:g}: the agent will refuse them"
    return INFO, f"arm mode: {said}; speed scale {scale:g} (stops brake at full deceleration)"
