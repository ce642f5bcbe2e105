"""The `bench`, `compare` and `serve` subcommands (registered by `pear_agent.cli`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pear_agent.bench.runner import SPLITS


def cmd_bench(args: argparse.Namespace) -> int:
    from pear_agent.bench.report import format_table, summarize, write_report
    from pear_agent.bench.runner import BenchConfig, parse_seeds, run_bench, split_seeds
    from pear_agent.policies.openai_client import OpenAIPolicy, clock_from_args, settings_from_args
    from pear_agent.registry import task_entry

    if getattr(args, "suite", None):  # LIBERO's layout (per suite, Wilson intervals): its own runner
        from sim_adapters.libero.bench import run_from_bench_args

        return run_from_bench_args(args)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not tasks:
        raise ValueError("--tasks names no task")
    for t in tasks:
        task_entry(t)
    seeds = parse_seeds(args.seeds) if args.seeds else split_seeds(args.split, args.episodes)
    settings = settings_from_args(args)
    if settings is not None:
        OpenAIPolicy(settings)  # fail now (e.g. key variable unset), not in every worker
        policy: dict[str, Any] = {"kind": "openai", "settings": asdict(settings)}
    else:
        from pear_agent.policies.expert_registry import EXPERTS

        missing = [t for t in tasks if t not in EXPERTS]
        if missing:
            raise ValueError(f"no scripted expert for {missing}; give --model to bench a model")
        policy = {"kind": "scripted", "action_noise_cm": args.action_noise_cm}
    clock = clock_from_args(args)
    if args.workers < 1:
        raise ValueError("--workers must be >= 1")
    cfg = BenchConfig(
        tasks=tasks,
        seeds=seeds,
        policy=policy,
        out_dir=str(args.out),
        split=None if args.seeds else args.split,
        mode=clock["mode"],
        latency_s=clock["latency_s"],
        workers=args.workers,
        video=not args.no_video,
        max_turns=args.max_turns,
        max_context_tokens=clock["max_context_tokens"],
        robot=args.robot,
    )
    from pear_agent.executors import ray_executor

    results = run_bench(cfg, executor=ray_executor(args.ray_address), progress=not args.quiet)
    rows = summarize(results)
    print(format_table(rows))
    index = write_report(args.out, results)
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
        "libero_10; .venv-libero only); --seeds then names init states (default 0-49)",
    )
    b.add_argument("--suite-tasks", default="0-9", help="with --suite: task indices, e.g. 0-9 or 0,3")
    b.add_argument(
        "--split",
        default="test",
        choices=list(SPLITS),
        help="seed split: " + ", ".join(f"{k} = seeds {a}..{b - 1}" for k, (a, b) in SPLITS.items()),
    )
    b.add_argument("--episodes", type=int, default=10, help="episodes per task (the split's first N seeds)")
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
