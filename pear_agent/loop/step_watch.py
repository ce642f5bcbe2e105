"""Which episode of a worker process is inside an environment step, and since when: what the
worker's parent reads to find a step that never returns (`pear_agent.loop.workers`).

A hung simulator step (an EGL call that never returns, a physics step that never ends) is a C call
on the worker's event-loop thread. It blocks every episode in flight there, may hold the GIL, and
cannot be interrupted from inside the process. Running each step in a thread with a timeout would
leave that thread stuck for good and move the simulator off the thread its EGL context is current
on, so the watch is outside the worker: before each environment call the episode writes (episode,
start time, step, turn) into a small shared-memory array, four plain stores that need no queue,
no feeder thread and no GIL in the parent, which reads them on its own clock. A step older than
`env_step_timeout_s` is a hang: the parent kills the worker and starts another. One array per
worker is enough, because a worker runs its environments on one thread, one call at a time.

Where no array is attached (a process that is not a watched worker), `env_step` costs two global
reads and does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

STEPS: tuple[str, ...] = ("build", "reset", "observe", "execute", "advance")
"""The environment calls the loop watches, by their code in the array."""
NO_JOB = -1.0
BEAT_SIZE = 4
"""The array: [job index or NO_JOB, start (time.monotonic, system-wide on Linux), step code, turn]."""

_JOB: ContextVar[int | None] = ContextVar("pear_agent_step_job", default=None)
_BEAT: Any = None


def attach(beat: Any) -> None:
    """This process's array (a `multiprocessing` RawArray of BEAT_SIZE doubles the parent reads)."""
    global _BEAT
    _BEAT = beat


def set_job(index: int) -> None:
    """The job the current task runs (each asyncio task has its own context, so its own job)."""
    _JOB.set(index)


@contextmanager
def env_step(step: str, turn: int = 0) -> Iterator[None]:
    """Mark an environment call as in progress for the parent to time."""
    beat, job = _BEAT, _JOB.get()
    if beat is None or job is None:
        yield
        return
    beat[1], beat[2], beat[3] = time.monotonic(), float(STEPS.index(step)), float(turn)
    beat[0] = float(job)  # last: the parent never sees this job with an older start
    try:
        yield
    finally:
        beat[0] = NO_JOB


@dataclass(frozen=True)
class Hang:
    """A step the parent found still running past the bound."""

    job: int
    step: str
    turn: int
    waited_s: float
    timeout_s: float

    def detail(self) -> str:
        at = f" at turn {self.turn}" if self.turn else ""
        bound = f"{self.timeout_s:g} s (env_step_timeout_s)"
        return f"the environment's {self.step}{at} did not return within {bound}"


def overdue(beat: Any, timeout_s: float, now: float | None = None) -> Hang | None:
    """The hang the array shows, if its step has run longer than `timeout_s`."""
    job = int(beat[0])
    if job < 0:
        return None
    waited = (time.monotonic() if now is None else now) - beat[1]
    if waited <= timeout_s or int(beat[0]) != job:  # finished while we read
        return None
    return Hang(job, STEPS[int(beat[2])], int(beat[3]), waited, timeout_s)
