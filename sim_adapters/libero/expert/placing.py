"""Pick and place onto or into a goal region (a drawer opened first, a side opening leaned through),
push what is too flat to grasp, recover from a fumble."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from sim_adapters.libero.expert.grasps import clearing_shove, grasp_plan, graspable, shove_object
from sim_adapters.libero.expert.hand import (
    FINGERTIP_BELOW_TCP_CM,
    _safe_height,
    _words,
    escape,
    hand_hits,
    travel,
)
from sim_adapters.libero.expert.joints import _is_open, _open_direction, _opened_cm, operate
from sim_adapters.libero.expert.scene import FLAT_CM, Arm, Reply, Scene, _reply, wrap
from sim_adapters.libero.expert.side_openings import side_opening_of, through_side


def _placement(scene: Scene, goal: list[str], obj: dict[str, Any]) -> tuple[np.ndarray, float]:
    """Where the object's body origin goes (xy) and the height its bottom must just clear."""
    target = scene.objects[goal[2]]
    if not target.get("site"):  # onto / into an object: LIBERO compares body origins (3 cm)
        xy = np.asarray(target.get("body_cm", target["position_cm"]), float)[:2]
        return xy, float(target["max_cm"][2])
    xy = np.asarray(target["position_cm"], float)[:2]
    half = np.asarray(target.get("half_size_cm", [0, 0, 0]), float)
    site_z = float(target["position_cm"][2])
    joints = target.get("articulation") or []
    if goal[0] == "in" and joints and joints[0]["kind"] == "slide":  # a drawer: the part pulled out
        j = joints[0]
        hmin, hmax = np.asarray(j["handle_min_cm"]), np.asarray(j["handle_max_cm"])
        u = _open_direction(j)
        size = np.asarray(obj["max_cm"], float)[:2] - np.asarray(obj["min_cm"], float)[:2]
        front = float(((hmin + hmax) / 2)[:2] @ u[:2])
        inset = float(abs(size @ u[:2])) / 2 + 3.8  # behind the drawer's front panel
        along = front - inset
        xy = xy + (along - float(xy @ u[:2])) * u[:2]
        return xy, site_z - half[2]
    if goal[0] == "in":  # a container's region (basket, caddy, microwave): its floor
        parent = target.get("parent")
        floor = site_z - half[2]
        if parent is not None:
            return xy, max(floor, float(parent["min_cm"][2]) + 0.5)
        return xy, floor
    xy = _free_spot(scene, goal, obj, xy, half)
    parent = target.get("parent")
    if parent is not None:  # a region on a fixture (stove burner, cabinet top): its top
        return xy, max(site_z, float(parent["max_cm"][2]) if half[2] > 0.5 else site_z)
    return xy, site_z  # a region of the table


def _free_spot(
    scene: Scene, goal: list[str], obj: dict[str, Any], center: np.ndarray, half: np.ndarray
) -> np.ndarray:
    """The point of a region (its middle first) where the object's footprint overlaps least with
    what already stands there (a second moka pot beside the first on the burner)."""
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    size = (hi[:2] - lo[:2]) / 2
    parent = scene.objects[goal[2]].get("parent_name", "")
    skip = {goal[1], goal[2], parent}
    boxes = [
        (np.asarray(f["min_cm"], float), np.asarray(f["max_cm"], float))
        for n, f in [*scene.objects.items(), *scene.others.items()]
        if "min_cm" in f and n not in skip and not (parent and n.startswith(parent + "/"))
    ]

    def overlap(xy: np.ndarray) -> float:
        total = 0.0
        for a, b in boxes:
            w = np.minimum(xy + size, b[:2]) - np.maximum(xy - size, a[:2])
            total += float(max(w[0], 0.0) * max(w[1], 0.0))
        return total

    reach = np.maximum(np.asarray(half[:2], float) * 0.8, 0.0)
    grid = [
        center + np.array([dx, dy])
        for dx in np.linspace(-reach[0], reach[0], 7)
        for dy in np.linspace(-reach[1], reach[1], 7)
    ]
    return min(grid, key=lambda xy: (round(overlap(xy), 0), float(np.linalg.norm(xy - center))))


def recover(arm: Arm, scene: Scene) -> Reply:
    """Back to pointing down after working level (a drawer handle): let go and back off the way
    the fingers point, then rise clear of everything near, turning down once above it."""
    p = arm.p
    level = abs(float(arm.approach()[2])) < 0.7
    if level and arm.g < 0.85:
        back = -arm.approach()
        back[2] = 0.0
        return _reply("I let go and back away before turning the gripper down.", back * 6.0, None, 1.0)
    safe_z = _safe_height(arm, scene)
    return _reply(
        "I rise clear of everything near, turning the gripper down.",
        [0, 0, max(0.0, safe_z - p[2])],
        arm.turn_to(arm.rpy[2]),  # backed off: free space to turn in
        None,
    )


def pick_place(arm: Arm, scene: Scene, goal: list[str]) -> Reply:
    name, target_name = goal[1], goal[2]
    obj = scene.objects[name]
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    if float(obj.get("rest_height_cm", hi[2] - lo[2])) < FLAT_CM and _on_table(scene, goal):
        return push(arm, scene, goal)
    target = scene.objects[target_name]
    for j in target.get("articulation") or []:
        if goal[0] == "in" and j["kind"] == "slide" and not _is_open(j):
            why = f"The {_words(target_name)} is closed; "
            opened = scene.moved(
                f"{target.get('parent_name', '')}/{j['joint']}",
                _open_direction(j) * _opened_cm(j),
            )
            if not graspable(opened, obj, name):  # the open drawer would hang over it: move it away first
                shove = clearing_shove(scene, opened, obj, name)
                if shove is not None:
                    return shove_object(
                        arm,
                        scene,
                        name,
                        obj,
                        shove,
                        why + "once open it would hang over the " + _words(name) + "; ",
                    )
            return operate(arm, scene, target_name, j, "open", why)
    op = side_opening_of(scene, goal)
    if op is not None:
        reply = through_side(arm, scene, goal, op)
        if reply is not None:
            return reply
    center = (lo + hi) / 2
    body = np.asarray(obj.get("body_cm", center), float)
    grasp, yaw, opening = grasp_plan(obj, scene, name)
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    near = bool(
        np.all(p[:2] > lo[:2] - 1.5) and np.all(p[:2] < hi[:2] + 1.5) and lo[2] - 1 < p[2] < hi[2] + 1.5
    )
    rest = float(obj.get("rest_bottom_cm", lo[2]))
    # closed on something (a bowl's wall is ~3 mm: g ~0.03), or the object has left where it rested
    holding = near and g < opening - 0.15 and (g > 0.012 or lo[2] > rest + 1.0)
    what, where = _words(name), _words(target_name)
    if holding:
        place_xy, surface = _placement(scene, goal, obj)
        below = p[2] - lo[2]  # the tool's height above the object's bottom
        # into a region: its middle takes the object's middle (the bounds' or rim's centre); onto an
        # object: LIBERO compares body origins
        ref = (
            np.asarray(obj.get("rim_center_cm", body[:2]), float)
            if goal[0] == "in" and target.get("site")
            else body[:2]
        )
        release = np.array([*(place_xy + (p[:2] - ref[:2])), surface + 1.0 + below])
        if float(np.linalg.norm(release[:2] - p[:2])) < 1.0 and p[2] < release[2] + 0.8:
            return _reply(f"The {what} is just above the {where}; I let go.", None, None, 1.0)
        turn = _slot_turn(arm, obj, target) if goal[0] == "in" else None
        skip = {name, target_name}
        if lo[2] < rest + 3.0:  # just picked up: out from under anything overhanging, then up
            slide = escape(scene, p, float(arm.rpy[2]), {name})
            if slide is not None:
                return _reply(f"I slide the {what} out from under what overhangs it.", slide, None, 0.0)
        step = travel(arm, scene, release, skip, below)
        if turn is not None and float(np.max(np.abs(turn))) > 0.05:
            if float(np.linalg.norm(release[:2] - p[:2])) < 1.0:
                return _reply(f"I turn the {what} to fit the {where}.", None, turn, 0.0)
            return _reply(f"I carry the {what} towards the {where}, turning it to fit.", step, turn, 0.0)
        if float(np.linalg.norm(release[:2] - p[:2])) < 1.0:
            return _reply(f"The {what} is above the {where}; I lower it.", step, None, 0.0)
        return _reply(f"I carry the {what} towards the {where}.", step, None, 0.0)
    if g < opening - 0.15 or (g < 0.85 and not near and abs(g - opening) > 0.05):
        return _reply("The gripper holds nothing I need; I open it and move up.", [0, 0, 6.0], None, opening)
    grip = opening if abs(g - opening) > 0.1 else None
    squared = float(np.max(np.abs(rot))) < 0.04
    dxy = float(np.linalg.norm(grasp[:2] - p[:2]))
    if dxy < 0.8 and abs(p[2] - grasp[2]) < 0.6 and squared:
        return _reply(f"The {what} is between the fingers; I close the gripper.", None, None, 0.0)
    side = escape(scene, grasp, yaw, {name})  # something overhangs the grasp: come in from the side
    if side is not None:
        start = grasp + side
        rel = p - grasp
        along = float(rel[:2] @ side[:2]) / float(side[:2] @ side[:2])
        if (
            abs(p[2] - grasp[2]) < 1.0
            and -0.1 < along < 1.1
            and float(np.linalg.norm(rel - along * side)) < 1.0
        ):
            if not squared:
                return _reply("I square the gripper beside the grasp point.", None, rot, grip)
            return _reply(
                f"I slide the open gripper in under the overhang to the {what}.", grasp - p, None, grip
            )
        if float(np.linalg.norm(p[:2] - start[:2])) < 0.8 and not squared:
            return _reply("I square the gripper beside the grasp point.", None, rot, grip)
        step = travel(arm, scene, start, {name}, yaw=yaw)
        return _reply(f"I move the open gripper down beside the {what}.", step, rot, grip)
    above = np.array([grasp[0], grasp[1], max(grasp[2], float(hi[2]) + 3.0)])
    if dxy < 0.8 and not squared and p[2] >= above[2] - 0.5:
        return _reply("I am above the grasp point; I square the gripper.", None, rot, grip)
    step = travel(arm, scene, grasp if dxy < 0.8 else above, {name}, yaw=yaw)
    if dxy < 0.8:
        return _reply(f"I lower the open gripper to the {what}.", step, rot, grip)
    return _reply(f"I move the open gripper above the {what}.", step, rot, grip)


def _slot_turn(arm: Arm, obj: dict[str, Any], target: dict[str, Any]) -> np.ndarray | None:
    """For a thin box going into a narrow region (a book into a caddy's compartment): the wrist
    turn that lines its thin side up with the region's narrow side; None for anything else."""
    if "thin_yaw_rad" not in obj or "half_size_cm" not in target:
        return None
    half = np.asarray(target["half_size_cm"], float)
    narrow = 0.0 if half[0] <= half[1] else math.pi / 2  # the region's narrow axis (x or y)
    off = float(wrap(narrow - float(obj["thin_yaw_rad"])))
    off = off - math.pi * round(off / math.pi)  # the thin side has no front: period pi
    return np.array([0.0, 0.0, off])


def _on_table(scene: Scene, goal: list[str]) -> bool:
    """The goal puts the object on a region of the table itself (where it can be slid to)."""
    target = scene.objects.get(goal[2], {})
    return bool(target.get("site")) and "parent" not in target


def push(arm: Arm, scene: Scene, goal: list[str]) -> Reply:
    """Slide a flat object (a plate) over the table: closed fingertips pressed onto its floor, then
    moved towards the target in short steps, so they stay inside it and it comes along (from
    inside, the hand stays over the plate, clear of whatever stands behind it)."""
    name = goal[1]
    obj = scene.objects[name]
    lo, hi = np.asarray(obj["min_cm"], float), np.asarray(obj["max_cm"], float)
    body = np.asarray(obj.get("body_cm", (lo + hi) / 2), float)
    place_xy, _ = _placement(scene, goal, obj)
    d = place_xy - body[:2]
    dist = float(np.linalg.norm(d))
    u = d / max(dist, 1e-6)
    radius = float(np.min(hi[:2] - lo[:2])) / 2
    start = body[:2] - u * min(2.0, radius / 3)
    z = float(lo[2]) + FINGERTIP_BELOW_TCP_CM + 0.2  # the fingertips on the plate's floor
    # fingers side by side across the push, else square to it, else whatever way (in eighths of a
    # half turn) keeps the hand clear of what stands beside the plate (a cabinet's handles)
    yaws = [math.atan2(u[1], u[0]) + k * math.pi / 8 for k in (0, 4, 2, 6, 1, 7, 3, 5)]
    yaw = next((y for y in yaws if not hand_hits(scene, np.append(start, z), y, {name})), yaws[0])
    rot = arm.turn_to(yaw)
    p, g = arm.p, arm.g
    what, where = _words(name), _words(goal[2])
    ahead = float((p[:2] - body[:2]) @ u)
    inside = (
        float(np.linalg.norm(p[:2] - body[:2])) < radius - 1.0 and ahead < radius - 3.0 and p[2] < z + 1.0
    )
    if inside and g < 0.2:
        step = min(dist + 0.5, 6.0)
        return _reply(
            f"My fingertips press on the {what}; I slide it {step:.1f} cm towards the {where}.",
            np.append(u * step, -0.4),
            None,
            None,
        )
    if g > 0.2:
        return _reply(
            "I close the gripper to push with the fingertips.", [0, 0, max(0.0, hi[2] + 6 - p[2])], None, 0.0
        )
    dxy = float(np.linalg.norm(start - p[:2]))
    squared = float(np.max(np.abs(rot))) < 0.05
    if dxy < 0.8 and not squared:
        return _reply(f"I am above the {what}; I square the gripper.", None, rot, None)
    if dxy < 0.8:
        return _reply(
            f"I lower the closed fingertips onto the {what}.", np.append(start - p[:2], z - p[2]), rot, None
        )
    if float(np.linalg.norm(p[:2] - body[:2])) < radius + 5.0 and p[2] < hi[2] + 4.0:  # back over the rim
        return _reply(
            f"I lift the fingertips over the rim and back into the {what}.",
            np.append(start - p[:2], z + 2.5 - p[2]),
            rot,
            None,
        )
    step = travel(arm, scene, np.append(start, hi[2] + 4.0), {name})
    return _reply(f"I move above the {what}.", step, rot, None)
