"""`pear-agent rollouts`: collect GRPO rollout groups into a trajectory folder."""

from __future__ import annotations

import argparse
import json
import math
import time
from functools import partial
from pathlib import Path
from typing import Any

from pear_agent.loop.arm_options import ArmOptions
from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import add_family_arguments, resolve
from pear_agent.loop.workers import WorkerOptions, run_local, run_ray
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.rl.rollouts import (
    PolicySpec,
    RolloutGroup,
    arun_rollout,
    collect_groups,
    run_rollout,
    sequential,
)
from pear_agent.rl.trajectories import TrajectoryWriter, export_sft
from pear_agent.settings import add_arguments, from_args


class RolloutsError(ValueError):
    """A bad option or an unreachable cluster: printed as one line by the CLI."""


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "rollouts",
        help="collect GRPO rollout groups (G episodes per initial state) as trajectory records",
    )
    p.add_argument("--task", default="pick_cube", help="a task, or several comma-separated (curriculum)")
    p.add_argument("--group-size", type=int, default=4, help="episodes per group (G)")
    p.add_argument("--groups", type=int, default=4, help="groups to keep (with a learning signal)")
    p.add_argument("--max-attempts", type=int, default=None, help="groups to sample at most (3 x --groups)")
    p.add_argument("--seed", type=int, default=0, help="first episode seed; each group takes the next")
    p.add_argument("--policy", default="scripted", choices=["scripted", "openai"])
    p.add_argument("--action-noise-cm", type=float, default=1.0, help="scripted expert's move noise")
    p.add_argument("--pilot-noise", type=float, default=1.0, help="roadster: scripted pilot's rule jitter")
    p.add_argument("--out", default=None, help="output folder (default runs/rollouts-<stamp>)")
    p.add_argument("--keep-dropped", action="store_true", help="also write dropped groups (advantage 0)")
    p.add_argument("--no-render", action="store_true", help="no camera images (text-only records)")
    p.add_argument("--sft", default=None, help="also export successful episodes as SFT chat JSONL here")
    add_arguments(p, WorkerOptions)

    add_arguments(p, EpisodeConfig, only=("max_turns",))
    add_arguments(
        p.add_argument_group("model (--policy openai)"),
        ModelSettings,
        only=("model", "base_url", "api_key_env", "temperature", "max_in_flight"),
        defaults={"temperature": 1.0},  # rollouts sample
    )

    add_family_arguments(p.add_argument_group("environment family options"), "rollouts")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=cmd_rollouts)


def _policy_spec(args: argparse.Namespace, workers: int) -> Any:

    if args.policy == "scripted":
        return PolicySpec("scripted", action_noise_cm=args.action_noise_cm, pilot_noise=args.pilot_noise)
    if not args.model:
        raise RolloutsError("--policy openai needs --model (and usually --base-url)")
    model = {"model": args.model, "base_url": args.base_url, "temperature": args.temperature}
    if args.api_key_env:
        model["api_key_env"] = args.api_key_env
    if args.max_in_flight is not None:
        if args.max_in_flight < 1:
            raise RolloutsError("--max-in-flight must be >= 1")
        model["max_in_flight"] = math.ceil(args.max_in_flight / workers)
    return PolicySpec("openai", model=tuple(sorted(model.items())))


def cmd_rollouts(args: argparse.Namespace) -> int:

    tasks = [t.strip() for t in args.task.split(",") if t.strip()]
    if not tasks:
        raise RolloutsError("--task needs at least one task name")
    for t in tasks:  # any family's task (the roadster's `roadster_kickflip:storm`): a bad name fails now
        resolve(t)
    if args.group_size < 1 or args.groups < 1:
        raise RolloutsError("--group-size and --groups must be >= 1")
    spread = from_args(WorkerOptions, args)
    policy = _policy_spec(args, spread.workers)
    n = spread.concurrency
    if spread.ray_address:
        executor = partial(run_ray, address=spread.ray_address, num_workers=spread.workers, concurrency=n)
    elif spread.workers > 1 or n > 1:
        executor = partial(
            run_local, workers=spread.workers, concurrency=n, step_timeout_s=spread.env_step_timeout_s
        )
    else:
        executor = sequential
    out = Path(args.out or f"runs/rollouts-{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        writer = TrajectoryWriter(out)
    except OSError as exc:
        raise RolloutsError(f"cannot write records to --out {out}: {exc.strerror or exc}") from None

    def on_group(g: RolloutGroup) -> None:
        if g.kept or args.keep_dropped:
            for rec in g.records:
                writer.write(rec)
        if not args.json:
            adv = " ".join(f"{r['advantage']:+.2f}" for r in g.records)
            rewards = " ".join(f"{r['reward']:.2g}" for r in g.records)
            print(
                f"{g.group_id} {g.task} seed {g.seed}: rewards {rewards}  {g.verdict:<11s} adv {adv}",
                flush=True,
            )

    try:
        report = collect_groups(
            tasks,
            args.groups,
            args.group_size,
            policy,
            base_seed=args.seed,
            max_attempts=args.max_attempts,
            executor=executor,
            on_group=on_group,
            robot=from_args(ArmOptions, args).robot,
            render=not args.no_render,
            max_turns=args.max_turns,
            job_fn=arun_rollout if n > 1 else run_rollout,
        )
    except ConnectionError as exc:
        raise RolloutsError(f"cannot reach the Ray cluster at {spread.ray_address}: {exc}") from None
    finally:
        writer.close()
    summary: dict[str, Any] = report.to_json() | {
        "out": str(out),
        "records": writer.count,
        "executor": f"ray:{spread.ray_address}" if spread.ray_address else "local",
        "workers": spread.workers,
        "concurrency": n,
    }
    if args.sft:
        summary["sft_episodes"] = export_sft(out, Path(args.sft))
        summary["sft"] = args.sft
    (out / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(summary))
    else:
        g = summary["groups"]
        print(
            f"groups: {g['kept']} kept of {g['sampled']} sampled; dropped {g['dropped']} "
            f"(all success {g['dropped_all_success']}, all failure {g['dropped_all_failure']}, "
            f"policy error {g['dropped_policy_error']})"
        )
        for task, s in summary["tasks"].items():
            print(f"  {task}: {s['successes']}/{s['attempts']} succeeded")
        print(
            f"{summary['episodes']} episodes in {summary['wall_s']:.1f} s; records: {out}/trajectories.jsonl"
        )
    return 0 if not report.attempts_exhausted else 1
