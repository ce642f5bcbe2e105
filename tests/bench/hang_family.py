"""A test-only environment family whose step can hang for good, registered the way every family is
(an entry point in group `pear_agent.families`, written by `install`), so spawned bench workers
find it too.

Task `hang_walk`: walk x from 0 to `GOAL`, one step a turn. `PEAR_TEST_HANG` = "SEED:STEP:TURN,..."
makes the episode of SEED never return from its STEP (observe or execute) at TURN, as a hung
driver call does: `execute` blocks in a C call that holds the GIL (libc `sleep` through
`ctypes.PyDLL`, which does not release it: the worker's other threads freeze with it), `observe`
blocks on a lock nobody releases (a wait that releases the GIL, like an EGL call that never
returns). `PEAR_TEST_HANG_MARKS` names a folder where each reset leaves `<seed>-<pid>-<ppid>-<n>`, so
a test sees which episodes started in which process, and that process's parent.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import threading
from pathlib import Path

from pear_agent.loop.environment import StepResult, TurnPrompt
from pear_agent.loop.registry import Family
from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.actions import ActionError
from pear_agent.robot.backend import TaskInfo

TASK = "hang_walk"
GOAL = 5
HANG_ENV = "PEAR_TEST_HANG"
MARKS_ENV = "PEAR_TEST_HANG_MARKS"
_FOREVER_S = 3600


def hangs() -> dict[int, tuple[str, int]]:
    """SEED -> (step, turn) from PEAR_TEST_HANG."""
    out = {}
    for item in filter(None, os.environ.get(HANG_ENV, "").split(",")):
        seed, step, turn = item.split(":")
        out[int(seed)] = (step, int(turn))
    return out


def _hang(step: str) -> None:
    if step == "execute":
        ctypes.PyDLL(None).sleep(_FOREVER_S)  # a C call holding the GIL
    else:
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()  # never released: a wait without the GIL


class Step:
    done = False

    def to_json(self) -> dict:
        return {"step": 1}


class Walk:
    name = "walker_line"

    def __init__(self) -> None:
        self.x, self.seed, self.t = 0, 0, 0.0
        self._task = TaskInfo(TASK, f"Reach x = {GOAL}.", GOAL + 2)

    @property
    def task(self) -> TaskInfo:
        return self._task

    def _maybe_hang(self, step: str, turn: int) -> None:
        if hangs().get(self.seed) == (step, turn):
            _hang(step)

    def reset(self, seed: int) -> None:
        self.x, self.seed, self.t, self.turn = 0, seed, 0.0, 0
        marks = os.environ.get(MARKS_ENV)
        if marks:
            n = len(list(Path(marks).glob(f"{seed}-*")))
            Path(marks, f"{seed}-{os.getpid()}-{os.getppid()}-{n}").touch()

    def system_prompt(self) -> str:
        return 'Reply {"step": 1} to move right.'

    def header(self) -> dict:
        return {"observation": "text"}

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        self.turn = turn
        self._maybe_hang("observe", turn)
        text = f"x = {self.x}"
        return TurnPrompt({"role": "user", "content": text}, text, TurnContext(turn, TASK, {}, None), 4)

    def response_schema(self) -> dict:
        return {"type": "object"}

    def parse(self, reply: str) -> Step:
        try:
            json.loads(reply)["step"]
        except (ValueError, KeyError, TypeError):
            raise ActionError('expected {"step": 1}') from None
        return Step()

    def execute(self, action: Step) -> StepResult:
        self._maybe_hang("execute", self.turn)
        self.x += 1
        self.t += 1.0
        return StepResult("moved", f"x is {self.x}", "step +1", self.x >= GOAL, {"x": self.x})

    def advance(self, duration_s: float) -> None:
        self.t += duration_s

    def time_s(self) -> float:
        return self.t

    def set_frame_sink(self, sink: object) -> None:
        pass

    def judge_success(self, end_reason: str, detail: str) -> None:
        return None


class Walker:
    """Awaits a little each turn (as a model request does), so a worker's episodes interleave."""

    name = "walker"

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages: list, ctx: TurnContext) -> PolicyReply:
        return PolicyReply('{"step": 1}')

    async def aact(self, messages: list, ctx: TurnContext) -> PolicyReply:
        await asyncio.sleep(0.02)
        return self.act(messages, ctx)


class HangFamily(Family):
    name = "hang"

    def task_names(self) -> list[str]:
        return [TASK]

    def make(self, spec: object) -> Walk:
        return Walk()

    def has_default_policy(self, task: str) -> bool:
        return True

    def default_policy(self, task: str, **kw: object) -> Walker:
        return Walker()


FAMILY = HangFamily()


def install(site: Path) -> None:
    """This family's package metadata in `site`, as pip would leave it (put `site` on sys.path)."""
    info = site / "hang_family-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hang-family\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[pear_agent.families]\nhang = {__name__}:FAMILY\n")
