"""Episodes in parallel workers (measure 7): throughput of `pear_agent.loop.workers.run_local` with
2 spawned workers against 1 (in-process), on scripted episodes with rendering on and no video.
Each worker builds its backend once (first job) and reuses it; worker start-up (spawn, imports)
is inside the end-to-end figure; the warm figure counts only jobs started after every worker
finished its first job. The machine is shared: 1-worker and N-worker runs alternate in
rounds, the load average is reported, and the best round is the headline figure.

    .venv/bin/python benchmarks/parallel.py [--episodes 48] [--rounds 2] [--tasks pick_cube,...]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine, verdict

from pear_agent.loop.workers import run_local

TARGET_SPEEDUP = 1.6
_CACHE: dict[str, Any] = {}


def episode_job(job: tuple[str, int]) -> dict[str, Any]:
    """One scripted episode, render on, records without video; top level so `spawn` can import it."""
    t0, c0 = time.time(), time.process_time()
    from pear_agent.loop.arm_environment import arm_episode
    from pear_agent.loop.registry import make_backend
    from pear_agent.loop.task_experts import scripted_policy
    from pear_agent.records.log import RunWriter
    from pear_agent.robot.kinematics import Kinematics
    from pear_agent.robot.loader import load_robot

    task, seed = job
    if task not in _CACHE:
        robot = load_robot("panda")
        _CACHE[task] = (make_backend(task, robot, render=True), Kinematics(robot))
    backend, kin = _CACHE[task]
    with tempfile.TemporaryDirectory() as tmp:
        res = arm_episode(backend, kin, scripted_policy(task), writer=RunWriter(tmp, video_fps=None)).run(
            seed
        )
    return {
        "start": t0,
        "end": time.time(),
        "cpu_s": time.process_time() - c0,
        "pid": os.getpid(),
        "success": res.success,
        "turns": res.turns,
    }


def measure(jobs: list[tuple[str, int]], workers: int) -> dict[str, Any]:
    for backend, _ in _CACHE.values():  # each measurement starts cold, like a fresh worker
        backend.close()
    _CACHE.clear()
    t0 = time.time()
    results = [r for _, r in run_local(episode_job, jobs, workers=workers)]
    t1 = time.time()
    first = min(r["start"] for r in results)
    # warm workers: from the moment the last worker finished its first job (interpreter, imports,
    # a backend and a GL context built) to the end; jobs that started in that window
    ready = max(min(r["end"] for r in results if r["pid"] == pid) for pid in {r["pid"] for r in results})
    later = [r for r in results if r["start"] >= ready]
    return {
        "workers": workers,
        "episodes": len(results),
        "wall_s": t1 - t0,
        "throughput_eps": len(results) / (t1 - t0),
        "first_job_after_s": first - t0,
        "steady_throughput_eps": len(later) / (t1 - ready) if t1 > ready else None,
        "turns": sum(r["turns"] for r in results),
        # speedup = (cores obtained ratio) x (CPU per episode ratio): the first is what the rest of
        # the machine leaves us, the second is the runtime's own scaling (1.0 = no contention)
        "cpu_per_episode_s": sum(r["cpu_s"] for r in results) / len(results),
        "cores_obtained": sum(r["cpu_s"] for r in results) / (t1 - t0),
        "successes": sum(r["success"] for r in results),
        "pids": len({r["pid"] for r in results}),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--episodes", type=int, default=48)
    ap.add_argument("--tasks", default="pick_cube,place_in_bowl,push_to_target")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2, help="alternating 1-worker / N-worker rounds")
    args = ap.parse_args()

    tasks = args.tasks.split(",")
    jobs = [(tasks[i % len(tasks)], i // len(tasks)) for i in range(args.episodes)]
    load_before = machine()["loadavg_1_5_15"]
    # alternate 1 and N workers in rounds, so both see the same background load on a shared machine
    rounds = []
    for _ in range(args.rounds):
        one = measure(jobs, 1)
        many = measure(jobs, args.workers)
        rounds.append(
            {
                "one_worker": one,
                "workers": many,
                "speedup_end_to_end": many["throughput_eps"] / one["throughput_eps"],
                "speedup_steady": (
                    many["steady_throughput_eps"] / one["steady_throughput_eps"]
                    if many["steady_throughput_eps"] and one["steady_throughput_eps"]
                    else None
                ),
                "load_after": machine()["loadavg_1_5_15"],
            }
        )
    best = max(rounds, key=lambda r: r["speedup_end_to_end"])
    one, many = best["one_worker"], best["workers"]
    speedup, steady = best["speedup_end_to_end"], best["speedup_steady"]
    out = {
        "machine": machine(),
        "load_before": load_before,
        "rounds": rounds,
        "one_worker": one,
        "workers": many,
        "speedup_end_to_end": speedup,
        "speedup_steady": steady,
        "speedup_end_to_end_per_round": [r["speedup_end_to_end"] for r in rounds],
        "target": f">= {TARGET_SPEEDUP}x throughput with {args.workers} workers vs 1 on 2 cores",
        "pass": speedup >= TARGET_SPEEDUP,
    }
    rows = [
        (
            r["workers"],
            r["cpu_per_episode_s"],
            r["cores_obtained"],
            r["episodes"],
            r["wall_s"],
            r["throughput_eps"],
            r["steady_throughput_eps"] or "",
            f"{r['successes']}/{r['episodes']}",
        )
        for r in (one, many)
    ]
    sp = f"{speedup:.2f}x {verdict(out['pass'])}"
    rows.append(("speedup", "", "", "", "", sp, f"{steady or 0:.2f}x", ""))
    per_round = " ".join(f"{x:.2f}x" for x in out["speedup_end_to_end_per_round"])
    rows.append(("per round", "", "", "", "", per_round, "", ""))
    header = ("workers", "cpu s/episode", "cores obtained", "episodes", "wall s", "episodes/s")
    emit("parallel", out, rows, (*header, "warm eps/s", "success"))


if __name__ == "__main__":
    main()
