"""The roadster as an environment of the ONE turn loop (`pear_agent.environment.Environment`).

Observation: the latest telemetry row (text). Action: one command (`commands.py`). Execution: set
the command in force and fly to the next 0.2 s row. Realtime: `advance` flies on the old command
while the policy thinks, by the study's clock rule (`late_intervals`): the world ticks in 0.2 s
intervals, a reply within its interval is on time (a 0.09 s model flies as when paused), and each
full interval of lag is one more interval flown on the old command (2 s = ten intervals). The
continuous rule (fly the measured lag itself, the arm tasks' model) stays as `clock="continuous"`.
Reward: the shaped reward in [0, 1] once the flight is over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from string import Template
from typing import Any

import numpy as np

from pear_agent.backend import TaskInfo
from pear_agent.environment import StepResult, TurnPrompt
from pear_agent.policies.base import TurnContext
from pear_agent.protocol.actions import ActionError
from pear_agent.robot_config import REPO_ROOT
from sim_adapters.roadster.commands import (
    CommandError,
    command_json,
    command_schema,
    describe_command,
    parse_command,
)
from sim_adapters.roadster.scenario import WIND_BANDS
from sim_adapters.roadster.sim import MAX_FLIGHT_S, ROW_S, RoadsterSim
from sim_adapters.roadster.telemetry import format_row

TASKS = {"roadster_ramp_flip": "ramp_flip", "roadster_kickflip": "kickflip"}
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
    """A parsed command (EnvAction): the roadster's commands carry no "done": a flight ends by itself."""

    command: Any
    done: bool = False

    def to_json(self) -> dict[str, Any]:
        return self.command.model_dump()


def briefing(sim: RoadsterSim, mode: str) -> str:
    sc = sim.scenario
    lo, hi = WIND_BANDS[sc.wind_band]
    if sc.stunt == "kickflip":
        task = (
            f"Kickflip. You drive along the road at {sc.speed_mps * 3.6:.0f} km/h toward a parked truck "
            f"{sc.truck_x_m:.0f} m ahead ({sim_truck_text()}). Clear the truck, roll a full 360 degrees "
            "in the air, and land on the road past it. Rolling with the wheels on the road tips the car "
            "onto its roof."
        )
    else:
        task = (
            f"Ramp flip. A corkscrew ramp has just thrown the car off its lip upside down, "
            f"{sc.exit_height_m:.1f} m up, at {sc.speed_mps * 3.6:.0f} km/h. Rotate upright, brake, and land "
            "on the road."
        )
    task += f" Wind band: {sc.wind_band} (mean {lo:g} to {hi:g} m/s)."
    clock = (
        "The world waits for each reply (paused)."
        if mode == "paused"
        else "The car keeps flying while you think, in 0.2 s intervals: a reply within its interval is on "
        "time, and each full 0.2 s you think is one more interval flown on the previous command. Only your "
        "first decision is untimed."
    )
    tpl = Template((REPO_ROOT / "prompts" / "roadster_system.md").read_text(encoding="utf-8"))
    return tpl.substitute(
        stunt=sc.stunt,
        air_kg=f"{sc.air_kg:.0f}",
        truck_fields=TRUCK_FIELDS if sc.stunt == "kickflip" else "",
        clock=clock,
        task=task,
    )


def sim_truck_text() -> str:
    from sim_adapters.roadster.model import TRUCK_SIZE_M

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
    ) -> None:
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

    def system_prompt(self) -> str:
        return briefing(self.sim, self.mode)

    def header(self) -> dict[str, Any]:
        return {
            "observation": "telemetry",
            "wind": self.wind,
            "scenario": self.sim.scenario.to_json(),
            "clock_rule": self.clock_rule(),
        }

    def clock_rule(self) -> str | None:
        """Which realtime rule runs (recorded in headers and results); None when paused."""
        return None if self.mode == "paused" else self.clock

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        row = self.sim.row()
        text = format_row(row)
        if feedback:
            text = f"Last: {feedback}\n{text}"
        ctx = TurnContext(
            turn, self.task_name, {"telemetry": row}, row, response_schema=self.response_schema()
        )
        msg = {"role": "user", "content": text}
        return TurnPrompt(msg, text, ctx, len(text) // 4 + 8, record={"telemetry": row})

    def response_schema(self) -> dict[str, Any]:
        return command_schema()

    def parse(self, reply: str) -> RoadsterCommand:
        try:
            return RoadsterCommand(parse_command(reply))
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
        if not sim.status.over:
            sim.set_command(action.command)
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
        executed = describe_command(action.command)
        if not st.over:
            return StepResult("flying", f"{command_json(action.command)} in force", executed, False, record)
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
            import mujoco

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
