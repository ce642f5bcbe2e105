"""ROS 2 command latency (measure 6): from a model reply in hand (parse, safety clip, IK, build a
trajectory_msgs/JointTrajectory, publish) to the message received by a subscriber in another
process, over DDS (Fast DDS, localhost only, a random domain id). Both processes stamp with the
system-wide monotonic clock, so the one-way time is measured directly.

    .venv/bin/python benchmarks/ros2_latency.py [--messages 300] [--rate-hz 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, stats_ms, verdict

TARGET_P95_MS = 5.0
TOPIC = "/pear_bench/joint_trajectory"


def _qos() -> Any:
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)


def subscriber(n: int, timeout_s: float) -> None:
    """Child process: print `ready`, then one JSON line {id: arrival ns} once n arrived or timeout."""
    import rclpy
    from trajectory_msgs.msg import JointTrajectory

    rclpy.init()
    node = rclpy.create_node("pear_bench_sub")
    arrivals: dict[str, int] = {}

    def on_msg(msg: JointTrajectory) -> None:
        arrivals[msg.header.frame_id] = time.monotonic_ns()

    node.create_subscription(JointTrajectory, TOPIC, on_msg, _qos())
    print("ready", flush=True)
    end = time.monotonic() + timeout_s
    while len(arrivals) < n and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    print(json.dumps(arrivals), flush=True)
    node.destroy_node()
    rclpy.shutdown()


def _builder() -> tuple[Any, str]:
    """The runtime's own trajectory path (`pear_agent.ros2.conversions`: a ruckig time-optimal,
    jerk-limited plan sampled every 50 ms, filled into the message) when it is there, else a
    one-point message."""
    from builtin_interfaces.msg import Duration
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    try:
        from pear_agent.ros2 import conversions as cv
    except ImportError:
        cv = None
    if cv is not None and hasattr(cv, "ruckig_plan") and hasattr(cv, "fill_trajectory"):

        def build_plan(names: list[str], q0: Any, q1: Any, vmax: float, lo: Any, hi: Any) -> Any:
            limits = cv.MoveLimits(vmax, 4.0, 40.0, lo, hi)  # agent_node's default limits
            plan = cv.ruckig_plan(names, q0, q1, limits)
            return cv.fill_trajectory(JointTrajectory(), plan, JointTrajectoryPoint, Duration)

        return build_plan, "pear_agent.ros2.conversions.ruckig_plan + fill_trajectory"

    def build_one(names: list[str], q0: Any, q1: Any, vmax: float, lo: Any, hi: Any) -> Any:
        duration_s = max(0.1, 1.875 * float(max(abs(a - b) for a, b in zip(q1, q0, strict=True))) / vmax)
        msg = JointTrajectory()
        msg.joint_names = list(names)
        pt = JointTrajectoryPoint()
        pt.positions = [float(v) for v in q1]
        ns = round(duration_s * 1e9)
        pt.time_from_start = Duration(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
        msg.points = [pt]
        return msg

    return build_one, "one-point message built in the benchmark (no pear_agent.ros2.conversions)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--rate-hz", type=float, default=20.0, help="commands per second (a turn rate)")
    ap.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()
    if args.subscriber:
        subscriber(args.messages, args.timeout)
        return

    import numpy as np
    import rclpy
    from trajectory_msgs.msg import JointTrajectory

    from pear_agent.loop.safety import clip_target
    from pear_agent.protocol.actions import parse_reply
    from pear_agent.protocol.state import PartPose
    from pear_agent.robot.kinematics import Kinematics, rpy_to_matrix
    from pear_agent.robot.loader import load_robot

    env = dict(os.environ)  # the ROS wheels' .pth re-execs with LD_LIBRARY_PATH: pass it on
    env.setdefault("ROS_DOMAIN_ID", str(random.randint(1, 200)))
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.update({k: env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
    child = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--subscriber",
            "--messages",
            str(args.messages),
            "--timeout",
            str(args.timeout),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        robot = load_robot("panda")
        kin = Kinematics(robot)
        part = robot.parts["arm"]
        build, how = _builder()
        rclpy.init()
        node = rclpy.create_node("pear_bench_pub")
        pub = node.create_publisher(JointTrajectory, TOPIC, _qos())
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("ros2_latency: the subscriber process did not start")
        end = time.monotonic() + 20
        while pub.get_subscription_count() < 1 and time.monotonic() < end:
            time.sleep(0.01)
        if pub.get_subscription_count() < 1:
            raise SystemExit("ros2_latency: the subscriber was not discovered within 20 s")
        time.sleep(0.5)  # let the reliable writer/reader match settle
        q = np.array(part.home.joints_rad)
        pose = kin.fk("arm", q)
        current = PartPose(pose.position_m * 100, pose.rpy, 1.0, pose)
        rng = np.random.default_rng(0)
        sent: dict[str, int] = {}
        build_s: list[float] = []
        pieces: dict[str, list[float]] = {"parse_clip_ik": [], "build_message": [], "publish": []}
        period = 1.0 / args.rate_hz
        for i in range(args.messages):
            d = rng.uniform(-1.5, 1.5, 3).round(2).tolist()
            reply = f'I move a little.\n```json\n{{"action": {{"arm": {{"move_cm": {json.dumps(d)}}}}}}}\n```'
            t0 = time.monotonic_ns()
            action = parse_reply(reply, robot)
            tgt = clip_target("arm", part, current, action.parts["arm"])
            res = kin.ik("arm", tgt.position_cm / 100, rpy_to_matrix(tgt.orientation_rad), q)
            t1 = time.monotonic_ns()
            lo, hi = kin.joint_limits("arm")
            msg = build(part.joints, q, res.joints_rad, part.limits.joint_velocity_rad_s, lo, hi)
            msg.header.frame_id = str(i)
            t2 = time.monotonic_ns()
            pub.publish(msg)
            t3 = time.monotonic_ns()
            sent[str(i)] = t0
            build_s.append((t3 - t0) / 1e9)
            pieces["parse_clip_ik"].append((t1 - t0) / 1e9)
            pieces["build_message"].append((t2 - t1) / 1e9)
            pieces["publish"].append((t3 - t2) / 1e9)
            time.sleep(period)
        out_line = child.communicate(timeout=args.timeout + 10)[0].strip().splitlines()[-1]
        node.destroy_node()
        rclpy.shutdown()
    finally:
        if child.poll() is None:
            child.kill()
    arrivals = json.loads(out_line)
    lat = [(arrivals[k] - t0) / 1e9 for k, t0 in sent.items() if k in arrivals]
    st = stats_ms(lat)
    out = {
        "machine": machine(),
        "trajectory_builder": how,
        "rmw": os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp (default)"),
        "sent": len(sent),
        "received": len(lat),
        "reply_to_received": st,
        "reply_to_published": stats_ms(build_s),
        "pieces": {k: stats_ms(v) for k, v in pieces.items()},
        "target": "reply parsed -> JointTrajectory received in another process: p95 <= 5 ms",
        "pass": bool(lat) and len(lat) == len(sent) and st["p95_ms"] <= TARGET_P95_MS,
    }
    keys = ("median_ms", "p95_ms", "max_ms")
    rows = [
        *[(f"  {k}", *[v[x] for x in keys]) for k, v in out["pieces"].items()],
        ("parse + clip + IK + build + publish", *[out["reply_to_published"][k] for k in keys]),
        ("... + received by the subscriber", *[st.get(k, "") for k in keys]),
        ("received / sent", f"{len(lat)}/{len(sent)}", "", verdict(out["pass"])),
    ]
    emit("ros2_latency", out, rows, ("span", "median ms", "p95 ms", "max ms"))


if __name__ == "__main__":
    main()
