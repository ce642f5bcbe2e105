"""`pear-agent` command line: run an episode, list robots, print a prompt.

Every task comes from the registry of environment families (`pear_agent.loop.registry`): one path for
`run`, `prompt`, `bench`, `rollouts` and `serve`, whatever the family."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pear_agent.cli.bench import add_bench_commands
from pear_agent.cli.loop_options import add_clock_args, add_loop_args, clock_from_args, loop_options_from_args
from pear_agent.cli.rollouts import add_parser as add_rollouts_parser
from pear_agent.cli.train import add_parser as add_train_parser  # `pear-agent train ...`
from pear_agent.loop import family_parts
from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.loop.registry import (
    EnvSpec,
    PolicyAsk,
    UnknownNameError,
    add_family_arguments,
    close_environment,
    families,
    family_of,
    family_options,
    resolve,
)
from pear_agent.loop.workers import ExecutorError, run_coroutine
from pear_agent.policies.lerobot.client import (
    LeRobotError,
    LeRobotPolicy,
    LeRobotSettings,
    checkpoint_of,
    lerobot_loop,
    lerobot_python,
    policy_kind,
    preflight,
)
from pear_agent.policies.model_settings import add_model_args, secrets_from_args, settings_from_args
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.policies.replay import ReplayPolicy
from pear_agent.records.log import RunWriter, new_run_dir
from pear_agent.records.view import RRD_NAME, EpisodeView, view_run
from pear_agent.robot.config import RobotConfigError
from pear_agent.robot.loader import list_robots, load_robot
from pear_agent.ros2.operator_cli import add_parser as add_ros_parser  # `pear-agent ros ...`
from pear_agent.settings import add_arguments, from_args

if TYPE_CHECKING:
    from pear_agent.loop.episode import EpisodeResult


class CliError(Exception):
    """An error the user can fix; printed as one line, no traceback."""


def _policy(args: argparse.Namespace, task: str, config: EpisodeConfig):  # noqa: ANN202
    """The model (with --model), a replay, or the task's scripted policy from its family (given the
    loop's settings, as `bench` gives them: a planning pilot plans for `--latency`)."""

    settings = settings_from_args(args, realtime=config.mode == "realtime")
    if settings is not None:
        return OpenAIPolicy(settings)
    if args.policy == "scripted":
        ask = PolicyAsk(seed=args.seed, action_noise_cm=args.action_noise_cm, config=config)
        return family_of(task).default_policy(task, ask=ask)

    checkpoint = checkpoint_of(args.policy)
    if checkpoint is not None:
        try:
            settings = from_args(LeRobotSettings, args)
            return LeRobotPolicy(preflight(checkpoint, settings), settings)
        except LeRobotError as exc:
            raise CliError(str(exc)) from None
    if args.policy == "replay":
        if not args.replay:
            raise CliError("--policy replay needs --replay PATH/episode.jsonl")
        return ReplayPolicy(Path(args.replay))
    raise CliError(f"unknown policy {args.policy!r}")


def cmd_run(args: argparse.Namespace) -> int:
    """One episode of any family's task: a thin wrapper over the bench's coroutine loop."""

    options = family_options(args, args.task)
    family, task = resolve(args.task, options)
    loop_options = loop_options_from_args(args)
    clock = clock_from_args(args)
    if checkpoint_of(args.policy) is not None:  # its turns are requests: its own limits rule
        loop_options, clock = lerobot_loop(loop_options, clock, args.max_context_tokens)
    config = EpisodeConfig(**clock, **loop_options)
    policy = _policy(args, task, config)
    env = family.make(EnvSpec.of(task, options, mode=clock["mode"], render=True, config=config))
    try:
        run_dir = new_run_dir(Path(args.runs_dir), task.replace(":", "-"), args.seed)
        writer = RunWriter(
            run_dir, video_fps=None if args.no_video else 10.0, secrets=secrets_from_args(args)
        )
        quiet = args.json
        view = attach_view(args, writer, env)

        def on_turn(t) -> None:  # noqa: ANN001
            if not quiet:
                print(family_parts.turn_line(family, t), flush=True)

        if not quiet:
            late = f" (+{args.latency_s:g} s per decision)" if args.latency_s is not None else ""
            where = family.describe(env, task)
            print(
                f"pear-agent: {where} / {policy.name} / seed {args.seed} / {clock['mode']}{late}", flush=True
            )
        result = run_coroutine(Episode(env, policy, config, writer, on_turn).arun(args.seed))
        won, extra = family.verdict(env)
        summary = result.to_json() | family_parts.result_fields(family, env)
    finally:
        close_environment(env)
    code = print_result(result, summary, writer, as_json=args.json, won=won, extra=extra)
    if view is not None:
        if not args.json:
            print(f"view: {view.rrd_path}" + (f"   web viewer: {view.web_url}" if view.web_url else ""))
        linger_view(view, args.view_linger_s)
    return code


def add_view_args(parser: argparse.ArgumentParser) -> None:
    """--view and its sinks (Rerun: the `view` extra; nothing of it is imported without --view)."""
    g = parser.add_argument_group("episode view (Rerun)")
    g.add_argument("--view", action="store_true", help="write a Rerun recording (episode.rrd) beside the log")
    g.add_argument(
        "--view-spawn", action="store_true", help="with --view: also stream to a spawned Rerun viewer"
    )
    g.add_argument(
        "--view-web",
        type=int,
        default=None,
        metavar="PORT",
        help="with --view: also serve the live episode to Rerun's web viewer on this port (headless robots)",
    )
    g.add_argument(
        "--view-grpc-port",
        type=int,
        default=9876,
        help="with --view-web: the port of the recording's gRPC server",
    )
    g.add_argument(
        "--view-linger-s",
        type=float,
        default=0.0,
        help="with --view-web: keep serving this long after the episode ends",
    )


def attach_view(args: argparse.Namespace, writer: RunWriter, env: Any) -> Any:
    """An `EpisodeView` listening to the writer when --view (or --view-web/--view-spawn) is given."""
    if not (args.view or args.view_spawn or args.view_web is not None):
        return None

    view = EpisodeView(
        writer.run_dir / RRD_NAME,
        run_dir=writer.run_dir,
        kinematics=getattr(env, "kin", None),
        spawn=args.view_spawn,
        web_port=args.view_web,
        grpc_port=args.view_grpc_port,
    )
    if view.web_url and not args.json:
        print(f"pear-agent: live view at {view.web_url}", flush=True)
    writer.observers.append(view)
    return view


def linger_view(view: Any, seconds: float) -> None:
    """Keep a served view up a while after the episode (the server ends with the process)."""
    if view.web_url and seconds > 0:
        time.sleep(seconds)


def cmd_view(args: argparse.Namespace) -> int:
    """A finished run's episode.jsonl into a Rerun recording (and optionally a viewer)."""
    rrd = view_run(
        Path(args.run_dir),
        rrd_path=Path(args.out) if args.out else None,
        spawn=args.spawn,
        web_port=args.web,
    )
    print(f"view: {rrd}")
    if args.web is not None:
        print(f"pear-agent: web viewer on port {args.web}; Ctrl-C to stop", flush=True)
        deadline = time.monotonic() + args.serve_s if args.serve_s > 0 else float("inf")
        while time.monotonic() < deadline:
            time.sleep(0.5)
    return 0


def print_result(
    result: EpisodeResult,
    summary: dict[str, Any],
    writer: RunWriter,
    as_json: bool,
    won: str = "success",
    extra: str = "",
) -> int:
    """The end of `run`: one JSON summary, or the verdict line and where the log and video are.
    Returns the exit code (0 on success)."""
    if as_json:
        print(json.dumps(summary))
    else:
        verdict = won if result.success else f"failure ({result.end_reason}: {result.detail})"
        print(
            f"{verdict} in {result.turns} turns ({result.sim_time_s:.1f} s simulated, "
            f"{result.wall_time_s:.1f} s wall){extra}"
        )
        video = writer.run_dir / "episode.mp4"
        print(f"log: {writer.log_path}" + (f"   video: {video}" if video.exists() else ""))
    return 0 if result.success else 1


def cmd_robots(args: argparse.Namespace) -> int:
    """List the descriptions (one line per file, with its path); with --check, build and try each.
    Exit 2 if a file cannot be loaded or built, 1 if a check fails, else 0."""
    # heavy: pinocchio, cv2 (the robot's kinematics, the simulator check)
    from pear_agent.cli.robots_check import check_robot, describe, suggest_home_lines

    paths = [Path(f) for f in args.files] if args.files else list_robots()
    if args.suggest_home is not None:
        if len(paths) != 1:
            raise CliError("--suggest-home needs exactly one robot FILE")
        if len(args.suggest_home) not in (0, 3):
            raise CliError(
                "--suggest-home takes a tool position X Y Z in cm, or nothing (above the task area)"
            )
        lines, ok = suggest_home_lines(
            load_robot(paths[0]), args.part, args.suggest_home or None, args.orientation_rad
        )
        print("\n".join(lines))
        return 0 if ok else 1
    if args.check:
        if args.seeds < 1 or not 0.0 <= args.min_success <= 1.0:
            raise CliError("--seeds must be >= 1 and --min-success in [0, 1]")
        reports = [
            check_robot(p, tasks=args.tasks, seeds=args.seeds, min_success=args.min_success) for p in paths
        ]
        for r in reports:
            print(r.line(), flush=True)
        if any(r.config_error for r in reports):
            return 2
        return 1 if any(r.problems for r in reports) else 0
    bad = 0
    for path in paths:
        try:
            print(f"{path}  ok  {describe(path)}")
        except (RobotConfigError, ValueError) as exc:
            bad += 1
            print(f"{path}  ERROR  {' | '.join(str(exc).splitlines())}")
    return 2 if bad else 0


def cmd_prompt(args: argparse.Namespace) -> int:
    """What a model gets: the system prompt, the first turn (images described) and the schema."""
    import cv2  # heavy: cv2

    options = family_options(args, args.task)
    family, task = resolve(args.task, options)
    config = EpisodeConfig(
        observation=args.observation,
        scene_facts=args.scene_facts,
        scene_relative=args.scene_relative,
        max_chunk=args.max_chunk,
    )
    env = family.make(EnvSpec.of(task, options, render=True, config=config))
    try:
        env.reset(args.seed)
        print("=== system ===")
        print(env.system_prompt())
        print("=== user (turn 1) ===")
        turn = env.observe(1, env.task.max_turns, None)
        print(turn.text)
        for name, jpeg in turn.images.items():
            img = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            print(f"[image `{name}`: {img.shape[1]}x{img.shape[0]} JPEG, {len(jpeg)} bytes]")
        if args.schema:
            title, schema = family_parts.prompt_schema(family, env)
            print(f"=== {title} ===")
            print(json.dumps(schema, indent=2))
    finally:
        close_environment(env)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Run the LeRobot writer (pear_agent.records.export_lerobot) where lerobot is installed: its pins
    (torch<2.11, ...) keep it out of the core environment."""

    py = lerobot_python()
    if py is None:
        raise CliError(
            "export --format lerobot needs LeRobot: run `bash scripts/setup_lerobot.sh` (.venv-lerobot) "
            "or set PEAR_LEROBOT_PYTHON to a Python with lerobot 0.4"
        )
    argv = [*args.runs, "--out", args.out, "--repo-id", args.repo_id]
    argv += ["--fps", str(args.fps)] if args.fps is not None else []
    argv += ["--per-turn"] if args.per_turn else []
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    return subprocess.run(
        [py, "-m", "pear_agent.records.export_lerobot", *argv], env=env, check=False
    ).returncode


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="pear-agent", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run one episode (default: panda / pick_cube / scripted / seed 0)")
    run.add_argument("--task", default="pick_cube", help="any registered task (see docs: Commands and tasks)")
    run.add_argument("--seed", type=int, default=0)

    run.add_argument(
        "--policy",
        default="scripted",
        type=policy_kind(("scripted", "replay")),
        help="scripted (the task's own expert or pilot), replay, or lerobot:CHECKPOINT (a LeRobot "
        "policy checkpoint, run in .venv-lerobot); ignored when --model is given",
    )
    run.add_argument("--replay", default=None, help="episode.jsonl to replay (with --policy replay)")
    run.add_argument(
        "--action-noise-cm",
        type=float,
        default=0.0,
        help="Gaussian noise on the scripted expert's position changes",
    )
    run.add_argument("--runs-dir", default="runs")
    run.add_argument("--no-video", action="store_true", help="skip the mp4 (faster)")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")

    add_family_arguments(run.add_argument_group("environment family options"), "run")

    add_model_args(run)

    add_clock_args(run.add_argument_group("clock and context"))
    add_loop_args(run.add_argument_group("turn loop"))

    add_arguments(run.add_argument_group("LeRobot policy (--policy lerobot:CHECKPOINT)"), LeRobotSettings)
    add_view_args(run)
    run.set_defaults(func=cmd_run)

    view = sub.add_parser("view", help="a finished run's episode as a Rerun recording (episode.rrd)")
    view.add_argument("run_dir", help="a run folder (with episode.jsonl), or the episode.jsonl")
    view.add_argument("--out", default=None, help="the .rrd to write (default: episode.rrd beside the log)")
    view.add_argument("--spawn", action="store_true", help="also open a native Rerun viewer")
    view.add_argument("--web", type=int, default=None, metavar="PORT", help="also serve Rerun's web viewer")
    view.add_argument(
        "--serve-s", type=float, default=0.0, help="with --web: serve this long (0: until Ctrl-C)"
    )
    view.set_defaults(func=cmd_view)

    export = sub.add_parser("export", help="episodes (run, bench, rollout folders) as a LeRobot dataset")
    export.add_argument("runs", nargs="+", help="run folders, bench folders or any folder of episode logs")
    export.add_argument("--format", choices=["lerobot"], default="lerobot")
    export.add_argument("--out", required=True, help="a new folder for the dataset")
    export.add_argument(
        "--fps",
        type=int,
        default=None,
        help="frames per second: the control rate the moves are sampled at (default 30; the episodes' "
        "--record-fps must be a multiple), or with --per-turn the turns' nominal rate (default 10)",
    )
    export.add_argument(
        "--per-turn",
        action="store_true",
        help="one frame per turn (the observation the model got and its action) instead of the control rate",
    )
    export.add_argument("--repo-id", default="pear-agent/episodes", help="the dataset's name in its metadata")
    export.set_defaults(func=cmd_export)

    robots = sub.add_parser("robots", help="list and validate the robot descriptions in robots/")
    robots.add_argument("files", nargs="*", help="robot YAML files (default: every file in robots/)")
    robots.add_argument(
        "--check",
        action="store_true",
        help="build each as `run` does and try it: limits, FK/IK, gripper in sim, a grasp carried "
        "sideways, every camera",
    )
    robots.add_argument(
        "--tasks",
        action="store_true",
        help="with --check: also run each task the robot can do with its scripted expert and report "
        "the success per task (a robot fails below --min-success)",
    )
    robots.add_argument(
        "--seeds", type=int, default=5, help="with --tasks: seeds 0..N-1 per task (default 5)"
    )
    robots.add_argument(
        "--min-success",
        type=float,
        default=0.8,
        help="with --tasks: the least expert success per task that passes (default 0.8)",
    )
    robots.add_argument(
        "--suggest-home",
        nargs="*",
        type=float,
        metavar="XYZ_CM",
        help="print home.joints_rad for a tool position X Y Z (cm; default: 15 cm above the middle of "
        "the task area), solved by IK, to paste into the YAML",
    )
    robots.add_argument(
        "--orientation-rad",
        nargs=3,
        type=float,
        default=None,
        metavar=("ROLL", "PITCH", "YAW"),
        help="with --suggest-home: the tool's orientation (default: pointing down, yawed as the home is)",
    )
    robots.add_argument(
        "--part", default=None, help="with --suggest-home: the part (default: every arm part)"
    )
    robots.set_defaults(func=cmd_robots)

    prompt = sub.add_parser("prompt", help="print the system prompt and the first turn")
    prompt.add_argument("--task", default="pick_cube")
    prompt.add_argument("--seed", type=int, default=0)
    prompt.add_argument(
        "--schema",
        action="store_true",
        help="also print the reply's JSON Schema (sent with structured output)",
    )

    add_arguments(prompt, EpisodeConfig, only=("observation", "scene_facts", "scene_relative", "max_chunk"))
    add_family_arguments(prompt.add_argument_group("environment family options"), "prompt")
    prompt.set_defaults(func=cmd_prompt)

    tasks = sub.add_parser("tasks", help="list every task of every environment family, one per line")
    tasks.add_argument("pattern", nargs="?", default=None, help="only names containing this text")
    tasks.add_argument("--family", default=None, help="only this family's tasks (mujoco, libero, ...)")
    tasks.add_argument("--count", action="store_true", help="print the number of tasks per family only")
    tasks.set_defaults(func=cmd_tasks)

    add_bench_commands(sub)

    add_rollouts_parser(sub)

    add_ros_parser(sub)

    add_train_parser(sub)
    return p


def cmd_tasks(args: argparse.Namespace) -> int:
    """Every task name `run`, `bench` and `rollouts` accept (a family may also accept decorated
    names: `pick_cube~camera`, `roadster_kickflip:storm`; see docs/tasks.md)."""

    fams = families()
    if args.family is not None and args.family not in fams:
        raise UnknownNameError(f"unknown family {args.family!r}; families are: {', '.join(fams)}")
    for name, fam in fams.items():
        if args.family is not None and name != args.family:
            continue
        names = [t for t in fam.task_names() if args.pattern is None or args.pattern in t]
        if args.count:
            print(f"{name}: {len(names)} tasks")
            continue
        for t in names:
            print(t)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, RobotConfigError, ValueError, FileNotFoundError, ExecutorError) as exc:
        print(f"pear-agent: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pear-agent: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
