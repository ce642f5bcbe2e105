"""Scripted experts per robot and task: success rate, turns to success, and whether any reply asked
for more than the robot's per-turn caps (a reply the safety clip would shorten is bad SFT data).

    .venv/bin/python benchmarks/expert_success.py [--robots panda,ur5e] [--tasks pick_cube] [--seeds 20]
    .venv/bin/python benchmarks/expert_success.py --robots panda,yam_bimanual --tasks objects --seeds 10

Every compatible task of each robot runs on seeds 0..N-1 without rendering. Per cell: successes,
mean and median turns of the successful episodes, end reasons of the failures, the largest move
and turn any reply asked for against the caps, and replies over a cap.
"""

from __future__ import annotations

import argparse
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
from _common import emit, expand_tasks, machine

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.registry import arm_tasks, make_backend, task_entry
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.protocol.actions import parse_reply
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import list_robots, load_robot

MUJOCO_TASKS = [t for t, e in arm_tasks().items() if e.backend == "mujoco"]


def run_cell(robot_name: str, task: str, seeds: range) -> dict[str, Any] | None:
    robot = load_robot(robot_name)
    if task_entry(task).refusal(task, robot):  # `pick_up_object/<name>` too (not in arm_tasks())
        return None
    kin = Kinematics(robot)
    backend = make_backend(task, robot, render=False)
    turns_ok: list[int] = []
    failures: list[tuple[int, str]] = []
    max_move = max_turn = 0.0
    over_cap = replies = 0
    try:
        for seed in seeds:
            episode = arm_episode(backend, kin, scripted_policy(task))
            result = episode.run(seed)
            if result.success:
                turns_ok.append(result.turns)
            else:
                failures.append((seed, result.end_reason))
            for m in episode.messages:
                if m["role"] != "assistant":
                    continue
                replies += 1
                action = parse_reply(m["content"], robot)
                over = False
                for name, pa in action.parts.items():
                    lim = robot.parts[name].limits
                    move = float(np.linalg.norm(pa.position_cm)) if pa.position_cm else 0.0
                    rot = float(np.max(np.abs(pa.orientation_rad))) if pa.orientation_rad else 0.0
                    max_move, max_turn = max(max_move, move), max(max_turn, rot)
                    over |= move > lim.max_position_step_cm + 1e-6 or rot > lim.max_rotation_step_rad + 1e-6
                over_cap += over
    finally:
        backend.close()
    return {
        "robot": robot_name,
        "task": task,
        "seeds": len(seeds),
        "successes": len(turns_ok),
        "mean_turns": float(np.mean(turns_ok)) if turns_ok else None,
        "median_turns": float(np.median(turns_ok)) if turns_ok else None,
        "failures": failures,
        "replies": replies,
        "replies_over_cap": over_cap,
        "max_move_cm": round(max_move, 2),
        "max_turn_rad": round(max_turn, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", default=",".join(p.stem for p in list_robots()))
    ap.add_argument("--tasks", default=",".join(MUJOCO_TASKS))
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    cells = []
    for robot in args.robots.split(","):
        for task in expand_tasks(args.tasks):
            cell = run_cell(robot, task, range(args.seeds))
            if cell is not None:
                cells.append(cell)
    rows = [
        (
            c["robot"],
            c["task"],
            f"{c['successes']}/{c['seeds']}",
            "-" if c["mean_turns"] is None else round(c["mean_turns"], 1),
            "-" if c["median_turns"] is None else c["median_turns"],
            f"{c['replies_over_cap']}/{c['replies']}",
            c["max_move_cm"],
            c["max_turn_rad"],
            " ".join(f"{s}:{r}" for s, r in c["failures"]) or "-",
        )
        for c in cells
    ]
    header = ("robot", "task", "success", "mean turns", "median", "over cap", "max cm", "max rad", "failures")
    emit("expert_success", {"machine": machine(), "cells": cells}, rows, header)


if __name__ == "__main__":
    main()
