"""The flying roadster as a family of the registry: `roadster_kickflip`, `roadster_ramp_flip`, a
wind band per task (`roadster_kickflip:storm`; `--wind` on `run`, a comma list on `bench`), the
scripted pilot as its default policy, the shaped reward, the telemetry plot of the report.

Nothing here imports MuJoCo: the environment module is imported when a flight is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pear_agent.loop.family_parts import (
    PromptSchema,
    ReportPage,
    RlRewards,
    ScenarioFilters,
    TextServing,
    TurnLines,
)
from pear_agent.loop.registry import NO_ASK, EnvSpec, Family, PolicyAsk, UnknownNameError
from pear_agent.settings import add_arguments, setting
from sim_adapters.roadster.pilot import PilotPolicy, pilot_reply
from sim_adapters.roadster.replay import telemetry_svg
from sim_adapters.roadster.scenario import WIND_BANDS, filtered_seeds

TASKS = {"roadster_ramp_flip": "ramp_flip", "roadster_kickflip": "kickflip"}
"""Task name -> stunt (the same table as `sim_adapters.roadster.environment.TASKS`)."""


def split_task(task: str, wind: str | None = None) -> tuple[str, str]:
    """'roadster_kickflip:storm' -> ('roadster_kickflip', 'storm'); the suffix wins over `wind`."""
    name, _, band = task.partition(":")
    band = band or wind or "light"
    if name not in TASKS:
        raise UnknownNameError(f"unknown roadster task {name!r}; tasks are: {', '.join(TASKS)}")
    if band not in WIND_BANDS:
        raise ValueError(f"unknown wind band {band!r}; bands are: {', '.join(WIND_BANDS)}")
    return name, band


def expand_winds(tasks: list[str], winds: str | None) -> list[str]:
    """Roadster tasks x the `--wind` bands ('light,gale,storm'): `roadster_kickflip:storm`, ...;
    tasks already naming a band pass through (checked)."""
    bands = [w.strip() for w in (winds or ",".join(WIND_BANDS)).split(",") if w.strip()]
    for b in bands:
        if b not in WIND_BANDS:
            raise ValueError(f"--wind: unknown wind band {b!r}; bands are: {', '.join(WIND_BANDS)}")
    out: list[str] = []
    for t in tasks:
        if ":" in t:
            split_task(t)
            out.append(t)
        else:
            split_task(t)
            out.extend(f"{t}:{b}" for b in bands)
    return out


@dataclass
class RoadsterOptions:
    """The roadster's options (`run` flies `--wind light` unless told; `bench` every band)."""

    wind: str | None = setting(
        None,
        commands=("run", "prompt", "bench"),
        help=f"roadster tasks: the wind band ({', '.join(WIND_BANDS)}; run: light); bench: a comma list, "
        "one task per band (default all three)",
    )
    fly_whole_plan: bool = setting(
        False,
        commands=("run", "bench"),
        action="store_true",
        help="roadster, paused mode, with --max-chunk K > 1: fly every command of a plan (one per 0.2 s) "
        "before the next turn, not only the first",
    )

    def __post_init__(self) -> None:
        for band in (self.wind or "").split(","):
            if band.strip() and band.strip() not in WIND_BANDS:
                raise ValueError(
                    f"--wind: unknown wind band {band.strip()!r}; bands are: {', '.join(WIND_BANDS)}"
                )


class RoadsterFamily(Family, TurnLines, PromptSchema, RlRewards, ScenarioFilters, ReportPage, TextServing):
    name = "roadster"
    default_episodes = 192

    def task_names(self) -> list[str]:
        return list(TASKS)

    def owns(self, task: str) -> bool:
        return task.partition(":")[0] in TASKS

    options_type: type = RoadsterOptions

    def add_arguments(self, parser: Any, command: str) -> None:
        wind = {"run": "light", "bench": ",".join(WIND_BANDS)}.get(command)
        add_arguments(parser, RoadsterOptions, command=command, defaults={"wind": wind})

    def options(self, args: Any) -> dict[str, Any]:
        opts = self.parse(args)
        if opts.wind is not None and "," in opts.wind:
            raise ValueError("--wind takes one band here (a comma list is for `bench`)")
        out: dict[str, Any] = {"wind": opts.wind} if opts.wind in WIND_BANDS else {}
        if opts.fly_whole_plan:
            out["plan_rule"] = "whole"
        return out

    def bench_options(self, args: Any) -> dict[str, Any]:
        # the band is part of each task's name (`roadster_kickflip:storm`)
        return {"plan_rule": "whole"} if self.parse(args).fly_whole_plan else {}

    def resolve(self, task: str, options: dict[str, Any]) -> str:
        name, band = split_task(task, options.get("wind"))
        return f"{name}:{band}"

    def expand(self, task: str, args: Any) -> list[str]:
        return expand_winds([task], self.parse(args).wind)

    def make(self, spec: EnvSpec) -> Any:
        from sim_adapters.roadster.environment import RoadsterEnvironment  # heavy: sim_adapters.roadster.sim

        name, band = split_task(spec.task)
        return RoadsterEnvironment(
            name,
            band,
            mode=spec.mode,
            render=spec.render,
            max_chunk=spec.loop.max_chunk or 1,
            plan_rule=spec.option("plan_rule", "first"),
            observation=spec.loop.observation,
        )

    def has_default_policy(self, task: str) -> bool:
        return True

    def default_policy(self, task: str, ask: PolicyAsk = NO_ASK) -> Any:
        # flying plans on an injected decision time, the pilot plans for it (its first command is for
        # the row that much later); otherwise it measures its lateness from the rows (None)
        config = ask.config
        plans = config is not None and (config.max_chunk or 1) > 1
        lead_s = config.latency_s if plans else None
        return PilotPolicy(noise=ask.pilot_noise, seed=ask.seed, lead_s=lead_s)

    def filtered_seeds(self, task: str, scenario: str, start: int, stop: int, n: int) -> list[int]:
        name, band = split_task(task)
        return filtered_seeds(TASKS[name], band, scenario, start, stop, n)

    def describe(self, env: Any, task: str) -> str:
        name, band = split_task(task)
        return f"roadster / {name} / {band} wind"

    def turn_line(self, t: Any) -> str:
        return f"turn {t.turn:<3d} {t.summary:<40s} {t.outcome:<9s} {t.sim_time_s:5.1f} s sim"

    def verdict(self, env: Any) -> tuple[str, str]:
        return "landed", f", reward {env.reward()['total']:.2f}"

    def rewards(self, env: Any, result: Any) -> tuple[float, float | None]:
        total = float(env.reward()["total"])  # the shaped reward in [0, 1], once the flight is over
        return total, total

    def prompt_schema(self, env: Any) -> tuple[str, dict[str, Any]]:
        return "command schema", env.response_schema()

    def report_html(self, lines: list[dict[str, Any]]) -> str | None:
        if not any("rows" in t for t in lines if t.get("kind") == "turn"):
            return None

        return telemetry_svg(lines)

    def text_expert(self, messages: list[dict[str, Any]]) -> tuple[str, str] | None:
        try:
            return pilot_reply(messages)
        except (ValueError, KeyError, TypeError, IndexError):
            return None


FAMILY = RoadsterFamily()
