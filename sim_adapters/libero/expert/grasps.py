"""How an object is grasped (by the rim or from the top, by a knob) and how a blocking one is shoved aside."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim_adapters.libero.expert.hand import (
    FINGERTIP_BELOW_TCP_CM,
    LIFT_CM,
    _words,
    fingers_hit,
    hand_hits,
    travel,
)
from sim_adapters.libero.expert.scene import (
    GRIPPER_SPAN_CM,
    MAX_STEP_CM,
    RIM_OPENING,
    Arm,
    Reply,
    Scene,
    _reply,
    wrap,
)

TOP_KNOB = ("moka_pot",)
"""Objects taken by the knob on their lid, from above (a moka pot: too wide to span, no rim)."""


def grasp_options(obj: dict[str, Any], name: str = "") -> list[tuple[np.ndarray, float, float]]:
    """Tool point, yaw and gripper opening for grasping, best first: a wide object (bowl, mug) by
    its rim, fingers across the wall, the rim nearest the robot first and then round the object,
    away from a mug's handle; a lidded one (moka pot) by the knob on its lid; a narrow one from
    the top, fingers across its narrow side, or across the other where they span that too (a can
    with a tall neighbour beside it)."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    c = (lo + hi) / 2
    ext = hi - lo
    ring = np.asarray(obj.get("rim_center_cm", c[:2]), float)
    half = obj.get("box_half_cm")
    if half is not None and 2 * half[0] < GRIPPER_SPAN_CM:  # a thin box (a book): across its thin side
        z = max(hi[2] - min(3.0, ext[2] / 2), lo[2] + FINGERTIP_BELOW_TCP_CM + 0.3)
        return [(np.array([ring[0], ring[1], z]), float(obj["thin_yaw_rad"]) - math.pi / 2, 1.0)]
    if any(k in name for k in TOP_KNOB):
        return [
            (np.array([ring[0], ring[1], hi[2] - 1.0]), a, 0.4)
            for a in (0.0, math.pi / 2, math.pi / 4, -math.pi / 4)
        ]
    if ext[0] > GRIPPER_SPAN_CM and ext[1] > GRIPPER_SPAN_CM:
        radius = float(obj.get("rim_radius_cm") or 0.0)
        handle = c[:2] - ring  # a handle pulls the bounds' centre off the rim's: grasp away from it
        phis = [math.pi + k * math.pi / 6 for k in (0, 1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6)]
        if float(np.linalg.norm(handle)) > 1.0:
            toward = math.atan2(handle[1], handle[0])
            phis = [p for p in phis if abs(float(wrap(p - toward))) > math.pi / 3]
        out = []
        for phi in phis:
            radial = np.array([math.cos(phi), math.sin(phi)])
            if radius > 1.0:
                xy = ring + radial * radius
            else:
                reach = 1.0 / max(abs(radial[0]) / (ext[0] / 2), abs(radial[1]) / (ext[1] / 2))
                xy = c[:2] + radial * (reach - 0.6)
            tool = np.array([*xy, max(hi[2] - 1.2, lo[2] + FINGERTIP_BELOW_TCP_CM + 0.2)])
            out.append((tool, phi - math.pi / 2, RIM_OPENING))  # fingers close along the radius
        return out
    yaw = math.pi / 2 if ext[0] <= ext[1] else 0.0
    z = max(hi[2] - min(3.0, ext[2] / 2), lo[2] + FINGERTIP_BELOW_TCP_CM + 0.3)  # fingertips off the table
    top = np.array([c[0], c[1], z])
    if max(ext[0], ext[1]) < GRIPPER_SPAN_CM:  # the fingers span it either way (a can): square to that too
        return [(top, yaw, 1.0), (top, yaw - math.pi / 2, 1.0)]
    return [(top, yaw, 1.0)]


def grasp_plan(
    obj: dict[str, Any], scene: Scene | None = None, name: str = ""
) -> tuple[np.ndarray, float, float]:
    """The first grasp option whose hand clears its neighbours there and on the way up; else the
    first that clears them there (the object is then slid clear before it is lifted); else the
    first."""
    options = grasp_options(obj, name)
    if scene is None:
        return options[0]
    free = [
        o for o in options if not hand_hits(scene, o[0], o[1], {name}) and not fingers_hit(scene, *o, {name})
    ]
    lifts = [o for o in free if not hand_hits(scene, o[0], o[1], {name}, LIFT_CM)]
    return (lifts or free or options)[0]


def graspable(scene: Scene, obj: dict[str, Any], name: str) -> bool:
    """Some grasp of the object leaves the hand clear there and all the way up."""
    return any(not hand_hits(scene, o[0], o[1], {name}, LIFT_CM) for o in grasp_options(obj, name))


def _shifted(obj: dict[str, Any], delta: np.ndarray) -> dict[str, Any]:
    """The object's facts as they will be after it is slid by `delta`: every position moves, the rim's
    centre (what a rim grasp is planned from) included."""
    out = dict(obj)
    for key in ("min_cm", "max_cm", "position_cm", "body_cm", "rim_center_cm"):
        if key in out:
            v = np.asarray(out[key], float)
            out[key] = (v + delta[: len(v)]).tolist()
    return out


def clearing_shove(scene: Scene, later: Scene, obj: dict[str, Any], name: str) -> np.ndarray | None:
    """The shortest push along the table (8 directions, robot side first) after which the object
    can be grasped in the scene as it will be (`later`), pushed from a side the hand can reach now."""
    for dist in (4.0, 6.0, 8.0, 10.0, 13.0, 16.0):
        for k in range(8):
            a = math.pi + k * math.pi / 4
            unit = np.array([math.cos(a), math.sin(a), 0.0])
            if all(graspable(later, _shifted(obj, unit * x), name) for x in (dist, dist + 2.0, dist + 4.0)):
                return unit * (dist + 2.0)  # the middle of a range that works: a push is not exact
    return None


def shove_object(
    arm: Arm, scene: Scene, name: str, obj: dict[str, Any], delta: np.ndarray, why: str
) -> Reply:
    """Push an object along the table by `delta` with the closed fingertips against its far side."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    dist = float(np.linalg.norm(delta[:2]))
    v = delta[:2] / max(dist, 1e-6)
    reach = 1.0 / max(abs(v[0]) / ((hi[0] - lo[0]) / 2), abs(v[1]) / ((hi[1] - lo[1]) / 2), 1e-6)
    contact = (lo[:2] + hi[:2]) / 2 - v * (reach + 1.2)
    z = float(lo[2]) + FINGERTIP_BELOW_TCP_CM + 0.5
    yaw = math.atan2(v[1], v[0])  # fingers side by side across the push
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    what = _words(name)
    rel = p[:2] - (lo[:2] + hi[:2]) / 2
    behind = -reach - 3.0 < float(rel @ v) < -reach + 1.0 and abs(float(rel @ np.array([-v[1], v[0]]))) < 2.5
    if behind and abs(p[2] - z) < 1.2 and g < 0.2:
        return _reply(
            f"{why}I push the {what} {dist + 1.2:.1f} cm aside.",
            np.append(v * min(dist + 1.2, MAX_STEP_CM), 0.0),
            None,
            None,
        )
    if g > 0.2:
        return _reply(
            f"{why}I close the gripper to push the {what} aside.",
            [0, 0, max(0.0, hi[2] + 6 - p[2])],
            None,
            0.0,
        )
    dxy = float(np.linalg.norm(contact - p[:2]))
    if dxy < 0.8 and float(np.max(np.abs(rot))) > 0.05:
        return _reply(f"{why}I square the gripper behind the {what}.", None, rot, None)
    if dxy < 0.8:
        return _reply(
            f"{why}I lower the fingertips beside the {what}.", np.append(contact - p[:2], z - p[2]), rot, None
        )
    step = travel(arm, scene, np.append(contact, hi[2] + 4.0), {name})
    return _reply(f"{why}I move behind the {what} to push it aside.", step, rot, None)
