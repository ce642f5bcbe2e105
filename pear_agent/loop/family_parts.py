"""The optional parts of an environment family, each a small protocol a family may implement.

`pear_agent.loop.registry.Family` holds only what every family must answer (its tasks and options, how
to build an environment, its default policy, the run's banner and verdict). What only some
families have lives here, one protocol per part, grouped by the command that asks:

| part              | method           | asked by                    | without it                      |
|-------------------|------------------|-----------------------------|---------------------------------|
| `BenchSelection`  | `select`         | `bench` (LIBERO's --suite)  | the bench's --tasks             |
| `BenchSummary`    | `bench_summary`  | `bench` (after the table)   | nothing printed                 |
| `ResultFields`    | `result_fields`  | `run --json`, bench lines   | the environment's result_fields |
| `ReportPage`      | `report_html`    | an episode's report page    | no extra section                |
| `TurnLines`       | `turn_line`      | `run`'s console per turn    | summary, outcome, sim time      |
| `PromptSchema`    | `prompt_schema`  | `prompt --schema`           | "reply schema", env's schema    |
| `RlRewards`       | `rewards`        | RL rollouts, `bench`        | binary success (or env reward)  |
| `ScenarioFilters` | `filtered_seeds` | a training mix's `filter:`  | refused: no filters             |
| `TextServing`     | `text_expert`    | `serve` without facts       | not answered                    |
| `RobotCheck`      | `check_robot`    | `robots --check`            | a note: no simulator check      |

A family declares a part by subclassing it (`class ArmFamily(Family, RlRewards, PromptSchema)`) or
simply by having the method (the protocols are runtime-checkable). Callers never call the method
directly: they call the function of the same name here, which asks `isinstance(family, Part)` and
falls back to the default of the table, so a family that only subclasses `Family` works everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pear_agent.loop.environment import Environment
    from pear_agent.loop.episode import EpisodeResult, TurnRecord
    from pear_agent.robot.config import RobotConfig


@dataclass
class Selection:
    """Tasks a family picked from its own options (e.g. LIBERO's `--suite`), for `bench`."""

    tasks: list[str]
    seeds: list[int] | None = None
    """Seeds the family's options name (None: the bench's --seeds / --split)."""
    render: bool | None = None
    """Overrides whether the episodes render cameras (None: they do)."""
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class BenchSelection(Protocol):
    def select(self, args: Any, *, model: bool) -> Selection | None:
        """`bench`: tasks named by this family's own options instead of --tasks (None: not used)."""
        ...


@runtime_checkable
class BenchSummary(Protocol):
    def bench_summary(self, results: list[dict[str, Any]], out: Any, args: Any) -> str | None:
        """Text printed after a bench (and files written beside it), or None."""
        ...


@runtime_checkable
class ResultFields(Protocol):
    def result_fields(self, env: Environment) -> dict[str, Any]:
        """Fields added to a bench result line and the `run --json` summary."""
        ...


@runtime_checkable
class ReportPage(Protocol):
    def report_html(self, lines: list[dict[str, Any]]) -> str | None:
        """Extra HTML for an episode's report page (e.g. a telemetry plot), or None."""
        ...


@runtime_checkable
class TurnLines(Protocol):
    def turn_line(self, t: TurnRecord) -> str:
        """The console line `run` prints after a turn."""
        ...


@runtime_checkable
class PromptSchema(Protocol):
    def prompt_schema(self, env: Environment) -> tuple[str, dict[str, Any]]:
        """(title, JSON Schema) `pear-agent prompt --schema` prints."""
        ...


@runtime_checkable
class RlRewards(Protocol):
    def rewards(self, env: Environment, result: EpisodeResult) -> tuple[float, float | None]:
        """(reward, shaped reward or None) of a finished episode for RL."""
        ...


@runtime_checkable
class ScenarioFilters(Protocol):
    def filtered_seeds(self, task: str, scenario: str, start: int, stop: int, n: int) -> list[int]:
        """Up to `n` seeds in [start, stop) whose initial state passes the named scenario filter
        (a training mix's `filter:`, e.g. the roadster's `slow_approach`)."""
        ...


@runtime_checkable
class TextServing(Protocol):
    def text_expert(self, messages: list[dict[str, Any]]) -> tuple[str, str] | None:
        """`pear-agent serve` without privileged facts: (reasoning, reply) when this family's
        scripted policy can answer from the conversation alone, else None."""
        ...


@runtime_checkable
class RobotCheck(Protocol):
    def check_robot(self, task: str, robot: RobotConfig) -> tuple[list[str], list[str]]:
        """`pear-agent robots --check`: build `task`'s scene for `robot` in this family's simulator
        and try it (gripper, a grasp and carry, cameras): (problems, notes)."""
        ...


PARTS: tuple[type, ...] = (
    BenchSelection,
    BenchSummary,
    ResultFields,
    ReportPage,
    TurnLines,
    PromptSchema,
    RlRewards,
    ScenarioFilters,
    TextServing,
    RobotCheck,
)
"""Every optional part (the docs' table and the tests read it)."""


def parts_of(family: Any) -> list[str]:
    """The names of the optional parts `family` implements (`pear-agent tasks`, tests)."""
    return [p.__name__ for p in PARTS if isinstance(family, p)]


# -- each part with its default -----------------------------------------------------------------
def select(family: Any, args: Any, *, model: bool) -> Selection | None:
    return family.select(args, model=model) if isinstance(family, BenchSelection) else None


def bench_summary(family: Any, results: list[dict[str, Any]], out: Any, args: Any) -> str | None:
    return family.bench_summary(results, out, args) if isinstance(family, BenchSummary) else None


def result_fields(family: Any, env: Environment) -> dict[str, Any]:
    if isinstance(family, ResultFields):
        return family.result_fields(env)
    fields = getattr(env, "result_fields", None)
    return dict(fields()) if callable(fields) else {}


def report_html(family: Any, lines: list[dict[str, Any]]) -> str:
    return (family.report_html(lines) if isinstance(family, ReportPage) else None) or ""


def turn_line(family: Any, t: TurnRecord) -> str:
    if isinstance(family, TurnLines):
        return family.turn_line(t)
    return f"turn {t.turn:<3d} {t.summary:<52s} {t.outcome:<10s} {t.sim_time_s:5.1f} s sim"


def prompt_schema(family: Any, env: Environment) -> tuple[str, dict[str, Any]]:
    if isinstance(family, PromptSchema):
        return family.prompt_schema(env)
    return "reply schema", env.response_schema()


def rewards(family: Any, env: Environment, result: EpisodeResult) -> tuple[float, float | None]:
    """The family's rewards; by default binary success, or the environment's own last reward."""
    if isinstance(family, RlRewards):
        return family.rewards(env, result)
    if result.reward is not None:
        return float(result.reward), float(result.reward)
    return (1.0 if result.success else 0.0), None


def filtered_seeds(family: Any, task: str, scenario: str, start: int, stop: int, n: int) -> list[int]:
    if isinstance(family, ScenarioFilters):
        return family.filtered_seeds(task, scenario, start, stop, n)
    name = getattr(family, "name", "?")
    raise ValueError(f"task {task!r} has no scenario filters (its family {name!r} names none)")


def text_expert(family: Any, messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    return family.text_expert(messages) if isinstance(family, TextServing) else None


def check_robot(family: Any, task: str, robot: RobotConfig) -> tuple[list[str], list[str]]:
    if isinstance(family, RobotCheck):
        return family.check_robot(task, robot)
    return [], [f"no simulator check ({getattr(family, 'name', '?')} tasks bring none)"]
