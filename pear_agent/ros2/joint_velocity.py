"""Joint velocities when the joint states carry none.

A joint_state_broadcaster over hardware that exports no velocity state interface publishes an empty
`velocity` array (and some drivers fill it with NaN). Read as zero, a stop mid-motion would brake
from an assumed rest: a hold where the arm is, which the controller (starting from the velocity it
measures itself) overshoots and pulls back from. So the velocity comes from the arm's real motion:
finite differences of the stamped position stream over a short window (the header stamps, not
receipt times, so delivery jitter is not read as motion); where no estimate is fresh enough, the
trajectory the controller is following; never an assumed rest.

Pure Python/numpy: testable without a ROS graph.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

WINDOW_S = 0.03
"""Positions this far apart (3 samples at 100 Hz) give one mean velocity: short enough that it
lags the arm by 15 ms (0.12 rad/s of error at the 8 rad/s2 stop deceleration), long enough that a
0.1 mrad encoder step is 3 mrad/s of noise, not 10."""

MAX_SPAN_S = 0.25
"""Two samples further apart than this say nothing about the motion now (a gap in the stream)."""

PUBLISHED = "published"
ESTIMATED = "estimated"
TRAJECTORY = "trajectory"
HOLD = "hold"
SOURCES = {
    PUBLISHED: "the velocities /joint_states publishes",
    ESTIMATED: "velocities estimated from the stamped joint positions",
    TRAJECTORY: "the trajectory the controller follows",
}
"""Where a stop's velocity comes from, in the words the stack check uses."""


@dataclass
class Estimate:
    velocity: float
    """rad/s (or the joint's units per second): the mean over the window"""
    lag_s: float
    """how far the estimate's moment (the middle of the window) lies before the newest sample"""


class VelocityEstimator:
    """Per joint, the mean velocity over the last `window_s` of stamped positions."""

    def __init__(self, window_s: float = WINDOW_S, max_span_s: float = MAX_SPAN_S) -> None:
        self.window_s, self.max_span_s = window_s, max_span_s
        self._samples: dict[str, deque[tuple[float, float]]] = {}

    def add(self, name: str, t_s: float, position: float) -> None:
        """One sample (time in seconds, stamp or receipt; position). Out-of-order or repeated times
        and non-finite positions are dropped."""
        if not math.isfinite(position) or not math.isfinite(t_s):
            return
        q = self._samples.setdefault(name, deque())
        if q and t_s <= q[-1][0]:
            return
        q.append((t_s, position))
        # keep the newest sample at least window_s older than the newest (and nothing older)
        while len(q) > 2 and t_s - q[1][0] >= self.window_s:
            q.popleft()

    def estimate(self, name: str) -> Estimate | None:
        """The velocity over the window ending at the newest sample; None with fewer than two samples
        or when they lie more than `max_span_s` apart."""
        q = self._samples.get(name)
        if not q or len(q) < 2:
            return None
        (t0, p0), (t1, p1) = q[0], q[-1]
        span = t1 - t0
        if span <= 0 or span > self.max_span_s:
            return None
        return Estimate((p1 - p0) / span, span / 2)


def choose_velocity(
    published: np.ndarray,
    estimated: np.ndarray,
    estimate_lag_s: float,
    planned: np.ndarray | None,
    max_lag_s: float,
) -> tuple[np.ndarray, str] | None:
    """The velocity a stop brakes from, and its source: the published one where every joint has a
    finite one; else the estimate where it is complete and no older than `max_lag_s`; else the
    trajectory the controller follows (`planned`, what the controller commands now); else None
    (nothing known: never an assumed rest)."""
    published = np.asarray(published, float)
    if published.size and np.all(np.isfinite(published)):
        return published, PUBLISHED
    estimated = np.asarray(estimated, float)
    if estimated.size and np.all(np.isfinite(estimated)) and estimate_lag_s <= max_lag_s:
        return estimated, ESTIMATED
    if planned is not None:
        return np.asarray(planned, float), TRAJECTORY
    return None
