"""Score a policy on LIBERO in the paper's layout: episodes indexed by (suite, task, init state),
per-suite and overall success with 95% Wilson intervals, and mean wall time per turn.

    .venv-libero/bin/python -m sim_adapters.libero.bench --suite libero_spatial --tasks 0-9 --inits 0-4

One environment is built per task and reset to each init state in turn. Results go to
`<out>/results.jsonl` (one line per episode, appended as it finishes) and `<out>/summary.json`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim_adapters.libero import SUITES


def parse_range(text: str, limit: int, what: str) -> list[int]:
    """`0-9`, `3`, `0,2,5-7` -> indices, each below `limit`."""
    out: list[int] = []
    for chunk in text.split(","):
        a, _, b = chunk.strip().partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            raise ValueError(f"--{what} {text!r}: use N, N-M or a comma list of them")
        lo, hi = int(a), int(b or a)
        if hi < lo or hi >= limit:
            raise ValueError(f"--{what} {text!r}: indices must lie in 0-{limit - 1}")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


def summarize(results: list[dict[str, Any]]) -> dict[str, Any]:
    from pear_agent.bench.stats import wilson

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        k, n = sum(r["success"] for r in rs), len(rs)
        lo, hi = wilson(k, n)
        turns = sum(r["turns"] for r in rs)
        return {
            "successes": k,
            "episodes": n,
            "success_rate": k / n if n else 0.0,
            "wilson95": [lo, hi],
            "mean_wall_s_per_turn": sum(r["wall_s"] for r in rs) / turns if turns else None,
        }

    suites = sorted({r["suite"] for r in results})
    per_task = {
        f"{r['suite']}/{r['task']}": block(
            [x for x in results if (x["suite"], x["task"]) == (r["suite"], r["task"])]
        )
        for r in results
    }
    return {
        "suites": {s: block([r for r in results if r["suite"] == s]) for s in suites},
        "overall": block(results),
        "tasks": per_task,
    }


def format_summary(summary: dict[str, Any]) -> str:
    lines = [f"{'suite':<16s} {'success':>9s} {'rate':>7s}  {'95% Wilson':<15s} {'s/turn':>7s}"]
    rows = [*summary["suites"].items(), ("overall", summary["overall"])]
    for name, b in rows:
        lo, hi = b["wilson95"]
        wt = b["mean_wall_s_per_turn"]
        lines.append(
            f"{name:<16s} {b['successes']:>4d}/{b['episodes']:<4d} {b['success_rate'] * 100:6.1f}%  "
            f"[{lo * 100:5.1f}, {hi * 100:5.1f}]  {wt if wt is None else f'{wt:7.2f}'}"
        )
    return "\n".join(lines)


def run(
    suites: list[str],
    tasks: list[int],
    inits: list[int],
    out: Path,
    render: bool,
    echo: bool = True,
    make_policy: Callable[[str], Any] | None = None,
    config: Any = None,
) -> dict[str, Any]:
    """Run every (suite, task, init) episode; return the summary.

    `make_policy(task)` builds the policy (default: the scripted expert); `config` is the
    episodes' EpisodeConfig (default: paused clock, the suite's turn limit)."""
    from pear_agent.episode import Episode
    from pear_agent.kinematics import Kinematics
    from pear_agent.policies.scripted import ScriptedPolicy
    from sim_adapters.libero.backend import LiberoBackend, load_libero_robot

    robot = load_libero_robot()
    kin = Kinematics(robot)
    out.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with (out / "results.jsonl").open("a") as log:
        for suite in suites:
            for t in tasks:
                name = f"{suite}/{t}"
                policy = make_policy(name) if make_policy else ScriptedPolicy(name)
                backend = LiberoBackend(robot, name, render=render)
                try:
                    for init in inits:
                        t0 = time.perf_counter()
                        res = Episode(backend, kin, policy, config).run(init)
                        rec = {
                            "suite": suite,
                            "task": t,
                            "init": init,
                            "instruction": backend.task.instruction,
                            "success": res.success,
                            "turns": res.turns,
                            "end_reason": res.end_reason,
                            "detail": res.detail,
                            "sim_s": res.sim_time_s,
                            "wall_s": time.perf_counter() - t0,
                        }
                        results.append(rec)
                        log.write(json.dumps(rec) + "\n")
                        log.flush()
                        if echo:
                            print(
                                f"{name:<18s} init {init:<3d} {'success' if res.success else 'failure':<8s} "
                                f"{res.turns:3d} turns  {rec['wall_s']:6.1f} s wall",
                                flush=True,
                            )
                finally:
                    backend.close()
    summary = summarize(results)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def run_from_bench_args(args: Any) -> int:
    """`pear-agent bench --suite ...`: the paper's layout through this runner.

    `--suite-tasks` picks task indices (default 0-9), `--seeds` the init states (default all 50);
    the scripted expert runs without rendering, a model (`--model`) sees both cameras."""
    from pear_agent.episode import EpisodeConfig
    from pear_agent.policies.openai_client import OpenAIPolicy, clock_from_args, settings_from_args
    from sim_adapters.libero.config import SETUP_HINT, LiberoUnavailableError, available

    suites = [s.strip() for s in args.suite.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise ValueError(f"unknown suite {(unknown or [''])[0]!r}; suites are: {', '.join(SUITES)}")
    if not available():
        raise LiberoUnavailableError(f"LIBERO is not installed in this Python; {SETUP_HINT}")
    tasks = parse_range(args.suite_tasks, min(SUITES[s] for s in suites), "suite-tasks")
    inits = parse_range(args.seeds or "0-49", 50, "seeds")
    settings = settings_from_args(args)
    clock = clock_from_args(args)
    if settings is None:
        from pear_agent.policies.expert_registry import EXPERTS

        missing = [f"{s}/{t}" for s in suites for t in tasks if f"{s}/{t}" not in EXPERTS]
        if missing:
            raise ValueError(f"no scripted expert for {missing[0]} (...); give --model to bench a model")
    else:
        OpenAIPolicy(settings)  # fail now (e.g. key variable unset), not after building a scene
    summary = run(
        suites,
        tasks,
        inits,
        Path(args.out),
        render=settings is not None,
        echo=not args.quiet,
        make_policy=(lambda _t: OpenAIPolicy(settings)) if settings is not None else None,
        config=EpisodeConfig(max_turns=args.max_turns, **clock),
    )
    print(format_summary(summary))
    print(f"results: {Path(args.out) / 'results.jsonl'}   summary: {Path(args.out) / 'summary.json'}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m sim_adapters.libero.bench", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--suite", default="libero_spatial", help=f"comma list of: {', '.join(SUITES)}")
    p.add_argument("--tasks", default="0-9", help="task indices, e.g. 0-9 or 0,3")
    p.add_argument("--inits", default="0-49", help="init-state indices (LIBERO has 50 per task)")
    p.add_argument("--policy", default="scripted", choices=["scripted"])
    p.add_argument("--out", default=None, help="results folder (default runs/libero-<stamp>)")
    p.add_argument("--no-render", action="store_true", help="skip camera images (the expert needs none)")
    args = p.parse_args(argv)
    try:
        suites = [s.strip() for s in args.suite.split(",")]
        unknown = [s for s in suites if s not in SUITES]
        if unknown:
            raise ValueError(f"unknown suite {unknown[0]!r}; suites are: {', '.join(SUITES)}")
        tasks = parse_range(args.tasks, min(SUITES[s] for s in suites), "tasks")
        inits = parse_range(args.inits, 50, "inits")
        out = Path(args.out or f"runs/libero-{time.strftime('%Y%m%d-%H%M%S')}")
        summary = run(suites, tasks, inits, out, render=not args.no_render)
    except (ValueError, RuntimeError) as exc:
        print(f"libero bench: error: {exc}", file=sys.stderr)
        return 2
    print(format_summary(summary))
    print(f"results: {out / 'results.jsonl'}   summary: {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
