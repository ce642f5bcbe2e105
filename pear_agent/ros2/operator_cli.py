"""`pear-agent ros ...`: an operator's commands for a running graph, without the ros2 CLI (a PyPI
install has none).

    pear-agent ros instruct "Put the red block on the white line."
    pear-agent ros judge yes          # waits for the agent's "success?" and answers it
    pear-agent ros home yes           # the same for "move both arms to the home pose now?"
    pear-agent ros approve            # arm_mode step: let the motion shown go
    pear-agent ros reject "too fast"  # ... or not: the model is told why (no reason: "no reason given")
    pear-agent ros stop               # the e-stop: agent and drivers hold and latch
    pear-agent ros release            # every yam_driver_node's ~/release_estop
    pear-agent ros health             # topics, rates, ages, controllers, drivers, latches
    pear-agent ros status [--follow]  # the agent's status, as it publishes it
    pear-agent ros protocol pear_real # the PEAR paper's 30 real-robot trials, one per agent run
    pear-agent ros replay runs/<run>/episode.jsonl   # a robot episode again in its twin (no ROS)

Topic and service names are agent_node's defaults, or those of the agent file given with
`--params-file` (the file the agent was started with). Each command is a short-lived node on the
current ROS_DOMAIN_ID; rclpy is imported only when one runs. Exit codes: 0 done, 1 not done (nobody
listening, an answer refused, an unhealthy graph), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from pear_agent.ros2.health import check_health
from pear_agent.ros2.protocol_cli import add_protocol_parser
from pear_agent.ros2.ros_session import (
    DISCOVERY_GRACE_S,
    UNKNOWN,
    AgentStatus,
    DriverStatus,
    Session,
    agent_params,
    describe_event,
    domain,
    wait_until,
)

ANSWERS = {"yes": True, "y": True, "no": False, "n": False}
AGENT_DISCOVERY_S = 10.0
"""`judge` and `home` take it that no agent runs when none is found this long."""
STOP_REPEAT_S = 0.1
"""`stop` sends `true` again this often until every listener has confirmed ..."""
STOP_MIN_S = DISCOVERY_GRACE_S
"""... and for at least this long: a listener this command's node has not discovered yet cannot be
waited for by name."""


def _say(command: str, text: str) -> None:
    print(f"pear-agent ros {command}: {text}", file=sys.stderr, flush=True)


# -- instruct ---------------------------------------------------------------------------------
def cmd_instruct(args: argparse.Namespace) -> int:
    from rclpy.duration import Duration  # optional: rclpy
    from std_msgs.msg import String  # optional: rclpy

    p = agent_params(args.params_file)
    topic = p["instruction_topic"]
    with Session("instruct") as s:
        status = AgentStatus(s, p["status_topic"])
        pub = s.node.create_publisher(String, topic, s.reliable_qos())
        if not wait_until(lambda: pub.get_subscription_count() > 0, 1.0):
            _say("instruct", f"waiting for an agent to listen on {topic} (ROS_DOMAIN_ID={domain()}) ...")
        if not wait_until(lambda: pub.get_subscription_count() > 0, args.timeout_s):
            _say(
                "instruct",
                f"no agent listened on {topic} within {args.timeout_s:g} s (ROS_DOMAIN_ID={domain()}): is "
                "agent_node running, past its stack check, with an empty `instruction` parameter?",
            )
            return 1
        listeners = s.subscribers(topic)
        pub.publish(String(data=args.text))
        if not pub.wait_for_all_acked(Duration(seconds=5)):
            _say("instruct", f"the instruction was sent on {topic} but not acknowledged within 5 s")
            return 1
        started = wait_until(
            lambda: next(
                (
                    e
                    for e in status.snapshot()
                    if (e.get("event") == "start" and e.get("instruction") == args.text)
                    or e.get("event") == "done"
                ),
                None,
            ),
            args.confirm_s,
        )
    if not started:
        print(f"sent to {', '.join(listeners) or topic}; the agent has not announced a start yet")
        return 0
    print(describe_event(started))
    return 0 if started.get("event") == "start" else 1


# -- judge / home -------------------------------------------------------------------------------
def _answer(args: argparse.Namespace, kind: str) -> int:
    from std_srvs.srv import SetBool  # optional: rclpy

    command = "judge" if kind == "success" else "home"
    value = ANSWERS[args.answer]
    p = agent_params(args.params_file)
    service = p["operator_service"]
    topic = p["status_topic"]
    with Session(command) as s:
        status = AgentStatus(s, topic)
        find_s = min(AGENT_DISCOVERY_S, args.timeout_s)
        if not wait_until(lambda: s.publishers(topic) or status.snapshot(), find_s):
            _say(
                command,
                f"no agent is running: nothing publishes on {topic} within {find_s:g} s "
                f"(ROS_DOMAIN_ID={domain()})",
            )
            return 1
        if not status.open_question(kind):
            _say(command, f"waiting for the agent's {kind} question on {topic} ...")

        def asked() -> dict[str, Any] | None:  # the open question, or how the agent ended without one
            question = status.open_question(kind) or status.last("done")
            if question is None and not s.publishers(topic):
                return {"event": "gone"}
            return question

        question = wait_until(asked, args.timeout_s, 0.05)
        if question and question.get("event") == "gone":
            _say(command, f"the agent exited without asking (ROS_DOMAIN_ID={domain()})")
            return 1
        if question and question.get("event") == "done":
            _say(command, f"no {kind} question is open: the episode is over ({describe_event(question)})")
            return 1
        if not question:
            _say(
                command,
                f"no {kind} question was open within {args.timeout_s:g} s (ROS_DOMAIN_ID={domain()}); "
                "`pear-agent ros status` shows what the agent is doing",
            )
            return 1
        client = s.node.create_client(SetBool, service)
        if not client.wait_for_service(timeout_sec=10.0):
            _say(command, f"the agent's {service} service did not appear within 10 s")
            return 1
        deadline = time.monotonic() + 20.0
        while time.monotonic() < deadline:
            future = client.call_async(SetBool.Request(data=value))
            if not wait_until(future.done, 3.0):
                client.remove_pending_request(future)  # a reply lost while DDS matched: ask again
                continue
            reply = future.result()
            if reply.success:
                print(reply.message)
                return 0
            answered = status.last("answer")  # our lost first call may have been the answer
            if answered and answered.get("kind") == kind and service in str(answered.get("by")):
                print(f"answered {args.answer} to: {question.get('question')}")
                return 0
            _say(command, f"refused: {reply.message}")
            return 1
        _say(command, f"the agent did not reply on {service} within 20 s")
        return 1


def cmd_judge(args: argparse.Namespace) -> int:
    return _answer(args, "success")


def cmd_home(args: argparse.Namespace) -> int:
    return _answer(args, "home")


# -- approve / reject (step mode) -----------------------------------------------------------------
def _step_answer(args: argparse.Namespace, answer: bool) -> int:
    """Wait for the agent's open step question, send the answer (and reason) as JSON on its answer
    topic, and wait for the agent to announce the answer: the operator learns whether it counted
    (an answer that comes after the step's timeout does not)."""
    from rclpy.duration import Duration  # optional: rclpy
    from std_msgs.msg import String  # optional: rclpy

    command = "approve" if answer else "reject"
    p = agent_params(args.params_file)
    topic, status_topic = p["operator_answer_topic"], p["status_topic"]
    with Session(command) as s:
        status = AgentStatus(s, status_topic)
        find_s = min(AGENT_DISCOVERY_S, args.timeout_s)
        if not wait_until(lambda: s.publishers(status_topic) or status.snapshot(), find_s):
            _say(command, f"no agent is running: nothing publishes on {status_topic} within {find_s:g} s")
            return 1
        if not status.open_question("step"):
            _say(command, f"waiting for the agent to show its next motion on {status_topic} ...")
        question = wait_until(
            lambda: status.open_question("step") or status.last("done"), args.timeout_s, 0.05
        )
        if not question or question.get("event") == "done":
            why = "the episode is over" if question else f"none within {args.timeout_s:g} s"
            _say(command, f"no motion waits for approval: {why} (is the agent's arm_mode step?)")
            return 1
        asked = len(status.snapshot())
        pub = s.node.create_publisher(String, topic, s.reliable_qos())
        if not wait_until(lambda: pub.get_subscription_count() > 0, 10.0):
            _say(command, f"the agent does not listen on {topic} (its operator_answer_topic?)")
            return 1
        reason = " ".join(args.reason) if not answer else ""
        pub.publish(String(data=json.dumps({"kind": "step", "answer": answer, "reason": reason})))
        pub.wait_for_all_acked(Duration(seconds=5))

        def closed() -> dict[str, Any] | None:
            later = status.snapshot()[asked - 1 :]
            return next((e for e in later if e.get("event") in ("answer", "done")), None)

        got = wait_until(closed, 20.0, 0.05)
    if got and got.get("event") == "answer" and topic in str(got.get("by")):
        print(f"{'approved' if answer else 'rejected'}: {question.get('question')}")
        return 0
    said = describe_event(got) if got else "no answer announced within 20 s"
    _say(command, f"the answer did not count: {said}")
    return 1


def cmd_approve(args: argparse.Namespace) -> int:
    return _step_answer(args, True)


def cmd_reject(args: argparse.Namespace) -> int:
    return _step_answer(args, False)


# -- stop / release -----------------------------------------------------------------------------
def cmd_stop(args: argparse.Namespace) -> int:
    """`true` on the e-stop topic as soon as a listener has matched, again every STOP_REPEAT_S (a
    latch is idempotent) for at least STOP_MIN_S, and the agent's e-stop service, until each listener
    has confirmed: every driver's status says `estop`, the agent answered or published `done`.
    Nothing is taken as heard from the graph alone; `--timeout-s` bounds it."""
    from std_msgs.msg import Bool  # optional: rclpy
    from std_srvs.srv import Trigger  # optional: rclpy

    p = agent_params(args.params_file)
    topic = p["estop_topic"]
    with Session("stop") as s:
        drivers = DriverStatus(s, p)
        status = AgentStatus(s, p["status_topic"])
        pub = s.node.create_publisher(Bool, topic, s.reliable_qos())
        agent_srv = s.node.create_client(Trigger, p["estop_service"])
        heard: list[str] = []  # every listener seen while sending (a stopped agent exits at once)
        calls: list[Any] = []
        last_send = last_call = 0.0
        t0 = time.monotonic()

        def agent_done() -> str | None:
            for call in calls:
                if call.done() and call.result() is not None:
                    return f"agent ({p['estop_service']}): {call.result().message}"
            done = status.last("done")
            return f"agent: {describe_event(done)}" if done else None

        def drivers_latched() -> bool:  # every driver found said so (a ros2_control stack has none)
            states = drivers.snapshot()
            return drivers.settled(t0) and all(
                st.get("state") in ("estop", "fault") for st in states.values()
            )

        def agent_running() -> bool:
            return bool(s.publishers(p["status_topic"])) or agent_srv.service_is_ready()

        while time.monotonic() - t0 < args.timeout_s:
            now = time.monotonic()
            if pub.get_subscription_count() > 0 and now - last_send >= STOP_REPEAT_S:
                pub.publish(Bool(data=True))
                last_send = now
            if agent_srv.service_is_ready() and now - last_call >= 5 * STOP_REPEAT_S and not agent_done():
                calls.append(agent_srv.call_async(Trigger.Request()))
                last_call = now
            heard += [x for x in s.subscribers(topic) if x not in heard and x != UNKNOWN]
            sent = last_send > 0 or last_call > 0
            agent_ok = agent_done() is not None or not agent_running()
            if sent and drivers_latched() and agent_ok and now - t0 >= STOP_MIN_S:
                break
            time.sleep(0.01)
        if not (last_send or last_call):
            _say(
                "stop",
                f"nobody listens on {topic} (ROS_DOMAIN_ID={domain()}): no agent or driver is running here. "
                "The robot's own e-stop button is the hardware stop.",
            )
            return 1
        print(f"e-stop sent on {topic} to {', '.join(heard) or 'nobody'}")
        confirmed = agent_done()
        if confirmed:
            print(confirmed)
        elif agent_running():
            print(f"agent: no confirmation within {args.timeout_s:g} s (`pear-agent ros status` shows it)")
        states = drivers.snapshot()
        for part, st in sorted(states.items()):
            print(f"{part} driver: {st.get('state')}" + (f" ({st.get('estop')})" if st.get("estop") else ""))
        unconfirmed = (agent_running() and not confirmed) or (states and not drivers_latched())
    print("the agent ends its episode (stopped); the drivers stay latched until `pear-agent ros release`")
    return 1 if unconfirmed else 0


def _release_services(s: Session) -> list[str]:
    return sorted(
        name
        for name, types in s.node.get_service_names_and_types()
        if name.endswith("/release_estop") and "std_srvs/srv/Trigger" in types
    )


def cmd_release(args: argparse.Namespace) -> int:
    """Every driver's `~/release_estop`: the drivers are found by their status topics (one per
    part), their services by name, each waited for up to `--timeout-s`."""
    from std_srvs.srv import Trigger  # optional: rclpy

    p = agent_params(args.params_file)
    with Session("release") as s:
        drivers = DriverStatus(s, p)
        t0 = time.monotonic()
        wait_until(
            lambda: drivers.settled(t0) and len(drivers.nodes()) >= len(drivers.snapshot()), args.timeout_s
        )
        nodes = drivers.nodes()
        services = {part: f"/{node}/release_estop" for part, node in nodes.items()}
        wait_until(lambda: set(services.values()) <= set(_release_services(s)), args.timeout_s)
        services |= {f"other {x}": x for x in _release_services(s) if x not in services.values()}
        if not services:
            _say(
                "release",
                f"no driver found (ROS_DOMAIN_ID={domain()}): are the yam_driver_node processes running? "
                "(a ros2_control stack has no latch to release)",
            )
            return 1
        failed = sorted(set(drivers.snapshot()) - set(nodes))
        for part in failed:
            print(f"{part} driver: its node was not found by name within {args.timeout_s:g} s")
        for service in services.values():
            client = s.node.create_client(Trigger, service)
            reply = None
            if client.wait_for_service(timeout_sec=args.timeout_s):
                for _ in range(3):
                    future = client.call_async(Trigger.Request())
                    if wait_until(future.done, 3.0):
                        reply = future.result()
                        break
                    client.remove_pending_request(future)  # a reply lost while DDS matched: ask again
            node = service.rsplit("/", 1)[0].lstrip("/")
            if reply is None:
                failed.append(node)
                print(f"{node}: no reply from {service}")
            else:
                print(f"{node}: {reply.message}")
    print("a stopped agent stays stopped: start a new agent_node for the next episode")
    return 1 if failed else 0


# -- status -------------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace) -> int:
    p = agent_params(args.params_file)
    topic = p["status_topic"]
    with Session("status") as s:
        status = AgentStatus(s, topic)
        if not wait_until(
            lambda: s.publishers(topic), args.timeout_s if args.follow else min(args.timeout_s, 5.0)
        ):
            _say(
                "status", f"no agent publishes on {topic} (ROS_DOMAIN_ID={domain()}): is agent_node running?"
            )
            return 1
        shown = 0
        wait_until(lambda: status.snapshot(), 2.0)
        time.sleep(0.3)  # the rest of the history
        deadline = time.monotonic() + args.timeout_s
        while True:
            events = status.snapshot()
            for e in events[shown:]:
                print(json.dumps(e) if args.json else describe_event(e), flush=True)
            shown = len(events)
            if not args.follow or any(e.get("event") == "done" for e in events):
                break
            if time.monotonic() > deadline:
                _say("status", f"no `done` within {args.timeout_s:g} s")
                return 1
            time.sleep(0.1)
    if not shown:
        _say("status", f"the agent on {topic} has published nothing yet")
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """The episode again in its simulated twin, and the real and twin outcomes side by side."""
    from pear_agent.ros2.twin_replay import REPORT_NAME, replay_in_twin  # heavy: mujoco

    try:
        run_dir, rows = replay_in_twin(Path(args.episode), args.twin_task, Path(args.runs_dir), args.view)
    except ValueError as exc:
        _say("replay", str(exc))
        return 1
    print(f"{'turn':>4}  {'real':<10} {'twin':<10} reply")
    for r in rows:
        reply = " ".join(str(r["reply"]).split())
        if '{"action"' in reply:  # the action, not the model's text before it
            reply = reply[reply.find('{"action"') :]
        real, twin = r["real"]["status"] or "-", r["twin"]["status"] or "-"
        print(f"{r['turn']:>4}  {real:<10} {twin:<10} {reply[:120]}")
    same = sum(r["same"] for r in rows)
    print(f"{same} of {len(rows)} turns ended the same; twin run folder {run_dir} ({REPORT_NAME})")
    return 0


def cmd_health(args: argparse.Namespace) -> int:
    return check_health(agent_params(args.params_file), args.window_s, args.wait_s, args.timeout_s)


# -- the parser ---------------------------------------------------------------------------------
def add_parser(sub: Any) -> None:
    """`pear-agent ros ...` under the top-level subparsers."""
    ros = sub.add_parser(
        "ros",
        help="operate a running ROS 2 graph without the ros2 CLI: instruct, judge, stop, release, health...",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cmds = ros.add_subparsers(dest="ros_command", required=True)

    def common(p: argparse.ArgumentParser, timeout_s: float | None) -> None:
        p.add_argument(
            "--params-file",
            default=None,
            help="the agent's parameter file: topic and service names, robot, cameras (default: the node's)",
        )
        if timeout_s is not None:
            p.add_argument(
                "--timeout-s", type=float, default=timeout_s, help=f"how long to wait (default {timeout_s:g})"
            )

    c = cmds.add_parser("instruct", help="send the instruction an agent waits for (std_msgs/String)")
    c.add_argument("text")
    c.add_argument("--confirm-s", type=float, default=30.0, help="wait this long for the agent's start")
    common(c, 120.0)
    c.set_defaults(func=cmd_instruct)
    for name, kind, fn in (("judge", "success", cmd_judge), ("home", "home move", cmd_home)):
        c = cmds.add_parser(name, help=f"answer the agent's {kind} question when it asks (std_srvs/SetBool)")
        c.add_argument("answer", choices=sorted(ANSWERS))
        common(c, 300.0)
        c.set_defaults(func=fn)
    c = cmds.add_parser("approve", help="arm_mode step: let the motion the agent shows go")
    common(c, 300.0)
    c.set_defaults(func=cmd_approve)
    c = cmds.add_parser("reject", help="arm_mode step: refuse the motion shown; the model gets the reason")
    c.add_argument("reason", nargs="*", help="why (the model reads it as the turn's outcome)")
    common(c, 300.0)
    c.set_defaults(func=cmd_reject)
    c = cmds.add_parser(
        "stop", help="e-stop: true on the e-stop topic (the agent and the drivers hold and latch)"
    )
    common(c, 5.0)
    c.set_defaults(func=cmd_stop)
    c = cmds.add_parser("release", help="release every yam_driver_node's e-stop latch (~/release_estop)")
    common(c, 10.0)
    c.set_defaults(func=cmd_release)
    c = cmds.add_parser(
        "health", help="joint states, controllers, cameras, drivers and the agent, in one table"
    )
    c.add_argument("--window-s", type=float, default=2.0, help="listen this long to measure rates")
    c.add_argument(
        "--wait-s", type=float, default=0.0, help="measure again until nothing fails, for up to this long"
    )
    common(c, 10.0)  # how long to wait to hear every joint, camera and driver
    c.set_defaults(func=cmd_health)

    add_protocol_parser(cmds, common)  # `pear-agent ros protocol pear_real`
    c = cmds.add_parser("replay", help="replay a robot episode's replies in its simulated twin (no ROS)")
    c.add_argument("episode", help="the robot episode's episode.jsonl")
    c.add_argument("--twin-task", default="bimanual_pickup", help="the MuJoCo scene of the twin")
    c.add_argument("--runs-dir", default="runs", help="the twin's run folder goes here")
    c.add_argument("--view", action="store_true", help="also write episode.rrd (the view extra)")
    c.set_defaults(func=cmd_replay)
    c = cmds.add_parser("status", help="echo the agent's status events")
    c.add_argument("--follow", action="store_true", help="keep printing until the episode is done")
    c.add_argument("--json", action="store_true", help="one JSON object per event")
    common(c, 600.0)
    c.set_defaults(func=cmd_status)
