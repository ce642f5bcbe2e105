"""The `bench`, `compare` and `serve` subcommands (registered by `pear_agent.cli`)."""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pear_agent.bench import pear_real
from pear_agent.bench.compare import compare, format_comparison, write_compare_page
from pear_agent.bench.report import format_table, summarize, write_report
from pear_agent.bench.runner import SPLITS, BenchConfig, parse_seeds, run_bench, split_seeds
from pear_agent.cli.loop_options import add_clock_args, add_loop_args, clock_from_args, loop_options_from_args
from pear_agent.loop import family_parts
from pear_agent.loop.arm_options import ArmOptions
from pear_agent.loop.registry import add_family_arguments, families, family_of
from pear_agent.loop.workers import WorkerOptions, ray_executor
from pear_agent.policies.lerobot.client import (
    LeRobotError,
    LeRobotSettings,
    checkpoint_of,
    close_servers,
    lerobot_loop,
    policy_kind,
    preflight,
)
from pear_agent.policies.model_settings import add_model_args, settings_from_args
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.settings import add_arguments, from_args


def _tasks_and_seeds(args: argparse.Namespace, model: bool) -> tuple[list[str], list[int], Any]:
    """The bench's tasks (a family's own selection such as LIBERO's `--suite`, else `--tasks`, each
    expanded by its family: the roadster's wind bands) and seeds; the selection, if any."""

    for fam in families().values():
        sel = family_parts.select(fam, args, model=model)
        if sel is not None:
            seeds = sel.seeds if sel.seeds is not None else _seeds(args, [fam.default_episodes])
            return sel.tasks, seeds, sel
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if not names:
        raise ValueError("--tasks names no task")
    tasks: list[str] = []
    for name in names:
        tasks += family_of(name).expand(name, args)
    return tasks, _seeds(args, [family_of(t).default_episodes for t in tasks]), None


def _episodes(args: argparse.Namespace, defaults: list[int]) -> int:
    return args.episodes if args.episodes is not None else min(defaults)


def _seeds(args: argparse.Namespace, defaults: list[int]) -> list[int]:
    return parse_seeds(args.seeds) if args.seeds else split_seeds(args.split, _episodes(args, defaults))


def cmd_bench(args: argparse.Namespace) -> int:

    spread = from_args(WorkerOptions, args)
    settings = settings_from_args(args, realtime=args.mode == "realtime")
    arm = from_args(ArmOptions, args)
    preset, robot = arm.preset, arm.robot
    pairs: list[tuple[str, int]] | None = None
    fields: dict[str, Any] = {}
    if preset == "pear_real":
        trials = pear_real.trials()
        pairs = [(t.task, t.seed) for t in trials]
        tasks, seeds, selection = list(dict.fromkeys(t.task for t in trials)), [], None
        args.max_turns = pear_real.MAX_TURNS if args.max_turns is None else args.max_turns
        robot = pear_real.ROBOT if robot is None else robot
        fields = {
            "preset": preset,
            "reasoning_token_cap": settings.max_tokens if settings is not None else None,
            "max_turns": args.max_turns,
        }
    else:
        tasks, seeds, selection = _tasks_and_seeds(args, model=settings is not None)
    if settings is not None:
        if settings.max_in_flight is not None:  # the cap is the bench's: each worker takes its share
            settings.max_in_flight = math.ceil(settings.max_in_flight / spread.workers)
        policy_obj = OpenAIPolicy(settings)  # fail now (e.g. key variable unset), not in every worker
        if settings.structured_output == "auto":  # probe once here; the workers reuse the answer
            settings.structured_output_chosen = policy_obj.structured_dialect()[0] or "off"
        policy: dict[str, Any] = {"kind": "openai", "settings": asdict(settings)}
    elif checkpoint_of(args.policy) is not None:
        lerobot = from_args(LeRobotSettings, args)
        try:
            path = preflight(checkpoint_of(args.policy) or "", lerobot)
        except LeRobotError as exc:
            raise ValueError(str(exc)) from None
        close_servers()  # the episodes run in worker processes (timed steps), each starts its own
        policy = {"kind": "lerobot", "checkpoint": path, "settings": asdict(lerobot)}
    else:
        missing = [t for t in tasks if not family_of(t).has_default_policy(t)]
        if missing:
            raise ValueError(f"no scripted expert for {missing[0]} (...); give --model to bench a model")
        policy = {"kind": "scripted", "action_noise_cm": args.action_noise_cm}
    clock = clock_from_args(args)
    loop_options = loop_options_from_args(args)
    if policy["kind"] == "lerobot":  # its turns are requests: its own limits rule
        loop_options, clock = lerobot_loop(loop_options, clock, args.max_context_tokens)
    max_turns = loop_options.pop("max_turns", None)
    render = True if selection is None or selection.render is None else selection.render
    cfg = BenchConfig(
        tasks=tasks,
        seeds=seeds,
        policy=policy,
        out_dir=str(args.out),
        split=None if (args.seeds or selection is not None or pairs is not None) else args.split,
        mode=clock["mode"],
        latency_s=clock["latency_s"],
        workers=spread.workers,
        concurrency=spread.concurrency,
        video=render and not args.no_video,
        render=render,
        max_turns=max_turns,
        max_context_tokens=clock["max_context_tokens"],
        robot=robot,
        episode=loop_options,
        view=[v.strip() for v in args.view.split(",") if v.strip()] if args.view else None,
        options={
            k: v
            for fam in {id(f): f for f in map(family_of, tasks)}.values()
            for k, v in fam.bench_options(args).items()
        },
        pairs=pairs,
        fields=fields,
        env_step_timeout_s=spread.env_step_timeout_s,
    )

    results = run_bench(
        cfg,
        executor=ray_executor(spread.ray_address),
        progress=not args.quiet,
        keep_endpoint_errors=args.keep_endpoint_errors,
    )
    rows = summarize(results)
    print(format_table(rows))
    index = write_report(args.out, results)
    for fam in {id(family_of(t)): family_of(t) for t in tasks}.values():  # e.g. LIBERO's per-suite table
        text = family_parts.bench_summary(fam, results, Path(args.out), args)
        if text:
            print(text)
    if preset == "pear_real":
        rows_pear = pear_real.table(results)
        print(pear_real.format_table(rows_pear, policy.get("settings", {}).get("model") or "scripted expert"))
        (Path(args.out) / "pear_real.json").write_text(json.dumps(rows_pear, indent=2))
    print(f"results: {Path(args.out) / 'results.jsonl'}   report: {index}")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    c = compare(args.a, args.b)
    print(json.dumps(c) if args.json else format_comparison(c, str(args.a), str(args.b)))
    if args.html:
        page = write_compare_page(args.a, args.b, Path(args.html))
        if not args.json:
            print(f"page: {page}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from pear_agent.loop.expert_server import serve  # heavy: fastapi

    if args.latency < 0:
        raise ValueError("--latency must be >= 0")
    serve(args.host, args.port, args.latency, reasoning_field=args.reasoning_field)
    return 0


def add_bench_commands(sub: Any) -> None:

    b = sub.add_parser("bench", help="many episodes over tasks x seeds, in parallel, resumable")
    b.add_argument("--tasks", default="pick_cube", help="comma-separated task names (any family's)")
    b.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="a protocol instead of --tasks: pear_real, the PEAR paper's 30 real-robot trials on the YAM (5 "
        "ruler scenes x 2, 10 objects x 2, 25 turns; replaces --tasks, --seeds and the default robot); or "
        "the paper's LIBERO protocols (.venv-libero only): libero (40 tasks x 50 init states), "
        "libero_pro[/TYPE], libero_plus[/DIMENSION], NAME@K for K episodes per task and perturbation",
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
    b.add_argument("--seeds", default=None, help="explicit seeds instead of a split, e.g. 0-9 or 1,5,7")
    add_arguments(b, WorkerOptions)
    b.add_argument("--out", default="runs/bench", help="folder for results.jsonl, episodes/ and index.html")
    b.add_argument("--action-noise-cm", type=float, default=0.0, help="scripted expert's position noise")

    b.add_argument(
        "--policy",
        default="scripted",
        type=policy_kind(("scripted",)),
        help="scripted (each task's own expert) or lerobot:CHECKPOINT (a LeRobot policy checkpoint, run "
        "in .venv-lerobot); ignored when --model is given",
    )
    add_arguments(b.add_argument_group("LeRobot policy (--policy lerobot:CHECKPOINT)"), LeRobotSettings)
    b.add_argument("--no-video", action="store_true", help="skip the per-episode mp4 (faster)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.add_argument(
        "--keep-endpoint-errors",
        action="store_true",
        help="on a resume, keep episodes that ended on an endpoint failure (endpoint_error) instead of "
        "running them again (an episode whose environment step hung, env_hang, always runs again)",
    )
    b.add_argument(
        "--view",
        nargs="?",
        const="all",
        default=None,
        metavar="all|TASK/sSEED,...",
        help="write a Rerun recording (episode.rrd) beside each chosen episode's log (default: all)",
    )

    add_family_arguments(b.add_argument_group("environment family options"), "bench")
    add_model_args(b)

    add_clock_args(b.add_argument_group("clock and context"))
    add_loop_args(b.add_argument_group("turn loop"))
    b.set_defaults(func=cmd_bench)

    c = sub.add_parser("compare", help="paired comparison of two benches (exact McNemar test)")
    c.add_argument("a", help="bench folder (or its results.jsonl)")
    c.add_argument("b", help="bench folder (or its results.jsonl)")
    c.add_argument("--json", action="store_true")
    c.add_argument("--html", default=None, metavar="PATH", help="also write a page with the per-task chart")
    c.set_defaults(func=cmd_compare)

    s = sub.add_parser("serve", help="OpenAI-compatible endpoint answered by the scripted expert")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--latency", type=float, default=0.0, help="artificial latency per reply, seconds")
    s.add_argument(
        "--reasoning-field", action="store_true", help="put the reasoning in `reasoning_content` like vLLM"
    )
    s.set_defaults(func=cmd_serve)
