"""`pear-agent run --task roadster_kickflip --wind storm --seed S [--realtime] [--latency S]`.

Called by `pear_agent.cli.cmd_run` for the roadster tasks: the same loop, clock options, model
options and records as an arm run, with the roadster environment instead of a robot.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sim_adapters.roadster.environment import TASKS, RoadsterEnvironment
from sim_adapters.roadster.scenario import WIND_BANDS


def split_task(task: str, wind: str | None = None) -> tuple[str, str]:
    """'roadster_kickflip:storm' -> ('roadster_kickflip', 'storm'); the suffix wins over `wind`."""
    name, _, band = task.partition(":")
    band = band or wind or "light"
    if name not in TASKS:
        raise ValueError(f"unknown roadster task {name!r}; tasks are: {', '.join(TASKS)}")
    if band not in WIND_BANDS:
        raise ValueError(f"unknown wind band {band!r}; bands are: {', '.join(WIND_BANDS)}")
    return name, band


def make_environment(task: str, mode: str = "paused", render: bool = True, wind: str | None = None) -> Any:
    name, band = split_task(task, wind)
    return RoadsterEnvironment(name, band, mode=mode, render=render)


def roadster_policy(args: argparse.Namespace) -> Any:
    from pear_agent.policies.openai_client import OpenAIPolicy, settings_from_args

    settings = settings_from_args(args)
    if settings is not None:
        return OpenAIPolicy(settings)
    if args.policy == "replay":
        from pear_agent.policies.replay import ReplayPolicy

        if not args.replay:
            raise ValueError("--policy replay needs --replay PATH/episode.jsonl")
        return ReplayPolicy(Path(args.replay))
    from pear_agent.policies.pilot import PilotPolicy

    return PilotPolicy()


def cmd_run_roadster(args: argparse.Namespace) -> int:
    from pear_agent.cli import print_result
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.policies.openai_client import clock_from_args, secrets_from_args
    from pear_agent.records import RunWriter, new_run_dir

    name, band = split_task(args.task, getattr(args, "wind", None))
    clock = clock_from_args(args)
    policy = roadster_policy(args)
    env = RoadsterEnvironment(name, band, mode=clock["mode"], render=not args.no_video)
    run_dir = new_run_dir(Path(args.runs_dir), f"{name}-{band}", args.seed)
    writer = RunWriter(run_dir, video_fps=None if args.no_video else 10.0, secrets=secrets_from_args(args))
    quiet = args.json

    def on_turn(t: Any) -> None:
        if not quiet:
            print(f"turn {t.turn:<3d} {t.summary:<40s} {t.outcome:<9s} {t.sim_time_s:5.1f} s sim", flush=True)

    if not quiet:
        print(
            f"pear-agent: roadster / {name} / {band} wind / {policy.name} / seed {args.seed} / "
            + clock["mode"]
            + (f" (+{args.latency:g} s per decision)" if args.latency is not None else ""),
            flush=True,
        )
    config = EpisodeConfig(max_turns=args.max_turns, max_invalid=getattr(args, "max_invalid", 3), **clock)
    try:
        result = Episode.of(env, policy, config, writer, on_turn).run(args.seed)
    finally:
        env.close()
    reward = env.reward()
    summary = result.to_json() | {"wind": band, "reward": reward["total"], "reward_parts": reward}
    return print_result(
        result, summary, writer, as_json=args.json, won="landed", extra=f", reward {reward['total']:.2f}"
    )


def expand_winds(tasks: list[str], winds: str | None) -> list[str]:
    """Roadster tasks x the `--wind` bands ('light,gale,storm'): `roadster_kickflip:storm`, ...;
    other tasks (and roadster tasks already naming a band) pass through unchanged."""
    from pear_agent.registry import is_environment_task

    bands = [w.strip() for w in (winds or ",".join(WIND_BANDS)).split(",") if w.strip()]
    for b in bands:
        if b not in WIND_BANDS:
            raise ValueError(f"--wind: unknown wind band {b!r}; bands are: {', '.join(WIND_BANDS)}")
    out: list[str] = []
    for t in tasks:
        if is_environment_task(t) and ":" not in t:
            out.extend(f"{t}:{b}" for b in bands)
        else:
            if is_environment_task(t):
                split_task(t)
            out.append(t)
    return out
