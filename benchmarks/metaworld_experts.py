"""Meta-World's own scripted policies through pear-agent's protocol vs the same policies driving
Meta-World's `step()` directly, on the same tasks and seeds. Runs in .venv-metaworld.

    .venv-metaworld/bin/python benchmarks/metaworld_experts.py --seeds 10
    .venv-metaworld/bin/python benchmarks/metaworld_experts.py --tasks pick-place-v3,push-v3 --seeds 3
    .venv-metaworld/bin/python benchmarks/metaworld_experts.py --table RESULTS.json  # the docs' tables

Per task and seed, the same Meta-World variation (`sim_adapters.metaworld.backend.sampled_task`):
- native: `metaworld.policies.ENV_POLICY_MAP[task]` on `env.step()` for Meta-World's 500 steps,
  success = `info["success"]` at any step (Meta-World's evaluation);
- protocol: the family's expert (the same policy, each turn planned by looking ahead in a copy of
  the simulation to its next waypoint) through the whole turn loop (reply text, parser, clipping,
  move until reached and still, or pressed) within the task's turn limit, success = the same
  `info["success"]`, latched; whether an episode pressed (`press_moves`).
Cost: wall time per episode and per `step()` call, natively (policy + `step()`) and through the
protocol, split into the expert's decisions (its look-ahead rollouts) and the rest (the turn loop:
reply text, parser, clipping, the move over `step()`), against Meta-World's `step()` alone.
Writes benchmarks/results/metaworld_experts-<PEAR_BENCH_TAG>.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (sets sys.path and MUJOCO_GL)
import numpy as np
from _common import emit, machine, results_path

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
        t0 = time.perf_counter()
        step_s = 0.0
        ok, step = False, 0
        for step in range(1, NATIVE_STEPS + 1):  # noqa: B007  (step: the steps taken)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                action = policy.get_action(obs)
            t1 = time.perf_counter()
            obs, _, _, _, info = env.step(np.clip(action, -1, 1))
            step_s += time.perf_counter() - t1
            if info["success"]:
                ok = True
                break
        wall = time.perf_counter() - t0
        return {"success": ok, "steps": step, "wall_s": round(wall, 4), "step_s": round(step_s, 4)}
    finally:
        env.close()


def protocol(name: str, seed: int) -> dict[str, Any]:
    task = PREFIX + name
    env = make_environment(task, render=False)
    try:
        t0 = time.perf_counter()
        result = Episode(env, scripted_policy(task), EpisodeConfig()).run(seed)
        wall = time.perf_counter() - t0
        steps = int(env.backend.steps)
        fields = env.result_fields()
    finally:
        env.close()
    return {
        "success": bool(result.success),
        "turns": result.turns,
        "steps": steps,
        "end": result.end_reason,
        "press_moves": int(fields.get("press_moves", 0)),
        "wall_s": round(wall, 4),
        "expert_s": round(sum(result.latencies_s), 4),
    }


def cost(tasks: dict[str, Any]) -> dict[str, Any]:
    """Wall time per episode and per `step()` call, natively and through the protocol (all episodes)."""
    nat = [r for t in tasks.values() for r in t["native"]]
    pro = [r for t in tasks.values() for r in t["protocol"]]
    n_steps, p_steps = sum(r["steps"] for r in nat), sum(r["steps"] for r in pro)
    n_wall, p_wall = sum(r["wall_s"] for r in nat), sum(r["wall_s"] for r in pro)
    expert = sum(r["expert_s"] for r in pro)
    step_s = sum(r["step_s"] for r in nat) / max(n_steps, 1)
    return {
        "native_s_per_episode": n_wall / len(nat),
        "native_ms_per_step": 1000 * n_wall / max(n_steps, 1),
        "metaworld_step_ms": 1000 * step_s,
        "protocol_s_per_episode": p_wall / len(pro),
        "protocol_ms_per_step": 1000 * p_wall / max(p_steps, 1),
        "protocol_expert_s_per_episode": expert / len(pro),
        "protocol_loop_ms_per_step": 1000 * (p_wall - expert) / max(p_steps, 1),
        "protocol_overhead_ms_per_step": 1000 * (p_wall - expert) / max(p_steps, 1) - 1000 * step_s,
        "native_steps_per_episode": n_steps / len(nat),
        "protocol_steps_per_episode": p_steps / len(pro),
        "note": "protocol_loop_ms_per_step: the turn loop without the expert's decisions (its look-ahead "
        "rollouts are expert_s); overhead: that minus Meta-World's own step() (metaworld_step_ms)",
    }


def table(path: str) -> str:
    """docs/metaworld.md's table, from a results file: per task native and protocol successes, the
    difference, mean turns of the successes and the episodes that pressed; then the cost (a partial
    file, of a run still going or cut short: its tasks so far)."""
    data = json.loads(Path(path).read_text())
    n = data["seeds_per_task"]
    lines = [
        "| task | native (500 steps) | through the protocol | difference (points) | mean turns (successes) "
        "| episodes that pressed |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    n_all = p_all = pressed_all = 0
    for name, t in data["tasks"].items():
        nat = sum(r["success"] for r in t["native"])
        pro = sum(r["success"] for r in t["protocol"])
        pressed = sum(r["press_moves"] > 0 for r in t["protocol"])
        turns = [r["turns"] for r in t["protocol"] if r["success"]]
        n_all, p_all, pressed_all = n_all + nat, p_all + pro, pressed_all + pressed
        lines.append(
            f"| {name} | {nat}/{n} | {pro}/{n} | {(pro - nat) * 100 / n:+.0f} | "
            f"{f'{np.mean(turns):.1f}' if turns else '-'} | {pressed}/{n} |"
        )
    total = n * len(data["tasks"])
    lines.append(
        f"| **all {len(data['tasks'])}** | **{n_all}/{total}** | **{p_all}/{total}** | "
        f"{(p_all - n_all) * 100 / total:+.1f} | | {pressed_all}/{total} |"
    )
    c = data.get("cost")
    if c is None:  # a partial file: the tasks so far, no cost yet
        return "\n".join(lines)
    lines += [
        "",
        "| wall time | natively | through the protocol |",
        "| --- | --- | --- |",
        f"| per episode | {c['native_s_per_episode']:.2f} s | {c['protocol_s_per_episode']:.2f} s "
        f"(of which the expert's look-ahead {c['protocol_expert_s_per_episode']:.2f} s) |",
        f"| `step()` calls per episode | {c['native_steps_per_episode']:.0f} | "
        f"{c['protocol_steps_per_episode']:.0f} |",
        f"| per `step()` call | {c['native_ms_per_step']:.2f} ms (Meta-World's `step()` alone "
        f"{c['metaworld_step_ms']:.2f} ms) | {c['protocol_loop_ms_per_step']:.2f} ms without the expert "
        f"({c['protocol_overhead_ms_per_step']:+.2f} ms on top of `step()`) |",
    ]
    return "\n".join(lines)


def one_task(job: tuple[str, int]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """One task's episodes, natively and through the protocol (one worker's job)."""
    name, seeds = job
    return name, [native(name, s) for s in range(seeds)], [protocol(name, s) for s in range(seeds)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", default=",".join(ENV_NAMES), help="Meta-World v3 env names (default: all 50)")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 per task")
    ap.add_argument("--workers", type=int, default=1, help="tasks run in this many processes at once")
    ap.add_argument("--table", metavar="RESULTS_JSON", help="print docs/metaworld.md's tables from a file")
    args = ap.parse_args()
    if args.table:
        print(table(args.table))
        return
    os.environ.setdefault("PEAR_BENCH_TAG", "local")  # emit() writes metaworld_experts-<tag>.json
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    t0 = time.perf_counter()
    tasks: dict[str, Any] = {}
    rows = []
    jobs = [(name, args.seeds) for name in names]
    path = results_path("metaworld_experts")
    partial = path.with_suffix(".partial.json") if path is not None else None
    pool = multiprocessing.get_context("spawn").Pool(args.workers)
    for name, nat, pro in pool.imap(one_task, jobs):  # in task order, each as it is done
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
        if partial is not None:  # the tasks so far, kept as they finish (a run cut short keeps them)
            partial.write_text(json.dumps({"complete": False, "seeds_per_task": args.seeds, "tasks": tasks}))
    pool.close()
    pool.join()
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
        "differ_over_20_points": [
            n for n, t in tasks.items() if t["native_rate"] - t["protocol_rate"] > 0.20 + 1e-9
        ],
        "episodes_pressed": sum(r["press_moves"] > 0 for t in tasks.values() for r in t["protocol"]),
        "cost": cost(tasks),
        "tasks": tasks,
        "wall_s": round(time.perf_counter() - t0, 1),
        "workers": args.workers,
        "machine": machine(),
    }
    rows.append(
        ["overall", f"{n_all}/{total}", f"{p_all}/{total}", f"{(p_all - n_all) * 100 / total:+.1f}", ""]
    )
    emit("metaworld_experts", result, rows, ["task", "native", "protocol", "diff pts", "turns"])
    if partial is not None:
        partial.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
