"""What timing every environment step costs: the stamp around each call (`step_watch.env_step` in a
watched worker, against the same call unwatched), and a one-worker bench whose steps are timed (its
episodes in one spawned worker process) against the same bench run in this process (no timing).
The machine is shared: the two benches alternate in rounds and the load average is reported. Each
round builds its environments afresh; the in-process bench keeps this process's imports from the
first round on (a command line starts cold every time: round 1 is that comparison).

    .venv/bin/python benchmarks/step_watch.py [--tasks pick_cube] [--seeds 0-3] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
from _common import emit, machine

from pear_agent.bench.runner import BenchConfig, close_sims, parse_seeds, run_bench
from pear_agent.loop import step_watch

CALLS = 200_000


def stamp_cost_ns(watched: bool) -> float:
    """Nanoseconds per `with env_step(...)` around nothing, stamped (a job and an array) or not."""
    beat = [step_watch.NO_JOB] + [0.0] * (step_watch.BEAT_SIZE - 1)
    step_watch.attach(beat if watched else None)

    async def loop() -> float:
        step_watch.set_job(0)
        t0 = time.perf_counter()
        for _ in range(CALLS):
            with step_watch.env_step("execute", 1):
                pass
        return (time.perf_counter() - t0) / CALLS * 1e9

    try:
        return asyncio.run(loop())
    finally:
        step_watch.attach(None)


def bench_s(tasks: list[str], seeds: list[int], timeout_s: float | None) -> dict[str, Any]:
    close_sims()  # no environment built by an earlier round (a spawned worker builds its own)
    with tempfile.TemporaryDirectory() as out:
        cfg = BenchConfig(tasks, seeds, {"kind": "scripted"}, out, video=False, env_step_timeout_s=timeout_s)
        t0 = time.perf_counter()
        recs = run_bench(cfg, progress=False)
        wall = time.perf_counter() - t0
    return {
        "wall_s": wall,
        "episodes": len(recs),
        "successes": sum(bool(r["success"]) for r in recs),
        "turns": sum(int(r.get("turns") or 0) for r in recs),
        "episode_wall_s": [r.get("wall_time_s") for r in recs],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks", default="pick_cube")
    ap.add_argument("--seeds", default="0-3")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    tasks, seeds = args.tasks.split(","), parse_seeds(args.seeds)
    load_before = machine()["loadavg_1_5_15"]
    stamps = {"unwatched_ns": stamp_cost_ns(False), "watched_ns": stamp_cost_ns(True)}
    rounds = []
    for _ in range(args.rounds):
        here = bench_s(tasks, seeds, None)
        timed = bench_s(tasks, seeds, 120.0)
        rounds.append(
            {"in_process": here, "timed_one_worker": timed, "load_after": machine()["loadavg_1_5_15"]}
        )
    extra = [r["timed_one_worker"]["wall_s"] - r["in_process"]["wall_s"] for r in rounds]
    out = {
        "machine": machine(),
        "load_before": load_before,
        "tasks": tasks,
        "seeds": seeds,
        "stamp_calls": CALLS,
        "stamp": stamps,
        "rounds": rounds,
        "timed_minus_in_process_s": extra,
    }
    rows = [("stamp per step, ns", f"{stamps['unwatched_ns']:.0f}", f"{stamps['watched_ns']:.0f}")]
    for i, r in enumerate(rounds):
        rows.append(
            (f"bench wall s, round {i + 1}", r["in_process"]["wall_s"], r["timed_one_worker"]["wall_s"])
        )
    emit("step_watch", out, rows, ("measure", "in process / unwatched", "timed (one worker) / watched"))


if __name__ == "__main__":
    main()
