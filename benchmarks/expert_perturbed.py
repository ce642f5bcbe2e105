"""The scripted experts under small physics perturbations: does each task's success keep its
unperturbed level when the floats move a little?

    .venv/bin/python benchmarks/expert_perturbed.py [--robots panda,ur5e] [--tasks pick_cube] [--seeds 0-9]
    .venv/bin/python benchmarks/expert_perturbed.py --robots yam_bimanual --tasks place_in_bowl --seeds 0-39

Every compatible task of each robot runs twice on the same seeds, without rendering: as it is, and
as `TASK~physics` (`sim_adapters/mujoco/perturb.py`): the task's loose objects get their friction
and mass scaled by up to +-5% and their start position moved by up to 3 mm, drawn from the seed and
recorded per episode. A result that flips with the last bits of floating point (one CPU family
against another) flips here too. Per cell: successes unperturbed and perturbed, and the verdict
`perturbed >= unperturbed - 5 points`. Raw per-episode results (with each drawn perturbation) go
to benchmarks/results/ as every benchmark's do.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, expand_tasks, machine

from pear_agent.bench.runner import parse_seeds

PERTURBATION = "physics"
MARGIN_POINTS = 5.0
"""A cell passes when its perturbed success is at most this many points under the unperturbed one."""


def _episodes(job: tuple[str, str, list[int]]) -> list[dict[str, Any]]:
    """One robot and task (perturbed or not) over some seeds: a record per episode."""
    from pear_agent.loop.arm_environment import arm_episode
    from pear_agent.loop.registry import make_backend
    from pear_agent.loop.task_experts import scripted_policy
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    robot_name, task, seeds = job
    robot = load_robot(robot_name)
    kin = Kinematics(robot)
    backend = make_backend(task, robot, render=False)
    base = task.partition("~")[0]
    out = []
    try:
        for seed in seeds:
            t0 = time.perf_counter()
            episode = arm_episode(backend, kin, scripted_policy(base))
            result = episode.run(seed)
            out.append(
                {
                    "robot": robot_name,
                    "task": base,
                    "perturbed": task != base,
                    "seed": seed,
                    "success": bool(result.success),
                    "end_reason": result.end_reason,
                    "turns": result.turns,
                    "detail": result.detail if not result.success else "",
                    "perturbation": getattr(backend, "perturbation", None) if task != base else None,
                    "wall_s": round(time.perf_counter() - t0, 2),
                }
            )
    finally:
        backend.close()
    return out


def cells(robots: list[str], tasks: list[str]) -> list[tuple[str, str]]:
    """The (robot, task) pairs whose task the robot can do (the registry's own check)."""
    from pear_agent.loop.registry import task_entry
    from pear_agent.robot.loader import load_robot

    out = []
    for r in robots:
        robot = load_robot(r)
        out += [(r, t) for t in tasks if not task_entry(t).refusal(t, robot)]
    return out


def main() -> None:
    from pear_agent.loop.registry import arm_tasks
    from pear_agent.robot.loader import list_robots

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--robots", default=",".join(p.stem for p in list_robots()))
    ap.add_argument(
        "--tasks",
        default=",".join(t for t, e in arm_tasks().items() if e.backend == "mujoco"),
        help="comma-separated; `objects`: every pick_up_object/<name> (default: the MuJoCo tasks)",
    )
    ap.add_argument("--seeds", default="0-9", help="seeds, e.g. 0-9 or 0,3,5 (default 0-9)")
    ap.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    args = ap.parse_args()
    seeds = parse_seeds(args.seeds)
    pairs = cells(args.robots.split(","), expand_tasks(args.tasks))
    jobs = [(r, t + suffix, seeds) for r, t in pairs for suffix in ("", f"~{PERTURBATION}")]
    t0 = time.perf_counter()
    done: list[list[dict[str, Any]]] = []
    with multiprocessing.get_context("fork").Pool(max(1, args.workers)) as pool:
        for batch in pool.imap(_episodes, jobs, chunksize=1):
            done.append(batch)
            e = batch[0] if batch else {}
            wins = sum(x["success"] for x in batch)
            print(
                f"[{len(done)}/{len(jobs)}] {e.get('robot')} {e.get('task')}"
                f"{'~' + PERTURBATION if e.get('perturbed') else ''}: {wins}/{len(batch)}",
                file=sys.stderr,
                flush=True,
            )
    episodes = [e for batch in done for e in batch]
    summary = []
    for r, t in pairs:
        mine = [e for e in episodes if e["robot"] == r and e["task"] == t]
        plain = [e for e in mine if not e["perturbed"]]
        pert = [e for e in mine if e["perturbed"]]
        ok_plain, ok_pert = sum(e["success"] for e in plain), sum(e["success"] for e in pert)
        drop = 100.0 * (ok_plain / len(plain) - ok_pert / len(pert))
        summary.append(
            {
                "robot": r,
                "task": t,
                "seeds": len(seeds),
                "unperturbed": ok_plain,
                "perturbed": ok_pert,
                "drop_points": round(drop, 1),
                "pass": drop <= MARGIN_POINTS + 1e-9,
                "failures_unperturbed": [(e["seed"], e["end_reason"]) for e in plain if not e["success"]],
                "failures_perturbed": [(e["seed"], e["end_reason"]) for e in pert if not e["success"]],
            }
        )
    rows = [
        (
            c["robot"],
            c["task"],
            f"{c['unperturbed']}/{c['seeds']}",
            f"{c['perturbed']}/{c['seeds']}",
            c["drop_points"],
            "PASS" if c["pass"] else "MISS",
            " ".join(f"{s}:{e}" for s, e in c["failures_perturbed"]) or "-",
        )
        for c in summary
    ]
    header = ("robot", "task", "unperturbed", "physics", "drop (pts)", "verdict", "perturbed failures")
    result = {
        "machine": machine(),
        "perturbation": PERTURBATION,
        "seeds": seeds,
        "workers": args.workers,
        "wall_s": round(time.perf_counter() - t0, 1),
        "margin_points": MARGIN_POINTS,
        "all_pass": all(c["pass"] for c in summary),
        "cells": summary,
        "episodes": episodes,
    }
    emit("expert_perturbed", result, rows, header)


if __name__ == "__main__":
    os.environ.setdefault("MUJOCO_GL", "egl")
    main()
