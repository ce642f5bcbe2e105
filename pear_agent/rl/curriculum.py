"""Curriculum: track each task's success rate across rollouts and sample the tasks that teach.

A task the policy always solves or always fails gives GRPO groups with zero advantage (PEAR,
section 3.3), so the sampler favours tasks whose recent success rate is strictly between 0 and 1.
Weights are p(1 - p) (the variance of the binary reward: the expected learning signal), a task
not yet tried gets the maximum (0.25, so it is explored), and a task at 0 or 1 keeps a small floor
weight so it is revisited as the policy changes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class TaskStats:
    attempts: int
    successes: int
    recent_rate: float | None
    """Success rate over the last `window` episodes; None before the first."""


class SuccessTracker:
    """Per-task outcomes; `window` keeps the rate about the current policy, not its past."""

    def __init__(self, tasks: Iterable[str] = (), window: int = 64) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = window
        self._recent: dict[str, deque[bool]] = {}
        self._totals: dict[str, list[int]] = {}
        for t in tasks:
            self._ensure(t)

    def _ensure(self, task: str) -> None:
        if task not in self._recent:
            self._recent[task] = deque(maxlen=self.window)
            self._totals[task] = [0, 0]

    @property
    def tasks(self) -> list[str]:
        return list(self._recent)

    def update(self, task: str, successes: Iterable[bool]) -> None:
        self._ensure(task)
        for s in successes:
            self._recent[task].append(bool(s))
            self._totals[task][0] += 1
            self._totals[task][1] += int(bool(s))

    def rate(self, task: str) -> float | None:
        self._ensure(task)
        r = self._recent[task]
        return sum(r) / len(r) if r else None

    def stats(self) -> dict[str, TaskStats]:
        return {t: TaskStats(self._totals[t][0], self._totals[t][1], self.rate(t)) for t in self._recent}

    def to_json(self) -> dict[str, dict[str, float | int | None]]:
        return {t: vars(s) for t, s in self.stats().items()}


class CurriculumSampler:
    """Draws the next task to roll out, weighted towards tasks with a learning signal."""

    def __init__(
        self, tracker: SuccessTracker, floor: float = 0.02, seed: int = 0, tasks: Sequence[str] | None = None
    ) -> None:
        self.tracker = tracker
        self.floor = floor
        self.tasks = list(tasks) if tasks is not None else tracker.tasks
        if not self.tasks:
            raise ValueError("the curriculum needs at least one task")
        self._rng = np.random.default_rng(seed)

    def weights(self) -> dict[str, float]:
        out = {}
        for t in self.tasks:
            p = self.tracker.rate(t)
            out[t] = 0.25 if p is None else max(p * (1.0 - p), self.floor)
        return out

    def probabilities(self) -> dict[str, float]:
        w = self.weights()
        total = sum(w.values())
        return {t: v / total for t, v in w.items()}

    def sample(self) -> str:
        probs = self.probabilities()
        return str(self._rng.choice(list(probs), p=list(probs.values())))
