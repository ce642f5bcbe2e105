"""Rollouts on Ray: 8 scripted episodes (rendering on, as rollouts for training record
images) on a local Ray instance with 2 CPUs, with 2 workers against 1; results are checked against
the in-process run for the same seeds (deterministic policy). A warm-up pass first starts the
workers and builds their simulators, so the figures are steady state; the cold pass is reported too.

    .venv/bin/python benchmarks/ray_rollouts.py [--episodes 8] [--task pick_cube]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine

from pear_agent.loop.workers import run_local, run_ray
from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout

KEYS = ("success", "turns", "end_reason", "sim_time_s", "messages")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=8)
    ap.add_argument("--task", default="pick_cube")
    args = ap.parse_args()
    import ray

    jobs = [RolloutJob(args.task, s, PolicySpec("scripted", 0.0), render=True) for s in range(args.episodes)]
    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t0
    rows, out = [], {"machine": machine(), "episodes": args.episodes, "task": args.task, "ray_init_s": init_s}
    t0 = time.perf_counter()
    list(run_ray(run_rollout, jobs, num_workers=2))
    out["cold_2_workers_s"] = time.perf_counter() - t0
    results = {}
    for workers in (1, 2):
        t0 = time.perf_counter()
        res = dict(run_ray(run_rollout, jobs, num_workers=workers))
        wall = time.perf_counter() - t0
        results[workers] = res
        out[f"ray_{workers}_worker"] = {
            "wall_s": wall,
            "episodes_per_s": len(res) / wall,
            "worker_processes": len({r["worker"] for r in res.values()}),
        }
        rows.append(
            [
                f"ray, {workers} worker(s)",
                wall,
                len(res) / wall,
                out[f"ray_{workers}_worker"]["worker_processes"],
            ]
        )
    ray.shutdown()
    t0 = time.perf_counter()
    local = dict(run_local(run_rollout, jobs, workers=1))
    wall = time.perf_counter() - t0
    rows.append(["in-process (reference)", wall, len(local) / wall, 1])
    out["in_process"] = {"wall_s": wall, "episodes_per_s": len(local) / wall}
    out["identical_to_local"] = all(
        results[w][j][k] == local[j][k] for w in (1, 2) for j in jobs for k in KEYS
    )
    out["speedup_2_vs_1"] = out["ray_1_worker"]["wall_s"] / out["ray_2_worker"]["wall_s"]
    out["successes"] = sum(r["success"] for r in local.values())
    rows.append(["speedup 2 vs 1 workers", out["speedup_2_vs_1"], "", ""])
    rows.append(["identical to local run", out["identical_to_local"], "", ""])
    emit("ray_rollouts", out, rows, ["run", "wall s", "episodes/s", "processes"])


if __name__ == "__main__":
    main()
