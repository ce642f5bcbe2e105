"""Through a side opening (a microwave): find the open side, lean in, push the object home by its handle."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim_adapters.libero.expert.hand import (
    FINGERTIP_BELOW_TCP_CM,
    HAND_HALF_CM,
    HAND_SLACK_CM,
    _words,
    travel,
)
from sim_adapters.libero.expert.joints import _door
from sim_adapters.libero.expert.opening import Opening, side_opening
from sim_adapters.libero.expert.scene import MAX_STEP_CM, Arm, Reply, Scene, _reply

# -- through a side opening (a microwave) -------------------------------------------------------
SIDE_TILT_RAD = 0.2
"""How far below level the fingers point when pushing something further into a side opening: off
the pitch of exactly level (where roll and yaw become one), the hand's front edge still behind the
fingertips (outside the opening)."""
HANDLE_OPENING = 0.45
"""Gripper opening (3.6 cm) round a mug's handle bar (1.75 cm wide)."""
HANDLE_GRASP_FRACTION = 0.78
"""Where a mug's handle is pinched from above, as a fraction of its height (the handle's top bar
is at about 0.85; the hand then clears the rim)."""
HANDLE_PUSH_FRACTION = 0.4
"""Where a mug standing in an opening is pushed by its handle, as a fraction of its height: low,
so it slides rather than tips."""
HANDLE_CLEAR_CM = 1.0
"""How far inside the face a handle's end must be for the door to close past it."""


def side_opening_of(scene: Scene, goal: list[str]) -> Opening | None:
    """The side opening an `in` goal's region is reached through (a microwave's), or None: a
    region without a ceiling is reached from above, a drawer by its own skill."""
    if goal[0] != "in" or len(goal) < 3:
        return None
    target = scene.objects.get(goal[2], {})
    if not target.get("site") or target.get("articulation") or not target.get("parent_parts"):
        return None
    parts = [(np.asarray(p["min_cm"], float), np.asarray(p["max_cm"], float)) for p in target["parent_parts"]]
    return side_opening(
        np.asarray(target["position_cm"], float),
        np.asarray(target.get("half_size_cm", [0, 0, 0]), float),
        parts,
    )


def _handle(obj: dict[str, Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """A mug's handle from its bounds and rim (a handle pulls the bounds' centre off the rim's): the
    unit xy direction it points and the xy of its outer bar's middle; None without one."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    if "rim_center_cm" not in obj:
        return None
    ring = np.asarray(obj["rim_center_cm"], float)
    off = (lo[:2] + hi[:2]) / 2 - ring
    if float(np.linalg.norm(off)) < 1.0:
        return None
    h = off / float(np.linalg.norm(off))
    if "yaw_rad" in obj:  # a handle lies along one of the object's own axes: turned with it, exactly
        yaw = float(obj["yaw_rad"])
        local = math.atan2(float(h[1]), float(h[0])) - yaw
        snapped = yaw + round(local / (math.pi / 2)) * (math.pi / 2)
        h = np.array([math.cos(snapped), math.sin(snapped)])
    half = (hi[:2] - lo[:2]) / 2
    reach = float(np.abs(h) @ half + off @ h)  # the bounds' furthest point along h, from the rim centre
    return h, ring + h * (reach - 0.6)  # the bar's middle (it is 0.8 cm thick)


DOOR_FRONT_CM = 30.0
"""How far out in front of a side opening the arm works: a door swung open less than that keeps
out of the way."""
DOOR_WRIST_CM = 2.5
"""How far beside the opening's width the wrist reaches while the hand works in front of it (the
Panda's sixth link passes a door standing there)."""
DOOR_SLACK_RAD = 0.15
"""How far short of its stop a door is swung wide."""


def _door_in_front(scene: Scene, goal: list[str], op: Opening) -> tuple[str, dict[str, Any]] | None:
    """The container's door, when it stands in front of the opening (within its width, widened by
    DOOR_WRIST_CM, and DOOR_FRONT_CM out of it), where the hand and wrist work: (the container,
    its hinge)."""
    target = scene.objects[goal[2]]
    parent = target.get("parent_name", "")
    joints = scene.objects.get(parent, {}).get("articulation") or target.get("parent_articulation") or []
    for j in joints:
        if j["kind"] != "hinge" or "part_min_cm" not in j:
            continue
        lo, hi = np.asarray(j["part_min_cm"], float), np.asarray(j["part_max_cm"], float)
        out = sorted((op.out_cm(lo[:2]), op.out_cm(hi[:2])))
        side = (float(lo[1 - op.axis]), float(hi[1 - op.axis]))
        if (
            out[1] > op.face
            and out[0] < op.face + DOOR_FRONT_CM
            and side[1] > op.side_lo - DOOR_WRIST_CM
            and side[0] < op.side_hi + DOOR_WRIST_CM
        ):
            return parent, j
    return None


def _wide_open(j: dict[str, Any]) -> float | None:
    """The angle a door is swung to, out of the way: DOOR_SLACK_RAD short of its open stop; None
    when it is already about that far open."""
    r = j["ranges"]
    closed = float(np.mean(r.get("close", [0.0])))
    far = float(max(r["open"], key=lambda v: abs(float(v) - closed)))
    wide = far - math.copysign(DOOR_SLACK_RAD, far - closed)
    return None if abs(float(j["value"]) - closed) > abs(wide - closed) - 0.1 else wide


def _leans_through_side(scene: Scene, goal: list[str]) -> bool:
    """The goal is worked with the gripper leaning through a side opening (not to be turned down)."""
    op = side_opening_of(scene, goal)
    found = _handle(scene.objects[goal[1]]) if op is not None else None
    return found is not None and op is not None and float(found[0] @ op.outward) >= 0.7


def _side_pending(arm: Arm, scene: Scene, goal: list[str]) -> bool:
    """An `in` goal through a side opening that LIBERO already counts (the body's origin is inside)
    but whose object is still held, or sticks out where the door would close on it."""
    op = side_opening_of(scene, goal)
    if op is None or not _leans_through_side(scene, goal):
        return False
    obj = scene.objects[goal[1]]
    return _handle_held(arm, obj) or _outmost(op, obj) > op.face - HANDLE_CLEAR_CM


def _outmost(op: Opening, obj: dict[str, Any]) -> float:
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    return max(op.sign * float(lo[op.axis]), op.sign * float(hi[op.axis]))


def _inmost(op: Opening, obj: dict[str, Any]) -> float:
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    return min(op.sign * float(lo[op.axis]), op.sign * float(hi[op.axis]))


def _handle_held(arm: Arm, obj: dict[str, Any]) -> bool:
    """The fingers are closed on the object's handle bar."""
    found = _handle(obj)
    if found is None:
        return False
    _, bar = found
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    p = arm.p
    return (
        float(np.linalg.norm(p[:2] - bar)) < 2.5
        and lo[2] - 1.0 < p[2] < hi[2] + 1.0
        and 0.08 < arm.g < HANDLE_OPENING - 0.1
    )


def through_side(arm: Arm, scene: Scene, goal: list[str], op: Opening) -> Reply | None:
    """Put a mug into a roofed container through its side opening. A hand pointing down fits only
    in front of the opening, so: the handle (pointing out of the opening) pinched from above, the
    mug carried in at a height between floor and ceiling until the hand reaches the face, set on
    the floor and let go; then, the gripper closed and leaning almost level (the hand stays
    outside, below the roof's height), the handle's end pushed in until the door can close past
    it. None when the object has no handle pointing out (the caller's skills then try)."""
    name, where = goal[1], _words(goal[2])
    obj = scene.objects[name]
    found = _handle(obj)
    if found is None or float(found[0] @ op.outward) < 0.7:
        return None
    h, bar = found
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    what = _words(name)
    p, g = arm.p, arm.g
    height = float(hi[2] - lo[2])
    yaw = math.atan2(h[1], h[0])  # fingers closing across the handle
    if _handle_held(arm, obj):
        lift = max(0.5, min(1.5, (op.ceiling_z - op.floor_z - height) / 2))
        carry_z = p[2] + (op.floor_z + lift - lo[2])
        side_goal = op.middle_cm + (op.side_cm(p[:2]) - op.side_cm((lo[:2] + hi[:2]) / 2))
        deep = op.face + HAND_HALF_CM[1] + HAND_SLACK_CM  # the hand's side still outside the face
        if _inmost(op, obj) > op.face + 0.5 and lo[2] < op.floor_z + lift - 1.0:
            return _reply(
                f"I lift the {what} by its handle to above the {where}'s floor.",
                [0, 0, carry_z - p[2]],
                None,
                0.0,
            )
        if op.out_cm(p[:2]) > deep + 0.5:
            target = op.point(max(deep, op.out_cm(p[:2]) - MAX_STEP_CM), side_goal)
            return _reply(
                f"I carry the {what} into the {where} through its opening.",
                np.append(target - p[:2], carry_z - p[2]),
                None,
                0.0,
            )
        if lo[2] > op.floor_z + 0.8:
            return _reply(
                f"The {what} is inside the {where}; I set it on its floor.",
                [0, 0, op.floor_z + 0.05 - lo[2]],
                None,
                0.0,
            )
        return _reply(f"The {what} stands on the floor of the {where}; I let go.", None, None, 1.0)
    if _inmost(op, obj) < op.face:  # set inside with its handle sticking out: pushed in by the handle
        return _push_handle_in(arm, obj, what, where, op, bar)
    door = _door_in_front(scene, goal, op)
    wide = _wide_open(door[1]) if door is not None else None
    if door is not None and wide is not None:  # a door half open stands where the arm will work
        parent, j = door
        why = f"The door of the {_words(parent)} is in the way of my arm; "
        anchor = np.asarray(j["anchor_cm"], float)
        along = math.copysign(1.0, op.middle_cm - op.side_cm(anchor[:2]))  # closed: across the opening
        closed_dir = op.point(0.0, along) - op.point(0.0, 0.0)
        turn = float(j["value"]) * float(np.asarray(j["axis"])[2])
        plane = math.atan2(closed_dir[1], closed_dir[0]) + turn
        return _door(arm, scene, parent, j, "open", why, goal_rad=wide, plane_rad=plane)
    grasp = np.append(bar, lo[2] + HANDLE_GRASP_FRACTION * height)
    rot = arm.turn_to(yaw)
    squared = float(np.max(np.abs(rot))) < 0.04
    dxy = float(np.linalg.norm(grasp[:2] - p[:2]))
    if g < HANDLE_OPENING - 0.1:
        return _reply(
            "The gripper holds nothing I need; I open it and move up.", [0, 0, 6.0], None, HANDLE_OPENING
        )
    grip = HANDLE_OPENING if abs(g - HANDLE_OPENING) > 0.1 else None
    if dxy < 0.8 and abs(p[2] - grasp[2]) < 0.6 and squared:
        return _reply(f"The handle of the {what} is between the fingers; I close them.", None, None, 0.0)
    above = np.array([grasp[0], grasp[1], float(hi[2]) + 3.0])
    if dxy < 0.8 and not squared:
        return _reply(
            f"I am above the handle of the {what}; I square the gripper across it.", None, rot, grip
        )
    step = travel(arm, scene, grasp if dxy < 0.8 else above, {name}, yaw=yaw)
    if dxy < 0.8:
        return _reply(f"I lower the open gripper round the handle of the {what}.", step, rot, grip)
    return _reply(f"I move the open gripper above the handle of the {what}.", step, rot, grip)


def _push_handle_in(
    arm: Arm, obj: dict[str, Any], what: str, where: str, op: Opening, bar: np.ndarray
) -> Reply:
    """Push an object standing in a side opening further in by the end of its handle: closed
    fingertips, the gripper leaning almost level towards it (its hand behind the fingertips, out of
    the opening), low on the handle so the object slides rather than tips."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    p, g = arm.p, arm.g
    rot = arm.lean_to(-op.outward, SIDE_TILT_RAD)  # square to the opening, whichever way the handle turned
    leaning = float(np.max(np.abs(rot))) < 0.06
    z = float(lo[2]) + HANDLE_PUSH_FRACTION * float(hi[2] - lo[2])
    end = _outmost(op, obj)
    side = op.side_cm(bar)
    togo = end - (op.face - HANDLE_CLEAR_CM - 0.5)
    touch = op.point(end + FINGERTIP_BELOW_TCP_CM + 0.3, side)  # the tool point with fingertips on the end
    stand = op.point(end + 8.0, side)
    if g > 0.2:
        near = float(np.linalg.norm(p[:2] - bar)) < 4.0 and p[2] < hi[2] + 3.0
        if near:
            return _reply(f"I lift the open fingers off the handle of the {what}.", [0, 0, 6.0], None, None)
        return _reply(f"I close the gripper to push the {what} further into the {where}.", None, None, 0.0)
    if not leaning:
        high = np.append(stand, z + 6.0)
        if float(np.linalg.norm(p - high)) > 1.5:
            close = float(np.linalg.norm(p[:2] - high[:2])) < 12.0 and p[2] > z + 3.0
            return _reply(
                f"I move out in front of the {what}, turning the gripper to lean towards it.",
                high - p,
                rot if close else None,
            )
        return _reply(f"I lean the gripper towards the handle of the {what}.", None, rot)
    off_line = abs(op.side_cm(p[:2]) - side)
    if (
        off_line < 1.0
        and abs(p[2] - z) < 1.0
        and -0.8 < op.out_cm(p[:2]) - op.out_cm(touch) < 1.0
        and togo > 0
    ):
        step = op.point(op.out_cm(p[:2]) - min(togo + 0.5, MAX_STEP_CM), side) - p[:2]
        return _reply(
            f"I push the {what} {togo + 0.5:.1f} cm further into the {where}.", np.append(step, 0.0)
        )
    if off_line < 1.0 and abs(p[2] - z) < 1.0 and op.out_cm(p[:2]) > op.out_cm(touch):
        return _reply(
            f"I bring the fingertips against the end of the {what}'s handle.", np.append(touch - p[:2], 0.0)
        )
    return _reply(
        f"I lower the leaning gripper in line with the {what}'s handle.", np.append(stand - p[:2], z - p[2])
    )
