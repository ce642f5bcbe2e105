"""The `bench`, `compare` and `serve` subcommands (registered by `pear_agent.cli`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pear_agent.bench.runner import SPLITS


def _suite_tasks(args: argparse.Namespace) -> tuple[list[str], list[int]]:
    """`--suite` (LIBERO): task names `suite/i` and init-state seeds (default 0-49)."""
    from sim_adapters.libero.bench import parse_range, suite_tasks
    from sim_adapters.libero.config import SETUP_HINT, LiberoUnavailableError, available

    tasks = suite_tasks(args.suite, args.suite_tasks)
    if not available():
        raise LiberoUnavailableError(f"LIBERO is not installed in this Python; {SETUP_HINT}")
    return tasks, parse_range(args.seeds or "0-49", 50, "seeds")


def cmd_bench(args: argparse.Namespace) -> int:
    from pear_agent.bench.report import format_table, summarize, write_report
    from pear_agent.bench.runner import BenchConfig, parse_seeds, run_bench, split_seeds
    from pear_agent.episode import loop_options_from_args
    from pear_agent.policies.openai_client import OpenAIPolicy, clock_from_args, settings_from_args
    from pear_agent.registry import is_environment_task, task_entry

    preset = getattr(args, "preset", None)
    suite = bool(getattr(args, "suite", None)) or bool(preset)
    if preset:  # issue 19: the paper's LIBERO / LIBERO-Plus / LIBERO-Pro protocols, by name
        from sim_adapters.libero.presets import bench_tasks

        tasks, seeds = bench_tasks(preset, args.seeds)
    elif suite:  # LIBERO: the same runner, its tasks named `libero_spatial/0`..., seeds = init states
        tasks, seeds = _suite_tasks(args)
    else:
        tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
        if not tasks:
            raise ValueError("--tasks names no task")
        from sim_adapters.roadster.cli import expand_winds  # issue 14: roadster tasks x --wind bands

        tasks = expand_winds(tasks, getattr(args, "wind", None))
        for t in tasks:
            if not is_environment_task(t):
                task_entry(t)
        episodes = args.episodes
        if episodes is None:
            episodes = 192 if all(is_environment_task(t) for t in tasks) else 10
        seeds = parse_seeds(args.seeds) if args.seeds else split_seeds(args.split, episodes)
    settings = settings_from_args(args)
    if settings is not None:
        policy_obj = OpenAIPolicy(settings)  # fail now (e.g. key variable unset), not in every worker
        if settings.structured_output == "auto":  # probe once here; the workers reuse the answer
            settings.structured_output_chosen = policy_obj.structured_dialect()[0] or "off"
        policy: dict[str, Any] = {"kind": "openai", "settings": asdict(settings)}
    else:
        from pear_agent.policies.expert_registry import EXPERTS

        missing = [t for t in tasks if t not in EXPERTS and not is_environment_task(t)]
        if missing:
            raise ValueError(f"no scripted expert for {missing[0]} (...); give --model to bench a model")
        policy = {"kind": "scripted", "action_noise_cm": args.action_noise_cm}
    clock = clock_from_args(args)
    if args.workers < 1:
        raise ValueError("--workers must be >= 1")
    render = not suite or settings is not None  # LIBERO's scripted expert needs no cameras
    cfg = BenchConfig(
        tasks=tasks,
        seeds=seeds,
        policy=policy,
        out_dir=str(args.out),
        split=None if (args.seeds or suite) else args.split,
        mode=clock["mode"],
        latency_s=clock["latency_s"],
        workers=args.workers,
        video=render and not args.no_video,
        render=render,
        max_turns=args.max_turns,
        max_context_tokens=clock["max_context_tokens"],
        robot=args.robot,
        episode=loop_options_from_args(args),
    )
    from pear_agent.executors import ray_executor

    results = run_bench(cfg, executor=ray_executor(args.ray_address), progress=not args.quiet)
    rows = summarize(results)
    print(format_table(rows))
    index = write_report(args.out, results)
    if preset:  # per benchmark, perturbation and suite: Wilson intervals, paired drop against LIBERO
        from sim_adapters.libero.summary import write_summary

        print(write_summary(results, args.out))
    elif suite:  # the paper's layout as well: per suite and overall, 95% Wilson intervals
        from sim_adapters.libero.bench import format_summary, suite_summary

        by_suite = suite_summary(results)
        (Path(args.out) / "suites.json").write_text(json.dumps(by_suite, indent=2))
        print(format_summary(by_suite))
    print(f"results: {Path(args.out) / 'results.jsonl'}   report: {index}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from pear_agent.bench.compare import compare, format_comparison

    c = compare(args.a, args.b)
    print(json.dumps(c) if args.json else format_comparison(c, str(args.a), str(args.b)))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from pear_agent.serve import serve

    if args.latency < 0:
        raise ValueError("--latency must be >= 0")
    serve(args.host, args.port, args.latency, reasoning_field=args.reasoning_field)
    return 0


def add_bench_commands(sub: Any) -> None:
    from pear_agent.policies.openai_client import add_model_args

    b = sub.add_parser("bench", help="many episodes over tasks x seeds, in parallel, resumable")
    b.add_argument("--tasks", default="pick_cube", help="comma-separated task names")
    b.add_argument(
        "--suite",
        default=None,
        help="LIBERO suites instead of --tasks (comma list: libero_spatial, libero_object, libero_goal, "
        "libero_10; .venv-libero only); --seeds then names init states (default 0-49). Same runner: "
        "resume, --workers, --ray-address, report, compare",
    )
    b.add_argument("--suite-tasks", default="0-9", help="with --suite: task indices, e.g. 0-9 or 0,3")
    b.add_argument(
        "--preset",
        default=None,
        help="the PEAR paper's protocols (.venv-libero only): libero (40 tasks x 50 init states), "
        "libero_pro[/TYPE], libero_plus[/DIMENSION]; NAME@K runs K episodes per task and perturbation. "
        "Prints and writes (libero_summary.json) success per suite and perturbation, Wilson intervals "
        "and the paired drop against LIBERO",
    )
    b.add_argument(
        "--split",
        default="test",
        choices=list(SPLITS),
        help="seed split: " + ", ".join(f"{k} = seeds {a}..{b - 1}" for k, (a, b) in SPLITS.items()),
    )
    b.add_argument(
        "--episodes",
        type=int,
        default=None,
        help="episodes per task (the split's first N seeds; default 10, 192 flights for roadster tasks)",
    )
    b.add_argument(
        "--wind",
        default="light,gale,storm",
        help="roadster tasks: comma-separated wind bands, one task per band (default all three)",
    )
    b.add_argument("--seeds", default=None, help="explicit seeds instead of a split, e.g. 0-9 or 1,5,7")
    b.add_argument("--workers", type=int, default=1, help="parallel worker processes")
    b.add_argument(
        "--ray-address",
        default=None,
        help="run episodes as Ray tasks: 'local' starts a local instance, 'auto' or host:port joins one "
        "(multi-node: --out must be on a file system every node shares)",
    )
    b.add_argument("--out", default="runs/bench", help="folder for results.jsonl, episodes/ and index.html")
    b.add_argument("--robot", default=None)
    b.add_argument("--max-turns", type=int, default=None)
    b.add_argument("--action-noise-cm", type=float, default=0.0, help="scripted expert's position noise")
    b.add_argument("--no-video", action="store_true", help="skip the per-episode mp4 (faster)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    add_model_args(b)
    from pear_agent.episode import add_loop_args

    add_loop_args(b.add_argument_group("turn loop"))
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("compare", help="paired comparison of two benches (exact McNemar test)")
    c.add_argument("a", help="bench folder (or its results.jsonl)")
    c.add_argument("b", help="bench folder (or its results.jsonl)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser("serve", help="OpenAI-compatible endpoint answered by the scripted expert")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--latency", type=float, default=0.0, help="artificial latency per reply, seconds")
    s.add_argument(
        "--reasoning-field", action="store_true", help="put the reasoning in `reasoning_content` like vLLM"
    )
    s.set_defaults(func=cmd_serve)
