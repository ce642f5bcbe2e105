"""When a commanded motion is over: one rule for every backend, simulated or real.

After the planned duration, a motion is `reached` when every part is within tolerance of its
target and the robot is still; `blocked` when it has been still short of the target for a moment
(or has not settled in time); `timeout` when it is on target but never comes to rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["reached", "stopped short of the target", "did not settle at the target", "timeout"]


@dataclass
class SettleJudge:
    duration_s: float
    reach_tolerance_rad: float
    settle_timeout_s: float
    still_for_s: float = 0.3
    _still_since: float | None = None

    def verdict(
        self, t: float, max_error_rad: dict[str, float], still: bool
    ) -> tuple[Verdict, str | None] | None:
        """None while the motion goes on; else the verdict and the first part short of its target."""
        if t < self.duration_s:
            return None
        if not still:
            self._still_since = None
        elif self._still_since is None:
            self._still_since = t
        short = next((n for n, e in max_error_rad.items() if e >= self.reach_tolerance_rad), None)
        if short is None and still:
            return "reached", None
        if short is not None and self._still_since is not None and t - self._still_since > self.still_for_s:
            return "stopped short of the target", short
        if t > self.duration_s + self.settle_timeout_s:
            return ("did not settle at the target", short) if short else ("timeout", None)
        return None
