"""The roadster as an environment of the ONE turn loop (`pear_agent.loop.environment.Environment`).

Observation: the latest telemetry row (text). Action: one command (`commands.py`). Execution: set
the command in force and fly to the next 0.2 s row. Realtime: `advance` flies on the old command
while the policy thinks, by the study's clock rule (`late_intervals`): the world ticks in 0.2 s
intervals, a reply within its interval is on time (a 0.09 s model flies as when paused), and each
full interval of lag is one more interval flown on the old command (2 s = ten intervals). The
continuous rule (fly the measured lag itself, the arm tasks' model) stays as `clock="continuous"`.
Reward: the shaped reward in [0, 1] once the flight is over.

Plans: with `max_chunk` K > 1 a reply may carry `{"plan": [c1, c2, ...]}`, one command per
0.2 s interval. Realtime: c1 flies now, and while the next decision is being made the late
intervals fly c2, c3, ... (the last one in force once the plan runs out); a new plan replaces
whatever is left of the old one (recorded: intervals flown from the plan, commands dropped).
The setting is the arms' `max_chunk` (one field, `--max-chunk`); only the briefing says `max_plan: K`,
because the roadster's protocol calls its chunk a plan.
Paused (`plan_rule`): "first" flies c1 only, one interval per turn, as a single command would;
"whole" flies the whole plan, one interval per command, before the next turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from string import Template
from typing import Any

import numpy as np

from pear_agent.loop.config import check_max_chunk
from pear_agent.loop.environment import StepResult, TurnPrompt
from pear_agent.policies.base import TurnContext
from pear_agent.protocol.actions import ActionError
from pear_agent.robot.backend import TaskInfo
from pear_agent.robot.config import REPO_ROOT
from sim_adapters.roadster.commands import (
    CommandError,
    command_json,
    command_schema,
    describe_command,
    parse_plan,
)
from sim_adapters.roadster.model import TRUCK_SIZE_M
from sim_adapters.roadster.scenario import WIND_BANDS, Scenario
from sim_adapters.roadster.sim import MAX_FLIGHT_S, ROW_S, RoadsterSim
from sim_adapters.roadster.telemetry import (
    COMPACT_LEGEND,
    COMPACT_TRUCK_LEGEND,
    compact_row,
    format_row,
)

TASKS = {"roadster_ramp_flip": "ramp_flip", "roadster_kickflip": "kickflip"}
PLAN_RULES = ("first", "whole")
"""Paused mode: fly a plan's first command per turn, or the whole plan."""
CLOCK_RULES = ("intervals", "continuous")
"""intervals: the study's rule (whole 0.2 s intervals of lag); continuous: the measured lag itself."""


def late_intervals(lag_s: float) -> int:
    """Whole 0.2 s intervals a reply `lag_s` late costs (the study's rule): 0.09 s -> 0, 0.2 s -> 1,
    2.0 s -> 10. A hair of float noise below a boundary counts as reaching it."""
    if lag_s <= 0:
        return 0
    return int(lag_s / ROW_S + 1e-9)


MAX_TURNS = int(MAX_FLIGHT_S / ROW_S) + 10
VIDEO_EVERY_TICKS = 5
"""One video frame per 5 control ticks: 10 frames per simulated second."""

TRUCK_FIELDS = (
    "Truck: `truck_ahead_m` from your nose to the truck; `truck_roof_m` its roof height; `above_roof_m`\n"
    "how far the car's centre is above the roof; `time_to_truck_s` until your nose reaches it and\n"
    "`time_past_truck_s` until your tail is past it, at your current speed (0 once reached / past).\n"
)


@dataclass
class RoadsterCommand:
    """A parsed command (EnvAction): the roadster's commands carry no "done": a flight ends by itself.
    `plan`: every command of the reply in order (command = plan[0])."""

    command: Any
    done: bool = False
    plan: list[Any] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.plan is not None and len(self.plan) > 1:
            return {"plan": [c.model_dump() for c in self.plan]}
        return self.command.model_dump()


def plan_text(max_chunk: int, mode: str, plan_rule: str) -> str:
    """The briefing's paragraph on plans."""
    if max_chunk <= 1:
        return "One command per reply (no plans)."
    how = (
        "while you think, the car flies the rest of your plan, one command per 0.2 s interval (the last "
        "one stays in force if the plan runs out); your next reply replaces whatever is left of it"
        if mode == "realtime"
        else (
            "the world flies the whole plan, one command per 0.2 s interval, before your next turn"
            if plan_rule == "whole"
            else "only the plan's first command is flown each turn (the world waits for you)"
        )
    )
    return (
        f"max_plan: {max_chunk}\nInstead of one command you may send a plan of up to {max_chunk} commands, "
        '{"plan": [{"mode": "coast"}, {"mode": "climb", "vz": 4.0}]}: the first flies now and ' + how + ". "
        f"A plan longer than {max_chunk} is refused (nothing flies)."
    )


BRIEFING_TEXTS = {
    "kickflip": "Kickflip. You drive along the road at {kmh:.0f} km/h toward a parked truck {truck_x:.0f} "
    "m ahead ({truck}). Clear the truck, roll a full 360 degrees in the air, and land on the road past "
    "it. Rolling with the wheels on the road tips the car onto its roof.",
    "ramp_flip": "Ramp flip. A corkscrew ramp has just thrown the car off its lip upside down, "
    "{height:.1f} m up, at {kmh:.0f} km/h. Rotate upright, brake, and land on the road.",
    "wind": " Wind band: {band} (mean {lo:g} to {hi:g} m/s).",
    "paused": "The world waits for each reply (paused).",
    "realtime": "The car keeps flying while you think, in 0.2 s intervals: a reply within its interval is "
    "on time, and each full 0.2 s you think is one more interval flown on the previous command. Only "
    "your first decision is untimed.",
}
"""The briefing's texts (`briefing`): the task (the stunt's, then the wind's, filled by `_texts`)
and the clock (paused, realtime)."""
COMPACT_TEXTS = {
    "kickflip": "Kickflip: you drive at {kmh:.0f} km/h toward a truck ({truck}); clear it, roll 360 "
    "degrees in the air, land on the road past it.",
    "ramp_flip": "Ramp flip: the car left the ramp upside down, {height:.1f} m up, at {kmh:.0f} km/h. "
    "Rotate upright, brake, land on the road.",
    "wind": " Wind {lo:g} to {hi:g} m/s. Air: {air_kg:.0f} kg.",
    "paused": "The world waits for each reply.",
    "realtime": "The car keeps flying while you think: each full 0.2 s of thinking flies one more interval "
    "on your previous command (your first decision is untimed).",
}
"""The compact briefing's texts (`compact_briefing`)."""


def _texts(sc: Scenario, texts: dict[str, str], mode: str) -> tuple[str, str]:
    """(task, clock) of `texts` (`BRIEFING_TEXTS`, `COMPACT_TEXTS`): the task filled from the
    scenario (the speed `kmh`, the truck's distance and size `truck_x` and `truck`, the ramp's exit
    height `height`, the wind band and its range `band`, `lo`, `hi`, the air's mass `air_kg`), the
    clock of `mode`."""
    lo, hi = WIND_BANDS[sc.wind_band]
    stunt = texts["kickflip"] if sc.stunt == "kickflip" else texts["ramp_flip"]
    clock = texts["paused"] if mode == "paused" else texts["realtime"]
    task = (stunt + texts["wind"]).format(
        kmh=sc.speed_mps * 3.6,
        truck_x=sc.truck_x_m,
        truck=sim_truck_text(),
        height=sc.exit_height_m,
        band=sc.wind_band,
        lo=lo,
        hi=hi,
        air_kg=sc.air_kg,
    )
    return task, clock


def briefing(sim: RoadsterSim, mode: str, max_chunk: int = 1, plan_rule: str = "first") -> str:
    sc = sim.scenario
    task, clock = _texts(sc, BRIEFING_TEXTS, mode)
    tpl = Template((REPO_ROOT / "prompts" / "roadster_system.md").read_text(encoding="utf-8"))
    return tpl.substitute(
        stunt=sc.stunt,
        air_kg=f"{sc.air_kg:.0f}",
        truck_fields=TRUCK_FIELDS if sc.stunt == "kickflip" else "",
        clock=clock + "\n" + plan_text(max_chunk, mode, plan_rule),
        task=task,
    )


def compact_briefing(sim: RoadsterSim, mode: str, max_plan: int = 1, plan_rule: str = "first") -> str:
    """The short briefing of `--observation compact` (`prompts/roadster_compact.md`)."""
    sc = sim.scenario
    task, clock = _texts(sc, COMPACT_TEXTS, mode)
    if max_plan > 1:
        clock += "\n" + plan_text(max_plan, mode, plan_rule)
    tpl = Template((REPO_ROOT / "prompts" / "roadster_compact.md").read_text(encoding="utf-8"))
    return tpl.substitute(
        stunt=sc.stunt,
        task=task,
        legend=COMPACT_LEGEND + (COMPACT_TRUCK_LEGEND if sc.stunt == "kickflip" else ""),
        clock=clock,
    )


def sim_truck_text() -> str:
    return f"{TRUCK_SIZE_M[0]:g} m long, roof {TRUCK_SIZE_M[2]:g} m up"


class RoadsterEnvironment:
    name = "roadster"

    def __init__(
        self,
        task: str,
        wind: str = "light",
        mode: str = "paused",
        render: bool = True,
        clock: str = "intervals",
        max_chunk: int = 1,
        plan_rule: str = "first",
        observation: str = "telemetry",
    ) -> None:
        """`observation`: "compact" (a short briefing, integer rows, no echo of the command in
        force, bare-JSON replies); anything else is the full telemetry (the loop's default "both"
        means nothing more for a world without cameras)."""
        self.compact = observation == "compact"
        if plan_rule not in PLAN_RULES:
            raise ValueError(f"unknown plan rule {plan_rule!r}; rules are: {', '.join(PLAN_RULES)}")
        self.max_chunk, self.plan_rule = int(max_chunk), plan_rule
        check_max_chunk(self.max_chunk)
        self._queue: list[Any] = []
        if clock not in CLOCK_RULES:
            raise ValueError(f"unknown clock rule {clock!r}; rules are: {', '.join(CLOCK_RULES)}")
        self.clock = clock
        if task not in TASKS:
            raise ValueError(f"unknown roadster task {task!r}; tasks are: {', '.join(TASKS)}")
        if wind not in WIND_BANDS:
            raise ValueError(f"unknown wind band {wind!r}; bands are: {', '.join(WIND_BANDS)}")
        self.task_name, self.wind, self.mode, self.render = task, wind, mode, render
        self.sim = RoadsterSim(TASKS[task], wind, 0)
        # the band is part of the task's name: bench keys, reports and paired tests keep bands apart
        self._task = TaskInfo(f"{task}:{wind}", f"{TASKS[task]} in {wind} wind", MAX_TURNS)
        self._sink: Callable[[np.ndarray], None] | None = None
        self._renderer: Any = None
        self._ticks = 0
        self.rows: list[dict[str, Any]] = []
        self._pending = []

    @property
    def task(self) -> TaskInfo:
        return self._task

    def reset(self, seed: int) -> None:
        self.sim.reset(seed, self.wind)
        self.rows = [self.sim.row()]
        self._pending: list[dict[str, Any]] = []
        self._ticks = 0
        self.intervals_late = 0
        """Intervals flown on an old command while the policy thought (realtime), this flight."""
        self.lag_flown_s = 0.0
        self._queue = []
        self._late_from_plan = 0
        """Late intervals of the turn in progress that flew a queued plan command (realtime)."""
        self.plan_stats = {"late_intervals_from_plan": 0, "commands_dropped": 0, "plans": 0}

    def system_prompt(self) -> str:
        if self.compact:
            return compact_briefing(self.sim, self.mode, self.max_chunk, self.plan_rule)
        return briefing(self.sim, self.mode, self.max_chunk, self.plan_rule)

    def header(self) -> dict[str, Any]:
        return {
            "observation": "compact" if self.compact else "telemetry",
            "wind": self.wind,
            "scenario": self.sim.scenario.to_json(),
            "clock_rule": self.clock_rule(),
            "max_chunk": self.max_chunk,
            "plan_rule": self.plan_rule_in_force(),
        }

    def plan_rule_in_force(self) -> str | None:
        """How a plan flies (recorded): "realtime" (the rest flies while the model thinks), paused
        "first" or "whole"; None when plans are off (max_chunk 1)."""
        if self.max_chunk <= 1:
            return None
        return "realtime" if self.mode == "realtime" else self.plan_rule

    def clock_rule(self) -> str | None:
        """Which realtime rule runs (recorded in headers and results); None when paused."""
        return None if self.mode == "paused" else self.clock

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        row = self.sim.row()
        line = compact_row(row)
        if self.compact:  # no echo of the command in force: only a correction is said
            text = f"{feedback}\n{line}" if feedback else line
        else:
            text = format_row(row)
            if feedback:
                text = f"Last: {feedback}\n{text}"
        ctx = TurnContext(
            turn,
            self.task_name,
            {"telemetry": row},
            row,
            response_schema=self.response_schema(),
            max_chunk=self.max_chunk,
            bare_json=self.compact,
        )
        msg = {"role": "user", "content": text}
        return TurnPrompt(msg, text, ctx, len(text) // 4 + 8, record={"telemetry": row}, line=line)

    def response_schema(self) -> dict[str, Any]:
        return command_schema(self.max_chunk)

    def parse(self, reply: str) -> RoadsterCommand:
        try:
            plan = parse_plan(reply, self.max_chunk)
            return RoadsterCommand(plan[0], plan=plan)
        except CommandError as exc:
            raise ActionError(str(exc)) from None

    def _fly(self, duration_s: float) -> list[dict[str, Any]]:
        """Fly in whole rows (the last one partial), recording a row at each 0.2 s boundary."""
        rows = []
        left = duration_s
        while left > 1e-9 and not self.sim.status.over:
            chunk = min(ROW_S, left)
            self._step(chunk)
            left -= chunk
            rows.append(self.sim.row())
        self.rows.extend(rows)
        return rows

    def _step(self, duration_s: float) -> None:
        if self._sink is None:
            self.sim.step(duration_s)
            return
        for _ in range(max(0, round(duration_s * 50))):
            if self.sim.status.over:
                break
            self.sim.step(1.0 / 50)
            self._ticks += 1
            if self._ticks % VIDEO_EVERY_TICKS == 0:
                self._frame()

    def execute(self, action: RoadsterCommand) -> StepResult:
        sim = self.sim
        rows, self._pending = self._pending, []  # what flew while the policy thought (realtime)
        plan = action.plan or [action.command]
        previous = {"late_intervals_flown": self._late_from_plan, "dropped": len(self._queue)}
        self.plan_stats["commands_dropped"] += len(self._queue)
        self.plan_stats["plans"] += len(plan) > 1
        self._late_from_plan = 0
        now = plan if (self.mode == "paused" and self.plan_rule == "whole") else plan[:1]
        self._queue = list(plan[len(now) :]) if self.mode == "realtime" else []
        for cmd in now:
            if sim.status.over:
                break
            sim.set_command(cmd)
            rows += self._fly(ROW_S)
        st = sim.status
        reward = sim.reward() if st.over else None
        record: dict[str, Any] = {
            "rows": rows,
            "sim_time_s": sim.t_s,
            "success": st.success,
            "outcome": {"status": self._status(), "detail": st.reason},
        }
        if reward is not None:
            record["reward_parts"] = reward
        if self.max_chunk > 1:
            record["plan"] = {
                "commands": [describe_command(c) for c in plan],
                "flown_now": len(now),
                "queued": len(self._queue),
                "previous_plan": previous,
            }
        executed = describe_command(action.command) + (
            f" (+{len(plan) - 1} planned)" if len(plan) > 1 else ""
        )
        if not st.over:
            said = "" if self.compact else f"{command_json(action.command)} in force"  # compact: no echo
            return StepResult("flying", said, executed, False, record)
        total = reward["total"] if reward else None
        if st.success:
            return StepResult("landed", st.reason, executed, True, record, reward=total)
        return StepResult(
            self._status(), st.reason, executed, False, record, end=True, detail=st.reason, reward=total
        )

    def _status(self) -> str:
        st = self.sim.status
        if not st.over:
            return "flying"
        if st.success:
            return "landed"
        return "crashed" if st.crashed else "failed"

    def advance(self, duration_s: float) -> None:
        """The policy took `duration_s`: fly on the old command by the clock rule."""
        if duration_s <= 0 or self.sim.status.over:
            return
        if self.clock == "intervals":
            n = late_intervals(duration_s)
            self.intervals_late += n
            duration_s = n * ROW_S
        if duration_s > 0:
            self.lag_flown_s += duration_s
            while duration_s > 1e-9 and self._queue and not self.sim.status.over:
                self.sim.set_command(self._queue.pop(0))  # the plan flies on while the model thinks
                self._late_from_plan += 1
                self.plan_stats["late_intervals_from_plan"] += 1
                self._pending += self._fly(min(ROW_S, duration_s))
                duration_s -= ROW_S
            if duration_s > 1e-9:
                self._pending += self._fly(duration_s)

    def time_s(self) -> float:
        return self.sim.t_s

    def reward(self) -> dict[str, float]:
        return self.sim.reward()

    def result_fields(self) -> dict[str, Any]:
        """Extra fields for a bench result line: the band, the shaped reward and how the flight ended."""
        st = self.sim.status
        return {
            "wind": self.wind,
            "reward": self.sim.reward()["total"],
            "reward_parts": self.sim.reward(),
            "max_chunk": self.max_chunk,
            "plan": {"rule": self.plan_rule_in_force(), **self.plan_stats},
            "clock": {
                "rule": self.clock_rule(),
                "late_intervals": self.intervals_late,
                "lag_flown_s": round(self.lag_flown_s, 6),
            },
            "flight": {
                "over": st.over,
                "crashed": st.crashed,
                "reason": st.reason,
                "air_left_kg": self.sim.air_kg,
            },
        }

    # -- video ----------------------------------------------------------------------------
    def set_frame_sink(self, sink: Callable[[np.ndarray], None] | None) -> None:
        self._sink = sink
        if sink is None:
            return
        if not self.render:
            self._sink = None
            return
        self._frame()

    def _frame(self) -> None:
        if self._sink is None:
            return
        if self._renderer is None:
            import mujoco  # heavy: mujoco

            self._renderer = mujoco.Renderer(
                self.sim.model, 360, 640
            )  # one per environment: the model is kept
        self._sink(self.sim.render_frame(self._renderer))

    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        return None

    def close(self) -> None:
        self.set_frame_sink(None)
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
