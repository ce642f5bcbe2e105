"""A short-lived rclpy node for one operator command (`pear-agent ros ...`): its own context, spun in
a daemon thread, closed in the order that never aborts the interpreter; plus the graph look-ups
and waits the commands share. rclpy is imported when a session opens."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from pear_agent.robot.loader import load_robot
from pear_agent.ros2.graph import json_object

UNKNOWN_NAME = "_NODE_NAME_UNKNOWN_"
"""What rmw reports for an endpoint whose node it has not discovered yet."""
UNKNOWN = "(a node not yet named)"
DISCOVERY_GRACE_S = 3.0
"""How long a command waits to discover a first driver or agent before it takes it that none runs: a
new node discovers its peers one by one, in seconds on a loaded machine."""
LATCHED_DEPTH = 200
"""History kept by the agent's status topic (transient local), and so read back by a late joiner."""


def domain() -> str:
    return os.environ.get("ROS_DOMAIN_ID", "0")


def agent_params(params_file: str | None) -> dict[str, Any]:
    """agent_node's parameters: its defaults, overridden by the `ros__parameters` of an agent YAML
    (every block of the file: `pear_agent:` or `/**:`), so a command names what the agent uses."""
    from pear_agent.ros2.agent_node import PARAMS  # heavy: pinocchio

    params = dict(PARAMS)
    if not params_file:
        return params
    path = Path(params_file)
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"--params-file {path}: no such file") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"--params-file {path}: not YAML ({' '.join(str(exc).split())})") from None
    blocks = [
        v["ros__parameters"] for v in (doc or {}).values() if isinstance(v, dict) and "ros__parameters" in v
    ]
    if not blocks:
        raise ValueError(f"--params-file {path}: no `<node>: ros__parameters:` block")
    for block in blocks:
        unknown = set(block) - set(PARAMS)
        if unknown:
            raise ValueError(f"--params-file {path}: not agent_node parameters: {', '.join(sorted(unknown))}")
        params.update(block)
    return params


class Session:
    """`with Session("stop") as s:` a node named pear_operator_<command>_<pid>, spinning."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __enter__(self) -> Session:
        import rclpy  # optional: rclpy
        from rclpy.executors import SingleThreadedExecutor  # optional: rclpy
        from rclpy.signals import SignalHandlerOptions  # optional: rclpy

        self.context = rclpy.Context()
        # Python's own SIGINT handling stays: Ctrl-C ends a command like any other
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node(f"pear_operator_{self.command}_{os.getpid()}", context=self.context)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        return self

    def _spin(self) -> None:
        while not self._stop.is_set() and self.context.ok():
            try:
                self._executor.spin_once(timeout_sec=0.05)
            except Exception:  # the context is going away
                return

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()

    # -- helpers ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.node.get_name()

    def others(self, infos: list[Any]) -> list[str]:
        """Node names of endpoint infos, less this command's own node and the ros2 CLI's. A node
        whose name discovery has not brought yet is listed as UNKNOWN."""
        out = []
        for i in infos:
            if i.node_name == self.name or i.node_name.startswith("_ros2cli_"):
                continue
            if i.node_name == UNKNOWN_NAME:
                out.append(UNKNOWN)
                continue
            ns = i.node_namespace.rstrip("/")
            name = f"{ns}/{i.node_name}".lstrip("/")
            if name not in out:
                out.append(name)
        return out

    def subscribers(self, topic: str) -> list[str]:
        return self.others(self.node.get_subscriptions_info_by_topic(topic))

    def publishers(self, topic: str) -> list[str]:
        return self.others(self.node.get_publishers_info_by_topic(topic))

    def latched_qos(self, depth: int = LATCHED_DEPTH) -> Any:
        from rclpy.qos import QoSDurabilityPolicy, QoSProfile, ReliabilityPolicy  # optional: rclpy

        return QoSProfile(
            depth=depth,
            reliability=ReliabilityPolicy.RELIABLE,
            durability=QoSDurabilityPolicy.TRANSIENT_LOCAL,
        )

    def reliable_qos(self) -> Any:
        from rclpy.qos import QoSProfile, ReliabilityPolicy  # optional: rclpy

        return QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)


def wait_until(cond: Callable[[], Any], timeout_s: float, poll_s: float = 0.02) -> Any:
    """`cond()`'s first truthy value within `timeout_s`, else its last (falsy) one."""
    deadline = time.monotonic() + timeout_s
    value = cond()
    while not value and time.monotonic() < deadline:
        time.sleep(poll_s)
        value = cond()
    return value


class AgentStatus:
    """The agent's status events (transient local: a late joiner gets the history)."""

    def __init__(self, s: Session, topic: str) -> None:
        from std_msgs.msg import String  # optional: rclpy

        self.topic = topic
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        s.node.create_subscription(String, topic, self._on, s.latched_qos())

    def _on(self, msg: Any) -> None:
        event = json_object(msg)
        if event is None:  # not a JSON object: every agent event is one
            return
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.events)

    def open_question(self, kind: str) -> dict[str, Any] | None:
        """The last question of this kind, if neither its answer nor the episode's end followed."""
        events = self.snapshot()
        for i in range(len(events) - 1, -1, -1):
            e = events[i]
            if e.get("event") == "question" and e.get("kind") == kind:
                later = events[i + 1 :]
                closed = any(x.get("event") in ("answer", "done") for x in later)
                return None if closed else e
        return None

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.snapshot()) if e.get("event") == kind), None)


def describe_event(e: dict[str, Any]) -> str:
    """One line per agent status event."""
    kind = e.get("event")
    if kind == "start":
        said = json.dumps(e.get("instruction"))
        return f"start: task {e.get('task')}, instruction {said} (seed {e.get('seed')})"
    if kind == "turn":
        return f"turn {e.get('turn')}: {e.get('summary')} -> {e.get('outcome')}"
    if kind == "question":
        how = {
            "success": "pear-agent ros judge yes|no",
            "step": "pear-agent ros approve | reject [reason]",
        }.get(str(e.get("kind")), "pear-agent ros home yes|no")
        return f"question ({e.get('kind')}): {e.get('question')} [answer: {how}]"
    if kind == "answer":
        said = {True: "yes", False: "no", None: "no answer"}[e.get("answer")]
        why = f": {e['reason']}" if e.get("reason") else ""
        return f"answer ({e.get('kind')}): {said} ({e.get('by')}){why}"
    if kind == "done":
        verdict = "success" if e.get("success") else f"failure ({e.get('end_reason')}: {e.get('detail')})"
        return (
            f"done: {verdict} in {e.get('turns')} turns, exit code {e.get('exit_code')}; "
            f"run folder {e.get('run_dir')}"
        )
    return json.dumps(e)


class DriverStatus:
    """Each yam_driver_node's JSON status (transient local), for the parts of the agent's robot. A
    YAM graph runs one driver per part: once one is heard, every part's is expected."""

    def __init__(self, s: Session, p: dict[str, Any]) -> None:
        from std_msgs.msg import String  # optional: rclpy

        self.session = s
        self._lock = threading.Lock()
        self._states: dict[str, dict[str, Any]] = {}
        pattern = p["driver_status_topic"]
        parts = load_robot(p["robot"]).parts if pattern else {}
        self.topics = {part: pattern.replace("{part}", part) for part in parts}
        for part, topic in self.topics.items():
            s.node.create_subscription(String, topic, lambda m, n=part: self._on(n, m), s.latched_qos(1))

    def _on(self, part: str, msg: Any) -> None:
        st = json_object(msg)
        if st is not None:
            with self._lock:
                self._states[part] = st

    def snapshot(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._states)

    def discovered(self) -> bool:
        return bool(self.snapshot()) or any(self.session.publishers(t) for t in self.topics.values())

    def settled(self, since: float) -> bool:
        """Every part's driver heard; or none discovered within DISCOVERY_GRACE_S of `since` (a
        ros2_control stack has no such drivers)."""
        if self.discovered():
            states = self.snapshot()
            return all(part in states for part in self.topics)
        return time.monotonic() - since >= DISCOVERY_GRACE_S

    def nodes(self) -> dict[str, str]:
        """Part -> the (discovered, named) node publishing its status."""
        out = {}
        for part, topic in self.topics.items():
            names = [n for n in self.session.publishers(topic) if n != UNKNOWN]
            if names:
                out[part] = names[0]
        return out


def driver_states(s: Session, p: dict[str, Any], timeout_s: float) -> dict[str, dict[str, Any]]:
    """Part -> its driver's status, once every driver is heard (or none is found)."""
    drivers = DriverStatus(s, p)
    t0 = time.monotonic()
    wait_until(lambda: drivers.settled(t0), timeout_s)
    return drivers.snapshot()
