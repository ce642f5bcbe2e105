"""Small, exact statistics for success rates: Wilson intervals and the exact McNemar test."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95% Wilson score interval for a binomial proportion (sensible at 0/n and n/n, unlike Wald)."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: b = A succeeded and B failed,
    c = the reverse. Under H0 each discordant pair is a fair coin: binomial(b + c, 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def latency_stats(latencies: Sequence[float]) -> tuple[float | None, float | None]:
    """(median, p90) in seconds, None when there were no decisions."""
    if not latencies:
        return (None, None)
    arr = np.asarray(latencies, dtype=float)
    return (float(np.median(arr)), float(np.percentile(arr, 90)))
