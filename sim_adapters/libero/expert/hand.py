"""The Panda hand against the scene: where its box and fingers collide, how it escapes a snag, and
travel at a height that clears what lies below."""

from __future__ import annotations

import math

import numpy as np

from sim_adapters.libero.expert.scene import CLEARANCE_CM, Arm, Scene

# -- picking and placing ------------------------------------------------------------------------
HAND_HALF_CM = (10.6, 4.3)
"""The Panda hand's half extent along the finger axis and across it (robosuite's collision box)."""
FINGERTIP_BELOW_TCP_CM = 1.3
"""How far the fingertips reach below the tool point."""
HAND_ABOVE_TCP_CM = 2.4
"""Its lowest point above the tool point."""
HAND_SLACK_CM = 1.5
"""How far something may reach up past the hand's box and still pass (its box is the corners of
a rounded mesh)."""
HAND_TOP_CM = 12.7
"""The top of the hand above the tool point."""
LIFT_CM = 12.0
"""How far a grasped object is lifted straight up before it is carried."""


def hand_hits(
    scene: Scene, tool: np.ndarray, yaw: float, skip: set[str], rise_cm: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """What the hand, pointing down at `tool` with its fingers closing at `yaw`, touches there or
    on its way up by `rise_cm`: everything whose bounds meet the hand's (turned) box."""
    bottom, top = float(tool[2]) + HAND_ABOVE_TCP_CM, float(tool[2]) + HAND_TOP_CM + rise_cm
    return [
        (lo, hi)
        for lo, hi in scene.boxes(skip)
        if hi[2] > bottom + HAND_SLACK_CM and lo[2] < top and _under_hand(tool, yaw, lo, hi)
    ]


def _under_hand(tool: np.ndarray, yaw: float, lo: np.ndarray, hi: np.ndarray) -> bool:
    """Whether a box's footprint meets that of the hand pointing down at `tool` with its fingers
    closing at `yaw` (separating axes of a turned rectangle and an axis-aligned one)."""
    along = np.array([-math.sin(yaw), math.cos(yaw)])  # the fingers close along the tool's y axis
    across = np.array([along[1], -along[0]])
    c_box, h_box = (lo[:2] + hi[:2]) / 2, (hi[:2] - lo[:2]) / 2
    d = c_box - np.asarray(tool[:2], float)
    for axis in (np.array([1.0, 0.0]), np.array([0.0, 1.0]), along, across):
        r_hand = HAND_HALF_CM[0] * abs(float(along @ axis)) + HAND_HALF_CM[1] * abs(float(across @ axis))
        r_box = h_box[0] * abs(float(axis[0])) + h_box[1] * abs(float(axis[1]))
        if abs(float(d @ axis)) > r_hand + r_box:
            return False
    return True


HAND_CLEARANCE_CM = 1.0
"""How far the hand's box stays above whatever its footprint passes over."""


def hand_need(scene: Scene, xy: np.ndarray, yaws: tuple[float, ...], skip: set[str]) -> float:
    """The lowest tool height at which the hand, pointing down at xy with its fingers at any of
    `yaws`, passes over everything under its footprint (it reaches 10.6 cm along the fingers, far
    past the margin kept round the tool point: an open drawer beside the path)."""
    tops = [
        float(hi[2])
        for lo, hi in scene.boxes(skip)
        for yaw in yaws
        if _under_hand(np.asarray(xy, float), yaw, lo, hi)
    ]
    return max(tops, default=-np.inf) - HAND_ABOVE_TCP_CM + HAND_CLEARANCE_CM


def fingers_hit(scene: Scene, tool: np.ndarray, yaw: float, opening: float, skip: set[str]) -> bool:
    """Whether the open fingers, lowered to `tool`, would land on something beside the object
    (a neighbour a rim grasp's outer finger would clamp along with it)."""
    along = np.array([-math.sin(yaw), math.cos(yaw)])
    reach = opening * 4.0 + 1.2  # half the opening (8 cm at 1.0) plus a finger's thickness
    pts = [tool[:2] + t * along for t in np.linspace(-reach, reach, 9)]
    low, high = float(tool[2]) - FINGERTIP_BELOW_TCP_CM, float(tool[2]) + 4.9
    for lo, hi in scene.boxes(skip):
        if hi[2] < low or lo[2] > high:
            continue
        for q in pts:
            if np.all(q > lo[:2] - 0.8) and np.all(q < hi[:2] + 0.8):
                return True
    return False


def hand_clear(scene: Scene, tool: np.ndarray, yaw: float, skip: set[str]) -> bool:
    return not hand_hits(scene, tool, yaw, skip)


def escape(scene: Scene, tool: np.ndarray, yaw: float, skip: set[str]) -> np.ndarray | None:
    """A short horizontal slide after which the hand can rise LIFT_CM without touching anything
    (something overhangs the grasp: an open drawer); None when it can rise where it is."""
    if not hand_hits(scene, tool, yaw, skip, LIFT_CM):
        return None
    for dist in (3.0, 5.0, 7.0, 9.0, 12.0):
        for k in range(8):
            a = math.pi + k * math.pi / 4  # towards the robot first
            d = np.array([math.cos(a), math.sin(a), 0.0]) * dist
            if not hand_hits(scene, tool + d, yaw, skip, LIFT_CM) and not hand_hits(
                scene, tool + d / 2, yaw, skip
            ):
                return d
    return None


def _safe_height(arm: Arm, scene: Scene) -> float:
    """Where a level gripper can turn down: 10 cm above everything within 15 cm."""
    p = arm.p
    near = [
        hi for lo, hi in scene.boxes(set()) if np.all(p[:2] > lo[:2] - 15) and np.all(p[:2] < hi[:2] + 15)
    ]
    return max([float(h[2]) for h in near] + [0.0]) + 10.0


def travel(
    arm: Arm,
    scene: Scene,
    goal: np.ndarray,
    skip: set[str],
    below_cm: float = 0.0,
    margin_cm: float = 4.0,
    yaw: float | None = None,
) -> np.ndarray:
    """The next position change of the tool on its way to `goal`, carrying something that hangs
    `below_cm` under it: straight there when nothing is in the way, else up to a height clear of
    everything under the path, across, and straight down onto the goal. With the gripper pointing
    down, the hand's footprint (at its yaw now and at `yaw`, where it is turning to) is kept clear
    too."""
    a, b = arm.p, np.asarray(goal, float)
    yaws = ((float(arm.rpy[2]),) if arm.down else ()) + ((yaw,) if yaw is not None else ())

    def need(xy: np.ndarray) -> float:
        tool = scene.needed_z(xy, skip, margin_cm) + CLEARANCE_CM + below_cm
        return max(tool, hand_need(scene, xy, yaws, skip)) if yaws else tool

    def clear(s: np.ndarray, e: np.ndarray) -> bool:
        for t in np.linspace(0.0, 1.0, 16):
            q = s + t * (e - s)
            if float(np.linalg.norm(q[:2] - b[:2])) < 2.0:
                continue  # the last bit above the goal: straight down onto it is the approach
            if q[2] < need(q[:2]) - 0.5:
                return False
        return True

    if float(np.linalg.norm(a[:2] - b[:2])) < 1.0 or clear(a, b):
        return b - a
    hover = np.array([b[0], b[1], max(b[2], need(b[:2]))])
    if clear(a, hover):
        return hover - a
    cruise = max(need(a[:2] + t * (b[:2] - a[:2])) for t in np.linspace(0.0, 1.0, 16))
    cruise = max(cruise, float(b[2]))
    if a[2] < cruise - 0.5:
        return np.array([0.0, 0.0, cruise - a[2]])
    d = b[:2] - a[:2]
    return np.array([d[0], d[1], cruise - a[2]])


def _words(name: str) -> str:
    """A BDDL name as words: `akita_black_bowl_1` -> `akita black bowl`."""
    parts = name.split("_")
    if parts and parts[-1].isdigit():
        parts = parts[:-1]
    return " ".join(parts)
