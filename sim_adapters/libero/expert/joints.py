"""Articulated objects: drawers opened by the handle and pushed closed leaning, doors swung by their
edge, stove knobs turned on their axis."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim_adapters.libero.expert.hand import _words, travel
from sim_adapters.libero.expert.scene import (
    LEAN_RAD,
    MAX_STEP_CM,
    MAX_TURN_RAD,
    Arm,
    Reply,
    Scene,
    _reply,
    wrap,
)


# -- joints: drawers, doors, knobs --------------------------------------------------------------
def _open_direction(j: dict[str, Any]) -> np.ndarray:
    """The way a slide joint's handle moves as it opens (base frame, unit)."""
    axis = np.asarray(j["axis"], float)
    r = j["ranges"]
    sign = np.sign(np.mean(r.get("open", [1.0])) - np.mean(r.get("close", [0.0])))
    return axis * sign


def _is_open(j: dict[str, Any]) -> bool:
    """LIBERO's own test: past the edge of the open range that faces the closed one."""
    r, closed = j["ranges"]["open"], float(np.mean(j["ranges"].get("close", [0.0])))
    return bool(j["value"] < max(r)) if np.mean(r) < closed else bool(j["value"] > min(r))


def _remaining(j: dict[str, Any], how: str) -> float:
    """How far (joint units) the joint still has to go to be open / closed (with a margin)."""
    r = j["ranges"]
    closed, opened = float(np.mean(r.get("close", [0.0]))), float(np.mean(r.get("open", [1.0])))
    goal = opened if how == "open" else closed
    return goal - float(j["value"])


def _opened_cm(j: dict[str, Any]) -> float:
    """How far (cm) a slide's part will have moved once pulled open: to the far edge of its open
    range (the pull overshoots the middle of the range by 1.5 cm and stops at the joint's end)."""
    r = j["ranges"]
    closed = float(np.mean(r.get("close", [0.0])))
    far = max(r["open"], key=lambda v: abs(float(v) - closed))
    return abs(float(far) - float(j["value"])) * 100.0


def operate(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str, why: str = "") -> Reply:
    """Open or close what a joint moves: a drawer by its handle, a door by its edge."""
    if j["kind"] == "slide":
        return _slide(arm, scene, name, j, how, why)
    return _door(arm, scene, name, j, how, why)


def _slide(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str, why: str) -> Reply:
    hmin, hmax = np.asarray(j["handle_min_cm"], float), np.asarray(j["handle_max_cm"], float)
    u = _open_direction(j)
    travel_cm = abs(_remaining(j, how)) * 100.0
    if how == "close":
        return _push_drawer(arm, name, hmin, hmax, u, travel_cm, why)
    parent = scene.objects.get(name, {}).get("parent")
    top = float(parent["max_cm"][2]) if parent is not None else float(hmax[2])
    return _pull_from_front(arm, name, hmin, hmax, u, travel_cm, why, top)


def _pull_from_front(
    arm: Arm,
    name: str,
    hmin: np.ndarray,
    hmax: np.ndarray,
    u: np.ndarray,
    travel_cm: float,
    why: str,
    clear_z: float,
) -> Reply:
    """Open a drawer by its handle: the gripper turned level high in front of it (clear of the
    cabinet while it turns), pointing into the drawer's front with the fingers above and below
    the bar, brought onto the handle, closed, and pulled."""
    grip = (hmin + hmax) / 2
    u = np.array([u[0], u[1], 0.0]) / max(float(np.linalg.norm(u[:2])), 1e-6)
    rot = arm.turn_level(math.atan2(-u[1], -u[0]) + math.pi / 2)
    level = float(np.max(np.abs(rot))) < 0.06
    p, g = arm.p, arm.g
    what = _words(name)
    rel = p - grip
    along = float(rel @ u)
    on_line = float(np.linalg.norm(rel - along * u)) < 1.2 and -1.0 < along < 12.0
    if level and float(np.linalg.norm(rel)) < 2.0 and 0.02 < g < 0.45:
        step = min(travel_cm + 1.5, MAX_STEP_CM)
        return _reply(
            f"{why}I hold the handle of the {what}; I pull it {step:.1f} cm open.", u * step, None, 0.0
        )
    if level and float(np.linalg.norm(rel)) < 1.2:
        return _reply(f"The handle of the {what} is between the fingers; I close them.", None, None, 0.0)
    grip_cmd = 0.7 if g < 0.45 else None
    if g < 0.45 and on_line:
        return _reply(
            f"{why}I back away from the handle of the {what} and open the gripper.", u * 6.0, None, 0.7
        )
    high = np.append(grip[:2] + u[:2] * 9.0, max(float(grip[2]), clear_z + 8.0))
    if not level:
        turn = rot if p[2] > clear_z - 6.0 else None  # turn only once up near the cabinet's top
        if float(np.linalg.norm(p - high)) > 1.5:
            return _reply(
                f"{why}I move high in front of the {what}, turning the gripper level.",
                high - p,
                turn,
                grip_cmd,
            )
        return _reply(
            f"{why}I turn the gripper level, pointing at the front of the {what}.", None, rot, grip_cmd
        )
    if on_line:
        return _reply(
            f"{why}I move the level gripper straight onto the handle of the {what}.", grip - p, None, grip_cmd
        )
    stand = grip + u * 9.0
    return _reply(
        f"{why}I lower the level gripper in front of the handle of the {what}.", stand - p, None, grip_cmd
    )


def _push_drawer(
    arm: Arm, name: str, hmin: np.ndarray, hmax: np.ndarray, u: np.ndarray, travel_cm: float, why: str
) -> Reply:
    """Close a drawer: closed fingertips against the outside of its handle, the gripper leaning 45
    degrees into the push so the wrist and hand stay clear of the handles above, pushed in."""
    u = np.array([u[0], u[1], 0.0]) / max(float(np.linalg.norm(u[:2])), 1e-6)
    handle = (hmin + hmax) / 2
    contact = handle + u * 1.6  # the fingertips against the outside of the handle bar
    z = float(handle[2])  # low: the hand's corner then passes under the handle above
    p, g = arm.p, arm.g
    push_dir = -u
    lean = np.array([math.pi, -LEAN_RAD, math.atan2(push_dir[1], push_dir[0])])
    rot = wrap(lean - arm.rpy)
    leaning = float(np.max(np.abs(rot))) < 0.06
    what = _words(name)
    rel = p[:2] - contact[:2]
    along = float(rel @ u[:2])
    off_line = abs(float(rel @ np.array([-u[1], u[0]])))
    if leaning and off_line < 1.5 and along < 1.5 and abs(p[2] - z) < 1.5 and g < 0.2:
        step = min(travel_cm + 1.5, MAX_STEP_CM)
        return _reply(
            f"{why}I push the {what} {step:.1f} cm closed.", np.append(push_dir[:2] * step, 0.0), None, None
        )
    hover_z = float(hmax[2]) + 8.0
    grip = 0.0 if g > 0.2 else None
    dxy = contact[:2] - p[:2]
    if np.linalg.norm(dxy) > 1.0:
        step = np.array([dxy[0], dxy[1], hover_z - p[2]])
        if p[2] < hover_z - 1.0 and np.linalg.norm(dxy) > 3.0:
            step = np.array([0.0, 0.0, hover_z - p[2]])
        return _reply(
            f"{why}I move above the front of the {what}, leaning the gripper into the push.", step, rot, grip
        )
    if not leaning:
        return _reply(f"{why}I lean the gripper into the push.", None, rot, grip)
    return _reply(
        f"{why}I lower the fingertips against the front of the {what}.",
        [dxy[0], dxy[1], z - p[2]],
        None,
        grip,
    )


DOOR_STANDOFF_CM = 4.0
"""How far off the line from the hinge to the door's handle the tool point stands to push: the hand,
its thin side to the door, lowers beside it rather than onto its top edge."""


def _door(
    arm: Arm,
    scene: Scene,
    name: str,
    j: dict[str, Any],
    how: str,
    why: str,
    goal_rad: float | None = None,
    plane_rad: float | None = None,
) -> Reply:
    """Swing a door about its hinge by pushing its face near the free edge: the gripper pointing
    down with its fingers along the door (the hand's thin side towards it), lowered beside the face
    and carried round the hinge, turning with the door. The door's line is the hinge's to its handle
    unless `plane_rad` gives the panel's own direction (from the inner side the handle's line
    lies beyond the panel); it swings to `goal_rad` when given."""
    anchor = np.asarray(j["anchor_cm"], float)
    hmin, hmax = np.asarray(j["handle_min_cm"], float), np.asarray(j["handle_max_cm"], float)
    edge = (hmin + hmax) / 2
    r_vec = edge[:2] - anchor[:2]
    radius = float(np.linalg.norm(r_vec))
    theta = math.atan2(r_vec[1], r_vec[0]) if plane_rad is None else plane_rad
    # radians, + = counter-clockwise about the (vertical) axis; to `goal_rad` when given
    togo = goal_rad - float(j["value"]) if goal_rad is not None else _remaining(j, how)
    axis_z = float(np.asarray(j["axis"])[2])
    sense = math.copysign(1.0, togo * axis_z)
    rho = 0.75 * radius  # push on the face, three quarters out
    # stand on the side of the face the push comes from, off the door
    normal = sense * np.array([-math.sin(theta), math.cos(theta)])
    contact = anchor[:2] + rho * np.array([math.cos(theta), math.sin(theta)]) - normal * DOOR_STANDOFF_CM
    z = float((hmin[2] + hmax[2]) / 2)
    p, g = arm.p, arm.g
    rot = arm.turn_to(theta - math.pi / 2)  # the fingers close along the door
    squared = float(np.max(np.abs(rot))) < 0.06
    if g > 0.2:
        return _reply(
            "I close the gripper to push with the fingertips.",
            [0, 0, max(0.0, hmax[2] + 5 - p[2])],
            None,
            0.0,
        )
    rel = p[:2] - anchor[:2]
    at_face = (
        abs(float(np.linalg.norm(rel)) - rho) < 3.0 and abs(wrap(math.atan2(rel[1], rel[0]) - theta)) < 0.4
    )
    if at_face and abs(p[2] - z) < 2.0:
        step_rad = sense * min(abs(togo) + 0.15, MAX_STEP_CM / rho * 0.95, MAX_TURN_RAD)
        ang = math.atan2(rel[1], rel[0]) + step_rad
        target = anchor[:2] + float(np.linalg.norm(rel)) * np.array([math.cos(ang), math.sin(ang)])
        return _reply(
            f"{why}I push the door of the {name} {'closed' if how == 'close' else 'open'}.",
            np.append(target - p[:2], 0.0),
            np.array([0.0, 0.0, step_rad * axis_z]),  # the hand turns with the door
            None,
        )
    hover = hmax[2] + 5.0
    dxy = contact - p[:2]
    if np.linalg.norm(dxy) > 1.0:
        if p[2] < hover - 1.0:
            return _reply(
                f"{why}I rise before going to the door of the {name}.", [0, 0, hover - p[2]], None, None
            )
        return _reply(
            f"{why}I move beside the door of the {name}, my fingers along it.",
            [dxy[0], dxy[1], hover - p[2]],
            rot,
            None,
        )
    if not squared:
        return _reply(f"{why}I turn my fingers along the door of the {name}.", None, rot, None)
    return _reply(f"{why}I lower the fingertips beside the door.", [dxy[0], dxy[1], z - p[2]], None, None)


def turn_knob(arm: Arm, scene: Scene, name: str, j: dict[str, Any], how: str) -> Reply:
    """Turn a knob (a hinge about the vertical) by its grip bar: fingers across the bar, centred on
    the axis, then the wrist turned."""
    anchor = np.asarray(j["anchor_cm"], float)
    top = float(np.asarray(j.get("part_max_cm", j["anchor_cm"]))[2])
    r = j["ranges"]
    goal = float(np.mean(r["turnon"] if how == "turnon" else r["turnoff"]))
    togo = goal - float(j["value"])
    base_yaw = float(scene.objects.get(name, {}).get("yaw_rad", 0.0))
    yaw = base_yaw + float(j["value"])  # the bar lies along the knob's x axis: close across it
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    grip = np.array([anchor[0], anchor[1], top - 1.5])
    on_knob = float(np.linalg.norm(p - grip)) < 1.5
    what = _words(name)
    if on_knob and 0.02 < g < 0.6:
        turn = float(np.clip(togo + math.copysign(0.2, togo), -MAX_TURN_RAD, MAX_TURN_RAD))
        return _reply(
            f"I hold the knob of the {what}; I turn it {turn:+.2f} rad.",
            None,
            np.array([0.0, 0.0, turn]),
            None,
        )
    squared = float(np.max(np.abs(rot))) < 0.05
    if on_knob and squared:
        return _reply(f"The knob of the {what} is between the fingers; I close them.", None, None, 0.0)
    if g < 0.85:
        return _reply("I open the gripper to take the knob.", [0, 0, max(0.0, top + 6 - p[2])], None, 1.0)
    dxy = float(np.linalg.norm(grip[:2] - p[:2]))
    above = np.array([grip[0], grip[1], top + 4.0])
    if dxy < 0.8 and not squared:
        return _reply(f"I am above the knob of the {what}; I square the gripper to its bar.", None, rot, None)
    step = travel(arm, scene, grip if dxy < 0.8 else above, {name})
    if dxy < 0.8:
        return _reply(f"I lower the open gripper onto the knob of the {what}.", step, rot, None)
    return _reply(f"I move above the knob of the {what}.", step, rot, None)
