"""LIBERO as a family of the registry: its tasks (`libero_spatial/0` ... from `task_names()`, so a
benchmark built on LIBERO adds its names there), `bench --suite`, and the paper's per-suite layout.

Episodes run through the one bench runner (`pear_agent.bench.runner`: resume, workers,
concurrency, Ray, HTML report, `compare`, end reasons); a LIBERO task's init state is the seed.
`--suite`/`--suite-tasks` expand to task names and the results are also summarised per suite with
95% Wilson intervals (`suites.json`). LIBERO itself is imported only when a backend is built
(in `.venv-libero`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pear_agent.bench.report import scored
from pear_agent.bench.stats import wilson
from pear_agent.loop.arm_family import ArmFamily, ArmOptions, TaskEntry
from pear_agent.loop.family_parts import BenchSelection, BenchSummary, Selection
from pear_agent.robot.config import RobotConfig
from pear_agent.settings import setting
from sim_adapters.libero import SUITES, task_names
from sim_adapters.libero.backend import LiberoBackend
from sim_adapters.libero.config import SETUP_HINT, LiberoUnavailableError, available
from sim_adapters.libero.expert import libero_expert, solves
from sim_adapters.libero.presets import bench_tasks
from sim_adapters.libero.summary import write_summary

LIBERO_ROBOT = str(Path(__file__).resolve().parent / "libero_panda.yaml")
"""The robot LIBERO mounts (its model file ships in robosuite), named by path."""
INIT_STATES = 50
"""Init states per LIBERO task: `--seeds` with `--suite` name them (default 0-49)."""


@dataclass
class LiberoOptions(ArmOptions):
    """LIBERO's options: `--robot` and `--preset` (`ArmOptions`), and on `bench` the suites."""

    suite: str | None = setting(
        None,
        commands=("bench",),
        help="LIBERO suites instead of --tasks (comma list: libero_spatial, libero_object, libero_goal, "
        "libero_10; .venv-libero only); --seeds then names init states (default 0-49). Same runner: "
        "resume, --workers, --concurrency, --ray-address, report, compare",
    )
    suite_tasks: str = setting(
        "0-9",
        commands=("bench",),
        help="with --suite or --preset: task indices in each suite, e.g. 0-9 or 0,3",
    )


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


def suite_tasks(suite_text: str, tasks_text: str) -> list[str]:
    """`libero_spatial,libero_goal` + `0-1` -> ['libero_spatial/0', 'libero_goal/0', ...]."""
    suites = [s.strip() for s in suite_text.split(",") if s.strip()]
    unknown = [s for s in suites if s not in SUITES]
    if unknown or not suites:
        raise ValueError(f"unknown suite {(unknown or [''])[0]!r}; suites are: {', '.join(SUITES)}")
    idx = parse_range(tasks_text, min(SUITES[s] for s in suites), "suite-tasks")
    return [f"{s}/{i}" for s in suites for i in idx]


def suite_summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Per suite, overall and per task: successes, rate, 95% Wilson interval, wall seconds per turn,
    from the bench runner's result lines (task `suite/i`, seed = init state)."""
    results = scored(results)  # an endpoint failure after retries is not the model's

    def block(rs: list[dict[str, Any]]) -> dict[str, Any]:
        k, n = sum(bool(r.get("success")) for r in rs), len(rs)
        lo, hi = wilson(k, n)
        turns = sum(int(r.get("turns") or 0) for r in rs)
        wall = sum(float(r.get("wall_time_s") or 0.0) for r in rs)
        return {
            "successes": k,
            "episodes": n,
            "success_rate": k / n if n else 0.0,
            "wilson95": [lo, hi],
            "mean_wall_s_per_turn": wall / turns if turns else None,
        }

    suites = sorted({r["task"].split("/")[0] for r in results})
    tasks = sorted({r["task"] for r in results})
    return {
        "suites": {s: block([r for r in results if r["task"].split("/")[0] == s]) for s in suites},
        "overall": block(results),
        "tasks": {t: block([r for r in results if r["task"] == t]) for t in tasks},
    }


def format_summary(summary: dict[str, Any]) -> str:
    lines = [f"{'suite':<16s} {'success':>9s} {'rate':>7s}  {'95% Wilson':<15s} {'s/turn':>7s}"]
    rows = [*summary["suites"].items(), ("overall", summary["overall"])]
    for name, b in rows:
        lo, hi = b["wilson95"]
        wt = b["mean_wall_s_per_turn"]
        lines.append(
            f"{name:<16s} {b['successes']:>4d}/{b['episodes']:<4d} {b['success_rate'] * 100:6.1f}%  "
            f"[{lo * 100:5.1f}, {hi * 100:5.1f}]  {'   -   ' if wt is None else f'{wt:7.2f}'}"
        )
    return "\n".join(lines)


class LiberoFamily(ArmFamily, BenchSelection, BenchSummary):
    name = "libero"
    idle_environments = 1
    """A LIBERO environment holds about 1 GB, and a bench runs a task's init states one after
    another: one idle per process (plus those in flight) keeps reuse and bounds memory."""

    def __init__(self) -> None:
        self._entries: dict[str, TaskEntry] | None = None

    @property
    def entries(self) -> dict[str, TaskEntry]:
        if self._entries is None:  # LIBERO-Plus alone names 10,030 tasks: listed once per process
            entry = TaskEntry("libero", LIBERO_ROBOT, robots=(LIBERO_ROBOT,))
            self._entries = {name: entry for name in task_names()}
        return self._entries

    def owns(self, task: str) -> bool:
        return task in self.entries

    def expert(self, task: str) -> Any:
        """The LIBERO expert (`sim_adapters/libero/expert/`), for the suites it solves."""
        return libero_expert if self.owns(task) and solves(task) else None

    options_type: type = LiberoOptions

    def select(self, args: Any, *, model: bool) -> Selection | None:
        opts = self.parse(args)
        preset = opts.preset
        if preset and preset.startswith("metaworld"):  # Meta-World's presets (sim_adapters.metaworld)
            preset = None
        if preset:  # the paper's LIBERO / LIBERO-Plus / LIBERO-Pro protocols, by name
            picked = opts.suite_tasks
            indices = None if picked in (None, "0-9") else parse_range(picked, 10, "suite-tasks")
            tasks, seeds = bench_tasks(opts.preset, args.seeds, indices)
            return Selection(tasks, seeds=seeds, render=model, extra={"preset": opts.preset})
        if not opts.suite:
            return None

        tasks = suite_tasks(opts.suite, opts.suite_tasks)
        if not available():
            raise LiberoUnavailableError(f"LIBERO is not installed in this Python; {SETUP_HINT}")
        seeds = parse_range(args.seeds or f"0-{INIT_STATES - 1}", INIT_STATES, "seeds")
        # LIBERO's scripted expert reads the simulator's facts: no cameras unless a model looks
        return Selection(tasks, seeds=seeds, render=model)

    def build_backend(self, task: str, robot: RobotConfig, render: bool, pooled: bool = False) -> Any:
        return LiberoBackend(robot, task, render=render)

    def bench_summary(self, results: list[dict[str, Any]], out: Any, args: Any) -> str | None:
        opts = self.parse(args)
        if opts.preset:  # per benchmark, perturbation and suite; paired drop vs LIBERO
            return write_summary(results, str(out))
        if not opts.suite:
            return None
        by_suite = suite_summary(results)
        (Path(out) / "suites.json").write_text(json.dumps(by_suite, indent=2))
        return format_summary(by_suite)


FAMILY = LiberoFamily()
