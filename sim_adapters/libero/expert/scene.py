"""What the LIBERO expert reads each turn: the arm's tool point and the scene's objects, goal regions
and joints (cm, rad, robot base frame), and the per-turn caps its replies keep within."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

State = dict[str, dict[str, Any]]
Reply = tuple[str, dict[str, Any]]
MAX_STEP_CM = 9.9
"""Just under the robot's 10 cm per-turn position cap (rounding to 0.01 cm stays under it)."""
MAX_TURN_RAD = 0.49
"""Just under its 0.5 rad per-axis orientation cap."""
GRIPPER_SPAN_CM = 7.0
"""Objects wider than this in both x and y are taken by the rim."""
RIM_OPENING = 0.5
"""Gripper opening (4 cm) for a rim grasp: the outer finger needs little room beside the object
(a drawer's wall, a neighbour), the inner one stays clear of the bowl's inside."""
LEAN_RAD = math.pi / 4
"""How far the gripper leans into a drawer it pushes closed (its wrist then clears the handles
of the drawers above)."""
FLAT_CM = 2.5
"""Objects lower than this (plates) are pushed, not grasped."""
CLEARANCE_CM = 4.0
"""How far a carried object's bottom stays above whatever it passes over."""


def wrap(a: np.ndarray | float) -> np.ndarray:
    return (np.asarray(a, dtype=float) + np.pi) % (2 * np.pi) - np.pi


def _yaw_near(yaw: float, current: float) -> float:
    options = yaw + np.arange(-2, 3) * math.pi  # the fingers are symmetric: period pi
    return float(options[np.argmin(np.abs(wrap(options - current)))])


def _act(pos: np.ndarray | None = None, rot: np.ndarray | None = None, gripper: float | None = None) -> dict:
    """One arm action within the per-turn caps: a longer move is shortened along its direction."""
    out: dict[str, Any] = {}
    if pos is not None:
        pos = np.asarray(pos, dtype=float)
        norm = float(np.linalg.norm(pos))
        if norm > MAX_STEP_CM:
            pos = pos * (MAX_STEP_CM / norm)
        if norm > 0.05:
            out["position"] = [round(float(v), 2) for v in pos]
    if rot is not None and float(np.max(np.abs(rot))) > 0.01:
        out["orientation"] = [round(float(v), 3) for v in np.clip(rot, -MAX_TURN_RAD, MAX_TURN_RAD)]
    if gripper is not None:
        out["gripper"] = gripper
    return out


def _reply(
    text: str, pos: np.ndarray | None = None, rot: np.ndarray | None = None, grip: float | None = None
) -> Reply:
    return text, {"arm": _act(pos, rot, grip)}


class Arm:
    """The arm's state as the protocol gives it: tool position (cm), orientation (rad), opening."""

    def __init__(self, state: State) -> None:
        arm = state["arm"]
        self.p = np.asarray(arm["position"], float)
        self.rpy = np.asarray(arm["orientation"], float)
        self.g = float(arm.get("gripper", 1.0))

    @property
    def down(self) -> bool:
        """The gripper points (about) straight down."""
        return abs(float(wrap(self.rpy[0] - math.pi))) < 0.25 and abs(float(self.rpy[1])) < 0.25

    def approach(self) -> np.ndarray:
        """The direction the fingers point (the tool's z axis), base frame."""
        r, p, y = self.rpy
        return np.array(
            [
                math.cos(y) * math.sin(p) * math.cos(r) + math.sin(y) * math.sin(r),
                math.sin(y) * math.sin(p) * math.cos(r) - math.cos(y) * math.sin(r),
                math.cos(p) * math.cos(r),
            ]
        )

    def turn_level(self, yaw: float) -> np.ndarray:
        """Orientation change towards pointing level (fingers closing vertically) along the
        direction `yaw - pi/2`: first the yaw while still pointing down, then the tilt, so every
        intermediate pose is one the arm can take. Of the two equal poses (the fingers are
        symmetric) the one needing less yaw."""
        r0, _, y0 = self.rpy
        targets = [(math.pi / 2, yaw), (-math.pi / 2, yaw + math.pi)]
        roll, yaw_t = min(targets, key=lambda t: abs(float(wrap(t[1] - y0))))
        dyaw = float(wrap(yaw_t - y0))
        if abs(dyaw) > 0.06 and abs(float(wrap(r0 - math.pi))) < 0.15:
            return np.array([float(wrap(math.pi - r0)), -float(self.rpy[1]), dyaw])
        return wrap(np.array([roll, 0.0, yaw_t]) - self.rpy)

    def lean_to(self, toward: np.ndarray, tilt_rad: float) -> np.ndarray:
        """Orientation change to point the fingers along `toward` (xy), `tilt_rad` below level,
        closing horizontally. Of the two ways to write that pose, the one nearer the orientation
        now (the other swings the hand half a turn round)."""
        yaw = math.atan2(float(toward[1]), float(toward[0]))
        options = [
            np.array([math.pi, -(math.pi / 2 - tilt_rad), yaw]),
            np.array([math.pi, math.pi / 2 - tilt_rad, yaw + math.pi]),
        ]
        return min((wrap(o - self.rpy) for o in options), key=lambda r: float(np.max(np.abs(r))))

    def turn_to(self, yaw: float) -> np.ndarray:
        """Orientation change to point the gripper down at `yaw` (the nearer of the two)."""
        return wrap(np.array([math.pi, 0.0, _yaw_near(yaw, self.rpy[2])]) - self.rpy)


class Scene:
    """The privileged facts, with the geometry the skills ask about."""

    def __init__(self, priv: dict[str, Any]) -> None:
        self.priv = priv
        self.objects: dict[str, dict[str, Any]] = priv["objects"]
        self.others: dict[str, dict[str, Any]] = priv.get("others", {})

    def boxes(self, skip: set[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for name, f in [*self.objects.items(), *self.others.items()]:
            if name in skip or "min_cm" not in f:
                continue
            out.append((np.asarray(f["min_cm"], float), np.asarray(f["max_cm"], float)))
        return out

    def moved(self, label: str, delta_cm: np.ndarray) -> Scene:
        """This scene with one of its parts (an obstacle's box) shifted: a drawer as it will be."""
        priv = dict(self.priv)
        others = dict(self.others)
        if label in others:
            box = others[label]
            others[label] = {
                "min_cm": (np.asarray(box["min_cm"], float) + delta_cm).tolist(),
                "max_cm": (np.asarray(box["max_cm"], float) + delta_cm).tolist(),
            }
        priv["others"] = others
        return Scene(priv)

    def needed_z(self, xy: np.ndarray, skip: set[str], margin_cm: float) -> float:
        """The highest top of anything whose footprint (grown by `margin_cm`) covers xy; 0 (the
        table) when nothing does."""
        top = 0.0
        for lo, hi in self.boxes(skip):
            if np.all(xy > lo[:2] - margin_cm) and np.all(xy < hi[:2] + margin_cm):
                top = max(top, float(hi[2]))
        return top

    def top_along(self, a: np.ndarray, b: np.ndarray, skip: set[str], margin_cm: float) -> float:
        """The highest top of anything whose footprint (grown by `margin_cm`) the straight path
        from a to b (xy) passes over; the table (0) when nothing is in the way."""
        top = 0.0
        for lo, hi in self.boxes(skip):
            for t in np.linspace(0.0, 1.0, 12):
                q = a[:2] + t * (b[:2] - a[:2])
                if np.all(q > lo[:2] - margin_cm) and np.all(q < hi[:2] + margin_cm):
                    top = max(top, float(hi[2]))
                    break
        return top
