"""Where a roofed container (a microwave) opens: from the boxes of its fixed parts, the side of a
goal region no wall closes, and the rectangle its floor, ceiling and side walls leave there.

A hand pointing down does not fit under such a container's ceiling, so what goes in is put
through this opening from the front. Boxes are axis-aligned in the robot base frame (cm), as the
LIBERO adapter gives them; a container turned by other than a multiple of 90 degrees is not
handled (its boxes would not be its walls). Pure geometry: nothing here reads a simulator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Box = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Opening:
    """A side opening: `axis` (0 = x, 1 = y) and `sign` give the outward direction; `face` is the
    plane of the opening and `back` the inner face of the wall opposite, both as coordinates along
    the outward direction (larger = further out); `side_lo`/`side_hi` bound it along the other
    horizontal axis; `floor_z` and `ceiling_z` below and above."""

    axis: int
    sign: float
    face: float
    back: float
    side_lo: float
    side_hi: float
    floor_z: float
    ceiling_z: float

    @property
    def outward(self) -> np.ndarray:
        """Unit xy vector pointing out of the opening."""
        v = np.zeros(2)
        v[self.axis] = self.sign
        return v

    def out_cm(self, xy: np.ndarray) -> float:
        """How far out a point lies, as a coordinate along the outward direction."""
        return self.sign * float(np.asarray(xy, float)[self.axis])

    def side_cm(self, xy: np.ndarray) -> float:
        """A point's coordinate along the opening's width."""
        return float(np.asarray(xy, float)[1 - self.axis])

    def point(self, out_cm: float, side_cm: float) -> np.ndarray:
        """The xy point at these opening coordinates."""
        v = np.zeros(2)
        v[self.axis] = self.sign * out_cm
        v[1 - self.axis] = side_cm
        return v

    @property
    def middle_cm(self) -> float:
        return (self.side_lo + self.side_hi) / 2


def _covers(lo: np.ndarray, hi: np.ndarray, point: np.ndarray, axes: tuple[int, ...]) -> bool:
    return all(lo[a] <= point[a] <= hi[a] for a in axes)


def side_opening(center_cm: np.ndarray, half_cm: np.ndarray, parts: list[Box]) -> Opening | None:
    """The opening of the container whose fixed parts are `parts` round the region centred at
    `center_cm` (half extents `half_cm`): the one horizontal side with no wall across it; None
    when the region has no ceiling (it is reached from above), or not exactly one open side."""
    c = np.asarray(center_cm, float)
    half = np.asarray(half_cm, float)
    boxes = [(np.asarray(lo, float), np.asarray(hi, float)) for lo, hi in parts]
    above = [(lo, hi) for lo, hi in boxes if _covers(lo, hi, c, (0, 1)) and lo[2] >= c[2]]
    below = [(lo, hi) for lo, hi in boxes if _covers(lo, hi, c, (0, 1)) and hi[2] <= c[2]]
    if not above:
        return None

    def walls(axis: int, sign: float) -> list[Box]:
        """Boxes across the region's middle on that side (they span its centre line and height)."""
        other = 1 - axis
        return [
            (lo, hi)
            for lo, hi in boxes
            if _covers(lo, hi, c, (other, 2)) and (lo[axis] >= c[axis] if sign > 0 else hi[axis] <= c[axis])
        ]

    open_sides = [(a, s) for a in (0, 1) for s in (1.0, -1.0) if not walls(a, s)]
    if len(open_sides) != 1:
        return None
    axis, sign = open_sides[0]
    other = 1 - axis

    def outmost(lo: np.ndarray, hi: np.ndarray) -> float:
        return max(sign * lo[axis], sign * hi[axis])

    face = max(outmost(lo, hi) for lo, hi in above + below)
    back_walls = walls(axis, -sign)
    back = max(outmost(lo, hi) for lo, hi in back_walls)
    lo_walls, hi_walls = walls(other, -1.0), walls(other, 1.0)
    side_lo = max((float(hi[other]) for _, hi in lo_walls), default=float(c[other] - half[other]))
    side_hi = min((float(lo[other]) for lo, _ in hi_walls), default=float(c[other] + half[other]))
    floor_z = max((float(hi[2]) for _, hi in below), default=float(c[2] - half[2]))
    ceiling_z = min(float(lo[2]) for lo, _ in above)
    return Opening(axis, sign, float(face), float(back), side_lo, side_hi, floor_z, ceiling_z)
