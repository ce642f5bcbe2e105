"""Meta-World's own scripted policies through pear-agent's protocol vs the same policies driving
Meta-World's `step()` directly, on the same tasks and seeds (issue 40). Runs in .venv-metaworld.

    .venv-metaworld/bin/python benchmarks/metaworld_experts.py --seeds 10
    .venv-metaworld/bin/python benchmarks/metaworld_experts.py --tasks pick-place-v3,push-v3 --seeds 3

Per task and seed, the same Meta-World variation (`sim_adapters.metaworld.backend.sampled_task`):
- native: `metaworld.policies.ENV_POLICY_MAP[task]` on `env.step()` for Meta-World's 500 steps,
  success = `info["success"]` at any step (Meta-World's evaluation);
- protocol: the family's expert (the same policy, one turn per segment of up to 10 steps) through
  the whole turn loop (reply text, parser, clipping, move until reached and still) within the
  task's turn limit, success = the same `info["success"]`, latched.
Writes benchmarks/results/metaworld_experts-issue40.json (PEAR_BENCH_TAG sets the suffix).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
from _common import emit, machine

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import make_environment
from pear_agent.loop.task_experts import scripted_policy
from sim_adapters.metaworld import ENV_NAMES, PREFIX
from sim_adapters.metaworld.backend import make_env, sampled_task
from sim_adapters.metaworld.expert import native_policy

NATIVE_STEPS = 500
"""Meta-World's `max_path_length`: the native episode's length."""


def native(name: str, seed: int) -> dict[str, Any]:
    import warnings

    env = make_env(name)
    try:
        env.set_task(sampled_task(name, seed))
        obs, _ = env.reset()
        policy = native_policy(name)
        for step in range(1, NATIVE_STEPS + 1):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                action = policy.get_action(obs)
            obs, _, _, _, info = env.step(np.clip(action, -1, 1))
            if info["success"]:
                return {"success": True, "steps": step}
        return {"success": False, "steps": NATIVE_STEPS}
    finally:
        env.close()


def protocol(name: str, seed: int) -> dict[str, Any]:
    task = PREFIX + name
    env = make_environment(task, render=False)
    try:
        result = Episode(env, scripted_policy(task), EpisodeConfig()).run(seed)
        steps = int(env.backend.steps)
    finally:
        env.close()
    return {"success": bool(result.success), "turns": result.turns, "steps": steps, "end": result.end_reason}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=",".join(ENV_NAMES), help="Meta-World v3 env names (default: all 50)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 per task")
    args = ap.parse_args()
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    t0 = time.perf_counter()
    tasks: dict[str, Any] = {}
    rows = []
    for name in names:
        nat = [native(name, s) for s in range(args.seeds)]
        pro = [protocol(name, s) for s in range(args.seeds)]
        n_ok = sum(r["success"] for r in nat)
        p_ok = sum(r["success"] for r in pro)
        tasks[name] = {
            "native": nat,
            "protocol": pro,
            "native_rate": n_ok / args.seeds,
            "protocol_rate": p_ok / args.seeds,
        }
        ok_turns = [r["turns"] for r in pro if r["success"]]
        rows.append(
            [
                name,
                f"{n_ok}/{args.seeds}",
                f"{p_ok}/{args.seeds}",
                f"{(p_ok - n_ok) * 100 / args.seeds:+.0f}",
                f"{np.mean(ok_turns):.1f}" if ok_turns else "-",
            ]
        )
        print(f"{name}: native {n_ok}/{args.seeds}, protocol {p_ok}/{args.seeds}", flush=True)
    n_all = sum(sum(r["success"] for r in t["native"]) for t in tasks.values())
    p_all = sum(sum(r["success"] for r in t["protocol"]) for t in tasks.values())
    total = len(names) * args.seeds
    result = {
        "benchmark": "metaworld_experts",
        "seeds_per_task": args.seeds,
        "variations": "metaworld.MT1(task, seed=0).train_tasks[seed] (backend.sampled_task)",
        "native_steps": NATIVE_STEPS,
        "native_overall": n_all / total,
        "protocol_overall": p_all / total,
        "differ_over_10_points": [
            n for n, t in tasks.items() if abs(t["protocol_rate"] - t["native_rate"]) > 0.10 + 1e-9
        ],
        "tasks": tasks,
        "wall_s": round(time.perf_counter() - t0, 1),
        "machine": machine(),
    }
    rows.append(
        ["overall", f"{n_all}/{total}", f"{p_all}/{total}", f"{(p_all - n_all) * 100 / total:+.1f}", ""]
    )
    os.environ.setdefault("PEAR_BENCH_TAG", "issue40")  # emit() writes metaworld_experts-<tag>.json
    emit("metaworld_experts", result, rows, ["task", "native", "protocol", "diff pts", "turns"])


if __name__ == "__main__":
    main()
