"""Scripted expert for LIBERO's pick-and-place suites (libero_spatial, libero_object).

It reads the BDDL goal (`on`/`in` OBJECT TARGET) and the objects' bounds from the privileged
facts the LIBERO adapter provides, and answers through the same text protocol as a model. Wide
objects (bowls) are taken by the near rim, fingers across the wall; narrow ones from the top,
fingers across the narrow side. Stateless: each turn's phase comes from the geometry it sees.
Units: cm and rad in the robot base frame. Nothing here imports LIBERO.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

State = dict[str, dict[str, Any]]


def wrap(a: np.ndarray | float) -> np.ndarray:
    return (np.asarray(a, dtype=float) + np.pi) % (2 * np.pi) - np.pi


GRIPPER_SPAN_CM = 7.0
"""Objects wider than this in both x and y are taken by the rim."""


def _yaw_near(yaw: float, current: float) -> float:
    options = yaw + np.arange(-2, 3) * math.pi  # the fingers are symmetric: period pi
    return float(options[np.argmin(np.abs(wrap(options - current)))])


def _act(pos: np.ndarray | None = None, rot: np.ndarray | None = None, gripper: float | None = None) -> dict:
    out: dict[str, Any] = {}
    if pos is not None:
        out["position"] = [round(float(v), 2) for v in pos]
    if rot is not None and float(np.max(np.abs(rot))) > 0.01:
        out["orientation"] = [round(float(v), 3) for v in rot]
    if gripper is not None:
        out["gripper"] = gripper
    return out


RIM_OPENING = 0.5
"""Gripper opening (4 cm) for a rim grasp: the outer finger needs little room beside the object
(a drawer's wall, a neighbour), the inner one stays clear of the bowl's inside."""


def grasp_plan(obj: dict[str, Any]) -> tuple[np.ndarray, float, float]:
    """Tool point, yaw and gripper opening for grasping: the near rim of a wide object, fingers
    across its wall; else the top centre, fingers across the narrow side."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    c = (lo + hi) / 2
    ext = hi - lo
    if ext[0] > GRIPPER_SPAN_CM and ext[1] > GRIPPER_SPAN_CM:
        # rim nearest the robot; fingers close along x (tool y along x: yaw pi/2)
        return np.array([lo[0] + 0.6, c[1], hi[2] - 1.2]), math.pi / 2, RIM_OPENING
    yaw = math.pi / 2 if ext[0] <= ext[1] else 0.0
    return np.array([c[0], c[1], hi[2] - min(3.0, ext[2] / 2)]), yaw, 1.0


def _target_surface(target: dict[str, Any]) -> tuple[np.ndarray, float]:
    """Where the object goes: xy of the target (a region's site, or an object's centre) and the
    height its bottom must clear."""
    xy = np.asarray(target["position_cm"], float)[:2]
    box = target.get("parent", target)
    return xy, float(box["max_cm"][2])


def pick_place(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    arm = state["arm"]
    goal = next((g for g in priv["goal"] if g[0] in ("on", "in")), None)
    if goal is None:
        return "This task has no pick-and-place goal; I hold still.", {"arm": {}}
    obj, target = priv["objects"][goal[1]], priv["objects"][goal[2]]
    p = np.asarray(arm["position"], float)
    cur_rpy = np.asarray(arm["orientation"], float)
    g = float(arm.get("gripper", 1.0))
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    center = (lo + hi) / 2
    grasp, yaw, opening = grasp_plan(obj)
    rot = wrap(np.array([math.pi, 0.0, _yaw_near(yaw, cur_rpy[2])]) - cur_rpy)
    near = bool(
        np.all(p[:2] > lo[:2] - 1.5) and np.all(p[:2] < hi[:2] + 1.5) and lo[2] - 1 < p[2] < hi[2] + 1.5
    )
    rest = float(obj.get("rest_bottom_cm", lo[2]))
    # closed on something (a bowl's wall is ~3 mm: g ~0.03), or the object has left where it rested
    holding = near and g < opening - 0.15 and (g > 0.012 or lo[2] > rest + 1.0)
    tgt_xy, tgt_top = _target_surface(target)
    if holding:
        below = p[2] - lo[2]  # the tool's height above the object's bottom
        want_xy = tgt_xy + (p[:2] - center[:2])
        d = want_xy - p[:2]
        # carry with the bottom clear of the target and lifted out of where it rested (a drawer...)
        carry_z = max(tgt_top + 4.0, rest + 9.0) + below
        if np.linalg.norm(d) > 1.0:
            if p[2] < carry_z - 1.0:
                return (
                    f"I hold the {goal[1]}; I lift it clear before carrying it.",
                    {"arm": _act(np.array([0, 0, carry_z - p[2]]), None, 0.0)},
                )
            return (
                f"I carry the {goal[1]} {np.linalg.norm(d):.1f} cm towards the {goal[2]}.",
                {"arm": _act(np.array([d[0], d[1], carry_z - p[2]]), None, 0.0)},
            )
        release_z = tgt_top + 1.0 + below
        if p[2] > release_z + 0.8:
            return f"The {goal[1]} is above the {goal[2]}; I lower it.", {
                "arm": _act(np.array([d[0], d[1], release_z - p[2]]), None, 0.0)
            }
        return f"The {goal[1]} is just above the {goal[2]}; I let go.", {"arm": _act(None, None, 1.0)}
    hover_z = hi[2] + 8.0
    dxy = grasp[:2] - p[:2]
    if g < opening - 0.15:
        up = max(0.0, min(8.0, hover_z - p[2]))
        return (
            "The gripper is not open and holds nothing; I open it and move up.",
            {"arm": _act(np.array([0, 0, up]), None, opening)},
        )
    grip = opening if abs(g - opening) > 0.1 else None
    if np.linalg.norm(dxy) > 0.8:
        if p[2] < hi[2] + 3.0:
            return "I am low and not at the grasp point; I rise first.", {
                "arm": _act(np.array([0, 0, hover_z - p[2]]), rot, grip)
            }
        return (
            f"The grasp point on the {goal[1]} is {np.linalg.norm(dxy):.1f} cm away; I move above it.",
            {"arm": _act(np.array([dxy[0], dxy[1], hover_z - p[2]]), rot, grip)},
        )
    if float(np.max(np.abs(rot))) > 0.04:
        return "I am above the grasp point; I square the gripper.", {"arm": _act(None, rot, grip)}
    if p[2] > grasp[2] + 0.6:
        return f"I lower the open gripper to the {goal[1]}.", {
            "arm": _act(np.array([dxy[0], dxy[1], grasp[2] - p[2]]), rot, grip)
        }
    return f"The {goal[1]} is between the fingers; I close the gripper.", {"arm": _act(None, None, 0.0)}


EXPERT_SUITES = ("libero_spatial", "libero_object")
"""Suites the expert solves; it reads each task's BDDL goal, so a LIBERO-Pro or LIBERO-Plus task
built on one of them gets the same expert (whether it succeeds there is what is measured)."""


def _libero_experts() -> dict[str, Any]:
    from sim_adapters.libero import task_names
    from sim_adapters.libero.naming import parse

    return {name: pick_place for name in task_names() if parse(name).suite in EXPERT_SUITES}


LIBERO_EXPERTS = _libero_experts()
