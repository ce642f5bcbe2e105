"""Action chunks: the scripted expert at K = 1, 2, 4, 8 steps per reply on every MuJoCo
task (one-arm tasks on the panda, two-arm tasks on the YAM pair), on the same seeds.

    PEAR_BENCH_TAG=issue29 nice -n 10 .venv/bin/python benchmarks/chunk_turns.py --seeds 5

Per (task, K): successes, turns (mean over all episodes and over the successful ones), model calls
(replies asked for: one per turn), steps actually sent per reply, simulated time, and the check
"success at K=4 >= at K=1 and fewer turns per success". Paused mode, no rendering.
"""

from __future__ import annotations

import argparse
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
from _common import emit, machine

from pear_agent.loop.arm_environment import arm_episode
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import arm_tasks, make_backend
from pear_agent.loop.task_experts import scripted_policy
from pear_agent.robot.kinematics import Kinematics
from pear_agent.robot.loader import load_robot

TASKS = arm_tasks()
MUJOCO_TASKS = [t for t, e in TASKS.items() if e.backend == "mujoco"]


def run_cell(task: str, k: int, seeds: list[int]) -> dict[str, Any]:
    robot = load_robot(TASKS[task].default_robot)
    kin = Kinematics(robot)
    backend = make_backend(task, robot, render=False)
    episodes = []
    try:
        for seed in seeds:
            ep = arm_episode(backend, kin, scripted_policy(task), EpisodeConfig(max_chunk=k))
            res = ep.run(seed)
            steps = []
            for m in ep.messages:
                if m["role"] == "assistant":
                    steps.append(len(ep.env.parse(m["content"]).chunk))
            episodes.append(
                {
                    "seed": seed,
                    "success": res.success,
                    "turns": res.turns,
                    "model_calls": len(res.latencies_s) + len(res.failed_latencies_s),
                    "sim_time_s": round(res.sim_time_s, 3),
                    "end_reason": res.end_reason,
                    "steps_per_reply": steps,
                }
            )
    finally:
        backend.close()
    ok = [e for e in episodes if e["success"]]
    return {
        "task": task,
        "robot": robot.name,
        "max_chunk": k,
        "seeds": seeds,
        "successes": len(ok),
        "mean_turns": float(np.mean([e["turns"] for e in episodes])),
        "mean_turns_success": float(np.mean([e["turns"] for e in ok])) if ok else None,
        "mean_model_calls": float(np.mean([e["model_calls"] for e in episodes])),
        "mean_sim_time_s": float(np.mean([e["sim_time_s"] for e in episodes])),
        "mean_sim_time_success_s": float(np.mean([e["sim_time_s"] for e in ok])) if ok else None,
        "mean_steps_per_reply": float(np.mean([s for e in episodes for s in e["steps_per_reply"]])),
        "episodes": episodes,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=",".join(MUJOCO_TASKS))
    ap.add_argument("--chunks", default="1,2,4,8")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1")
    args = ap.parse_args()
    seeds = list(range(args.seeds))
    ks = [int(k) for k in args.chunks.split(",")]
    cells = [run_cell(task, k, seeds) for task in args.tasks.split(",") for k in ks]
    checks = {}
    for task in args.tasks.split(","):
        by_k = {c["max_chunk"]: c for c in cells if c["task"] == task}
        if 1 in by_k and 4 in by_k:
            a, b = by_k[1], by_k[4]
            fewer = (
                a["mean_turns_success"] is not None
                and b["mean_turns_success"] is not None
                and b["mean_turns_success"] < a["mean_turns_success"]
            )
            checks[task] = {"success_k4_ge_k1": b["successes"] >= a["successes"], "turns_down": fewer}
    rows = [
        (
            c["task"],
            c["robot"],
            c["max_chunk"],
            f"{c['successes']}/{len(c['seeds'])}",
            round(c["mean_turns"], 1),
            "-" if c["mean_turns_success"] is None else round(c["mean_turns_success"], 1),
            round(c["mean_model_calls"], 1),
            round(c["mean_steps_per_reply"], 2),
            round(c["mean_sim_time_s"], 1),
        )
        for c in cells
    ]
    header = ("task", "robot", "K", "success", "turns", "turns|ok", "model calls", "steps/reply", "sim s")
    emit("chunk_turns", {"machine": machine(), "cells": cells, "checks": checks}, rows, header)


if __name__ == "__main__":
    main()
