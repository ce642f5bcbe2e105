"""Group-relative advantages (GRPO) and the filter that drops groups without a learning signal.

A group is G rollouts of one task from one initial state. Its advantage is each reward minus the
group mean, over the group standard deviation plus epsilon. When every rollout succeeds (or every
one fails) all advantages are zero: such a group costs a trainer compute and teaches nothing, so it
is dropped and another group is sampled.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

GroupVerdict = Literal["kept", "all_success", "all_failure", "all_equal", "policy_error"]


def group_advantages(rewards: Sequence[float], eps: float = 1e-6, ddof: int = 1) -> np.ndarray:
    """(r - mean) / (std + eps) over one group.

    `ddof=1` (the sample std) matches verl's and TRL's GRPO (`torch.std` is unbiased); `ddof=0`
    gives the population std. A group of one has no spread: its advantage is 0.
    """
    r = np.asarray(rewards, dtype=float)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"a group needs a 1-D list of rewards, got shape {r.shape}")
    if r.size <= ddof:
        return np.zeros_like(r)
    return (r - r.mean()) / (r.std(ddof=ddof) + eps)


def classify_group(rewards: Sequence[float]) -> GroupVerdict:
    """Why a group would be dropped, or "kept" when its rewards differ."""
    r = np.asarray(rewards, dtype=float)
    if r.size and np.all(r == r[0]):
        if r[0] >= 1.0:
            return "all_success"
        if r[0] <= 0.0:
            return "all_failure"
        return "all_equal"
    return "kept"


@dataclass
class FilterCounts:
    """How many groups were sampled, kept, and dropped (and why), for the run's report."""

    sampled: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(
        default_factory=lambda: {"all_success": 0, "all_failure": 0, "all_equal": 0, "policy_error": 0}
    )
    """`policy_error`: a rollout got no reply (endpoint down...): its 0 reward says nothing."""

    def add(self, verdict: GroupVerdict) -> None:
        self.sampled += 1
        if verdict == "kept":
            self.kept += 1
        else:
            self.dropped[verdict] += 1

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    def to_json(self) -> dict[str, int]:
        return {
            "sampled": self.sampled,
            "kept": self.kept,
            "dropped": self.dropped_total,
            **{f"dropped_{k}": v for k, v in self.dropped.items()},
        }


def filter_groups(
    groups: Sequence[Sequence[float]], eps: float = 1e-6, ddof: int = 1
) -> tuple[list[tuple[int, np.ndarray]], FilterCounts]:
    """Keep the groups with a learning signal: [(index, advantages)], and the counts."""
    counts = FilterCounts()
    kept = []
    for i, rewards in enumerate(groups):
        verdict = classify_group(rewards)
        counts.add(verdict)
        if verdict == "kept":
            kept.append((i, group_advantages(rewards, eps, ddof)))
    return kept, counts
