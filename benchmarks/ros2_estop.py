"""ROS 2 e-stop: from `true` published on /pear/estop to the stop received by each
controller of a strict joint_trajectory_controller stand-in (tests/ros2/jtc_double.py, its own
process, joint states at 100 Hz), while agent_node (its own process) moves the left arm; and where
the stop ends: its rest point must lie ahead of the arm (along its motion) when the stop arrived,
never back (a braking trajectory, not a hold at an older pose). All three processes
stamp with the system-wide monotonic clock.

    .venv/bin/python benchmarks/ros2_estop.py [--runs 5] [--joint-state-velocity none]

`--joint-state-velocity none|nan`: the stand-in publishes joint states without velocities.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, stats_ms, verdict

TARGET_LATENCY_MS = 20.0
TARGET_BACK_RAD = 0.001
"""the stop's rest point may lie at most this far behind the arm's position when it arrived"""


def one_run(workdir: Path, robot: Any, velocity: str = "measured") -> dict[str, Any]:
    import numpy as np

    from tests.ros2.conftest import DoubleProcess, NodeProcess, Probe, double_config

    probe = Probe()
    replay = workdir / "replay.jsonl"
    reply = json.dumps({"action": {"left_arm": {"move_cm": [0.0, 0.0, -8.0]}}})
    replay.write_text(json.dumps({"kind": "turn", "turn": 1, "reply": reply, "outcome": "reached"}) + "\n")
    params = {
        "policy": "replay",
        "replay_path": str(replay),
        "instruction": "down",
        "task": "bench",
        "max_turns": 1,
        "operator_terminal": False,
        "wait_for_joint_states_s": 30.0,  # the stand-in starts after the e-stop has matched
        "runs_dir": str(workdir / "runs"),
    }
    # the agent first (it waits for joint states); the stand-in stack once DDS has matched the
    # probe's e-stop publisher with the agent's subscription, as a robot's e-stop publisher would be
    agent = NodeProcess("pear_agent.ros2.agent_node", "pear_agent", params, workdir)
    double = None
    try:
        deadline = time.monotonic() + 60
        while probe.estop_pub.get_subscription_count() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        double = DoubleProcess(double_config(robot, joint_state_velocity=velocity), workdir)
        move = None
        while move is None and time.monotonic() < deadline:
            move = next((e for e in double.trajectories("left_arm_controller") if e["points"] > 1), None)
            time.sleep(0.005)
        if move is None:
            raise RuntimeError(f"no move reached the double:\n{agent.log()}")
        if probe.estop_pub.get_subscription_count() < 1:
            raise RuntimeError("the agent's e-stop subscription has not matched")
        time.sleep(max(0.0, move["t"] + 0.3 * move["duration_s"] - time.monotonic()))
        t_stop = time.monotonic()
        probe.estop_topic()
        code = agent.wait(30)
        time.sleep(0.5)
        holds = {}
        for controller in double_config(robot)["controllers"]:
            after = [e for e in double.trajectories(controller) if e["t"] > t_stop]
            holds[controller] = after[0] if after else None
        left = holds["left_arm_controller"]
        direction = np.sign(np.array(move["last"]) - np.array(move["actual"]))
        back = (
            float(np.max((np.array(left["actual"]) - np.array(left["last"])) * direction))
            if left
            else float("nan")
        )
        return {
            "exit_code": code,
            "latency_s": {c: (h["t"] - t_stop if h else None) for c, h in holds.items()},
            "accepted": all(h is not None and h["accepted"] for h in holds.values()),
            "back_rad": back,
            "after_hold": sum(len([e for e in double.trajectories(c) if e["t"] > t_stop]) - 1 for c in holds),
        }
    finally:
        probe.close()
        agent.stop()
        if double is not None:
            double.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--joint-state-velocity", choices=["measured", "none", "nan"], default="measured")
    args = ap.parse_args()
    os.environ.setdefault("ROS_DOMAIN_ID", str(random.randint(101, 200)))
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from pear_agent.robot.loader import load_robot

    robot = load_robot("yam_bimanual")
    runs = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix=f"pear_estop_{i}_") as d:
            runs.append(one_run(Path(d), robot, args.joint_state_velocity))
    latencies = [v for r in runs for v in r["latency_s"].values() if v is not None]
    missing = sum(v is None for r in runs for v in r["latency_s"].values())
    lat = stats_ms(latencies)
    back = [r["back_rad"] for r in runs]
    ok = (
        missing == 0
        and lat.get("max_ms", 1e9) <= TARGET_LATENCY_MS
        and max(back) <= TARGET_BACK_RAD
        and all(r["accepted"] and r["after_hold"] == 0 and r["exit_code"] == 3 for r in runs)
    )
    result = {
        "runs": args.runs,
        "joint_state_velocity": args.joint_state_velocity,
        "hold_latency": lat,
        "holds_missing": missing,
        "rest_point_behind_the_arm_rad_max": max(back),
        "all_accepted_and_latched": all(r["accepted"] and r["after_hold"] == 0 for r in runs),
        "exit_codes": [r["exit_code"] for r in runs],
        "targets": {"latency_max_ms": TARGET_LATENCY_MS, "rest_point_back_rad": TARGET_BACK_RAD},
        "verdict": verdict(ok),
        "machine": machine(),
    }
    rows = [
        ["e-stop -> stop at each controller (4 per run)", f"median {lat.get('median_ms', 0):.2f} ms",
         f"max {lat.get('max_ms', 0):.2f} ms", f"<= {TARGET_LATENCY_MS:g} ms"],
        ["stop's rest point behind the arm (left)", f"median {sorted(back)[len(back) // 2]:+.4f} rad",
         f"max {max(back):+.4f} rad", f"<= {TARGET_BACK_RAD} rad"],
        ["stops accepted, nothing after them", str(result["all_accepted_and_latched"]), "", ""],
        ["verdict", result["verdict"], "", ""],
    ]  # fmt: skip
    name = (
        "ros2_estop"
        if args.joint_state_velocity == "measured"
        else f"ros2_estop_{args.joint_state_velocity}_velocity"
    )
    emit(name, result, rows, ["measure", "typical", "worst", "target"])
    sys.exit(0)


if __name__ == "__main__":
    main()
