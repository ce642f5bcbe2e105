"""The stack check of the ROS 2 backend (a mixin of `RosBackend`): what must be up before a move."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from pear_agent.ros2 import joint_velocity as jv
from pear_agent.ros2.graph import (
    UNKNOWN_NODE,
    controller_states,
)
from pear_agent.ros2.settings import (
    DRIVER_STATUS_MAX_AGE_S,
    LIMIT_SLACK_RAD,
)


class StackCheck:
    """Before anything moves: joint states, controllers listening and active, drivers, limits,
    cameras; each gap refused in one line that names it."""

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

    def _estop_unreached(self) -> list[str]:
        """Who would not get an e-stop sent now: each driver that reports a status (its node
        named) and does not subscribe to the e-stop topic yet, and any subscriber the graph shows
        that our publisher has not matched (a message sent before DDS has matched the two is lost,
        reliable or not: a Ctrl-C early in an episode would then leave that driver unlatched)."""
        topic = self.settings.estop_topic
        try:
            subs = self.node.get_subscriptions_info_by_topic(topic)
        except Exception:  # the graph is shutting down
            return []
        listening = {f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in subs}
        out = [
            f"the {part} driver ({node})"
            for part, st in self.driver_states().items()
            # the driver's own name (its status may reach us through a relay), else the publisher's
            if (node := str(st.get("node") or self._driver_node(part))) and node not in listening
        ]
        if self._estop_pub.get_subscription_count() < len(subs):
            out.append("a subscriber not yet matched with this node's publisher")
        return out

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
        # the nodes of the robot's process are named once its joint-state publisher is (one
        # discovery record per process names them all): only then can a subscriber be told from the
        # controller (a node named after it, where the robot has one); the controller's own
        # subscription may be discovered a DDS heartbeat period (3 s) after its joint states
        while self._unnamed_publishers(topic) and time.monotonic() < deadline:
            time.sleep(0.02)
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
        unreached = self._estop_unreached()
        while unreached and time.monotonic() < deadline:
            time.sleep(0.05)
            unreached = self._estop_unreached()
        if unreached:
            return (
                f"the e-stop on {s.estop_topic} would not reach {', '.join(unreached)} within "
                f"{s.wait_for_controllers_s:g} s (DDS discovery, or a driver whose estop_topic differs): "
                "a stop or Ctrl-C could not latch it"
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
                fallback = f" (else {jv.SOURCES[r['fallback']]})" if r["fallback"] else ""
                log.warning(
                    f"{controller}: {self.settings.joint_states_topic} carries no (finite) velocities "
                    f"for its joints: stops brake from {jv.SOURCES[r['stop_velocity_source']]}{fallback}"
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

    def _unnamed_publishers(self, topic: str) -> bool:
        """A publisher on `topic` whose node DDS has not named yet (or none at all)."""
        infos = self.node.get_publishers_info_by_topic(topic)
        return not infos or any(i.node_name == UNKNOWN_NODE for i in infos)

    def _controller_listens(self, topic: str, controller: str | None) -> bool:
        """A subscriber on the command topic from a node named after the controller (as
        ros2_control names each controller's node); where no node of that name is on the graph
        (single-node drivers: sim_robot_node, a YAM driver), from any node that is not only a
        recorder: `ros2 topic echo` and `ros2 bag` nodes do not count. So a monitor that subscribes
        to every topic (a bridge, a logger) never stands in for a controller whose node is up but
        has not subscribed yet (a controller still being configured): a command sent then is lost.
        A subscriber whose node DDS has not named yet (the graph reports `_NODE_NAME_UNKNOWN_`
        until the node's discovery info arrives) counts as not yet seen: it may be a controller
        whose activity must be asked."""
        infos = self.node.get_subscriptions_info_by_topic(topic)
        names = [i.node_name for i in infos]
        if any(n == UNKNOWN_NODE for n in names):
            return False
        short = controller.strip("/").split("/")[-1] if controller else ""
        if short and short in names:
            return True
        if short and short in self.node.get_node_names():
            return False  # the controller's node is up: only its own subscription counts
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
        from diagnostic_msgs.msg import DiagnosticArray  # optional: rclpy

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
