"""The training task mix: entries (task, weight, scenario filter) drawn by weight, optionally
re-weighted by the curriculum (each entry's learning signal p(1 - p)), and seeds from a split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pear_agent.loop import family_parts
from pear_agent.loop.registry import arm_tasks, family_of, task_names
from pear_agent.rl.curriculum import SuccessTracker
from pear_agent.train.config import MixEntry

SPLITS: dict[str, tuple[int, int]] = {"train": (0, 10_000), "val": (10_000, 11_000), "test": (20_000, 21_000)}
"""The bench's seed splits: train on train, pick on val, report on test."""


def expand_tasks(pattern: str) -> list[str]:
    """`libero_goal/*` -> every task of that suite; any other name as it is."""
    if not pattern.endswith("/*"):
        return [pattern]

    prefix = pattern[:-1]
    names = set(arm_tasks()) | {t for t in task_names() if t.startswith(prefix)}  # `pick_up_object/*` too
    found = sorted((t for t in names if t.startswith(prefix)), key=lambda t: (len(t), t))
    if not found:
        raise ValueError(f"task pattern {pattern!r} matches no task")
    return found


@dataclass(frozen=True)
class Draw:
    task: str
    seed: int
    entry: int
    """Index of the mix entry it came from (the curriculum's key)."""


class TaskMix:
    """Draws (task, seed) pairs; a filter's seeds come from the split in order, never repeated."""

    def __init__(
        self,
        entries: list[MixEntry],
        split: str = "train",
        seed: int = 0,
        curriculum: bool = False,
        floor: float = 0.02,
    ) -> None:
        if not entries:
            raise ValueError("a task mix needs at least one entry")
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; splits are: {', '.join(SPLITS)}")
        self.entries = entries
        self.tasks = [expand_tasks(e.task) for e in entries]
        self.split = split
        self.curriculum = curriculum
        self.floor = floor
        self.tracker = SuccessTracker([self.key(i) for i in range(len(entries))])
        self._rng = np.random.default_rng(seed)
        self._next = [SPLITS[split][0]] * len(entries)

    def key(self, i: int) -> str:
        e = self.entries[i]
        return e.task + (f"[{e.filter}]" if e.filter else "")

    def probabilities(self) -> np.ndarray:
        w = np.array([e.weight for e in self.entries], dtype=float)
        if self.curriculum:
            for i in range(len(w)):
                p = self.tracker.rate(self.key(i))
                w[i] *= 0.25 if p is None else max(p * (1 - p), self.floor)
        return w / w.sum()

    def _seed(self, i: int) -> int:
        e = self.entries[i]
        hi = SPLITS[self.split][1]
        if e.filter is None:
            seed = self._next[i]
        else:
            found = family_parts.filtered_seeds(family_of(e.task), e.task, e.filter, self._next[i], hi, 1)
            if not found:
                raise ValueError(f"no more {self.split} seeds pass filter {e.filter!r} for {e.task}")
            seed = found[0]
        if seed >= hi:
            raise ValueError(f"the {self.split} split ran out of seeds for {self.key(i)}")
        self._next[i] = seed + 1
        return seed

    def draw(self) -> Draw:
        i = int(self._rng.choice(len(self.entries), p=self.probabilities()))
        tasks = self.tasks[i]
        task = tasks[int(self._rng.integers(len(tasks)))] if len(tasks) > 1 else tasks[0]
        return Draw(task, self._seed(i), i)

    def update(self, draw: Draw, successes: list[bool]) -> None:
        self.tracker.update(self.key(draw.entry), successes)

    def fixed(self, per_entry: int) -> list[Draw]:
        """`per_entry` draws of every entry in order (validation and test sets: no randomness)."""
        out = []
        for i, tasks in enumerate(self.tasks):
            for k in range(per_entry):
                out.append(Draw(tasks[k % len(tasks)], self._seed(i), i))
        return out
