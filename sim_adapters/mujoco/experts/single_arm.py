"""The single-arm MuJoCo tasks' scripted experts (pick_cube, place_in_bowl, push_to_target,
conveyor_pick), each task class pointing at its own (`MujocoTask.expert`, e.g.
"sim_adapters.mujoco.experts.single_arm:PICK_CUBE"). The machinery every expert shares (caps,
stops, the approach-and-grasp and push geometry) is `pear_agent.policies.experts`.

Units are the protocol's: cm and rad, robot base frame."""

from __future__ import annotations

from typing import Any

import numpy as np

from pear_agent.policies.experts import (
    Expert,
    GraspWords,
    State,
    Stop,
    _act,
    _grasp_yaw,
    _holding,
    _lowest_tcp_cm,
    _rot_delta,
    approach_and_grasp,
    object_lost,
    push_line,
    stop,
    within_caps,
    wrap,
)

CUBE_WORDS = GraspWords(
    reopen="The gripper is closed but holds nothing; I open it and back off upwards.",
    rise="I am low and not above the object; I rise before moving sideways.",
    move=lambda dist: (
        f"The object is {dist:.1f} cm away horizontally; I move above it "
        "and square the gripper with its faces."
    ),
    turn="I am above the object; I turn the gripper to square it with the faces.",
    lower="Aligned above the object; I lower the open gripper around it.",
    close="The object is between the fingers; I close the gripper.",
)


def _approach_and_grasp(
    arm: dict[str, Any], obj: dict[str, Any], tool: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """Open gripper: go above the cube, square up, descend, close."""
    tool = tool or {}
    o = np.asarray(obj["position_cm"], float)
    size = float(obj["size_cm"])
    table_z = float(tool.get("table_z_cm") or 0.0)
    grasp_z = max(o[2] + 0.3, _lowest_tcp_cm(tool, table_z))
    hover_z = max(o[2] + size / 2 + 8.0, grasp_z + 6.0)
    yaw = _grasp_yaw(float(obj["yaw_rad"]), float(arm["orientation"][2]))
    return approach_and_grasp(arm, o, yaw, grasp_z, hover_z, o[2] + size / 2 + 3.0, CUBE_WORDS)


def _cannot_grasp(obj: dict[str, Any], tool: dict[str, Any] | None, what: str) -> str | None:
    """Why the gripper cannot close around the object (wider than it opens), or None."""
    opening = (tool or {}).get("max_opening_cm")
    size = float(obj["size_cm"])
    if opening is not None and size > float(opening) - 0.5:
        return f"The {what} is {size:g} cm wide and the gripper opens only {float(opening):g} cm"
    return None


def _lost_or_ungraspable(
    obj: dict[str, Any], priv: dict[str, Any], what: str, grasp: bool = True
) -> str | None:
    return object_lost(obj["position_cm"], priv, what) or (
        _cannot_grasp(obj, priv.get("tool"), what) if grasp else None
    )


def _arm_and_object(
    state: State, priv: dict[str, Any], what: str, grasp: bool = True
) -> tuple[str, dict[str, Any], dict[str, Any], tuple[str, Stop] | None]:
    """The arm the task names, its object, and the reply that stops the episode when the object is
    lost (or, when it is to be grasped, wider than the gripper opens); None while it can go on."""
    part = priv.get("part", "arm")
    obj = priv["object"]
    reason = _lost_or_ungraspable(obj, priv, what, grasp)
    return part, state[part], obj, (stop(reason, [part]) if reason else None)


def pick_cube(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part, arm, obj, stopped = _arm_and_object(state, priv, "cube")
    if stopped:
        return stopped
    if _holding(arm, obj):
        goal_z = priv["object_start_z_cm"] + priv["lift_cm"] + 3.0
        dz = goal_z - float(obj["position_cm"][2])
        return (
            f"I hold the cube; I lift it {dz:.1f} cm more.",
            {part: _act(np.array([0, 0, dz]), None, 0.0)},
        )
    why, act = _approach_and_grasp(arm, obj, priv.get("tool"))
    return why, {part: act}


CENTRED_CM = 0.7
"""place_in_bowl: the cube is carried until its centre is this close (sideways) over the bowl's."""
RELEASE_ABOVE_FLOOR_CM = 2.0
"""The cube is let go with its bottom this far over the bowl's floor, when the open fingers fit
inside the bowl; else just over the rim."""
FINGER_CM = 1.5
"""A finger's thickness and play beside the opening, for whether the open fingers fit in the bowl."""
OPEN_ENOUGH = 0.5
"""A gripper reading this open has let the cube go: the hand rises (a finger resting on the cube
held a Baxter gripper at 0.8 for ever, waiting to read fully open)."""
"""A finger's thickness and play beside the opening, for whether the open fingers fit in the bowl."""


YAW_SLACK = 0.3
"""place_in_bowl: grasp yaws this close (in |sin| off the radius) to the most tangential are as good."""
HELD_XY_CM = 4.0
"""place_in_bowl: a cube in a half-closed grip this close sideways is still held (it lags the hand
a little on a 10 cm carry; at 2.5 cm the expert thought it empty-handed and let go outside the bowl)."""


def _bowl_grasp_yaw(obj: dict[str, Any], bowl_xy: np.ndarray, reach_cm: float, current: float) -> float:
    """The grasp yaw for a cube near the bowl: of the four that square the fingers on its faces,
    the one whose fingers close along the bowl's wall (tangentially), so neither finger comes down
    on the wall; the nearer to the current yaw among equals. Away from the bowl: the nearest."""
    o = np.asarray(obj["position_cm"], float)[:2]
    r = o - bowl_xy
    if float(np.linalg.norm(r)) > reach_cm:
        return _grasp_yaw(float(obj["yaw_rad"]), current)
    options = float(obj["yaw_rad"]) + np.arange(-4, 5) * (np.pi / 2)
    radial = float(np.arctan2(r[1], r[0]))
    # the fingers close along the tool's y axis, (-sin yaw, cos yaw) pointing down: tangential when
    # the tool's x axis points along the radius (yaw = radial, mod pi)
    off_radial = np.abs(np.sin(options - radial))
    near = np.abs(wrap(options - current))
    # of the faces within YAW_SLACK of the most tangential, the nearest: near 45 degrees two faces
    # are about as good, and a strict choice flipped between them every turn as the hand turned
    near = np.where(off_radial <= off_radial.min() + YAW_SLACK, near, np.inf)
    return float(options[np.argmin(near)])


def place_in_bowl(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Grasp the cube (fingers along the bowl's wall when it lies beside the bowl), carry it over the
    rim until centred over the bowl, lower it inside (the open fingers permitting), let go without
    moving, rise once the fingers are open. Releasing from above the rim, a few millimetres off
    centre, let the cube bounce off the wall and out on some CPUs and not on others."""
    part, arm, obj, stopped = _arm_and_object(state, priv, "cube")
    if stopped:
        return stopped
    tool = priv.get("tool") or {}
    bowl = priv["container"]
    o = np.asarray(obj["position_cm"], float)
    b = np.asarray(bowl["position_cm"], float)
    size = float(obj["size_cm"])
    radius = float(bowl.get("radius_cm") or 7.5)
    g = float(arm.get("gripper", 1.0))
    p = np.asarray(arm["position"], float)
    holding = _holding(arm, obj) or (
        0.15 < g < 0.85 and np.linalg.norm(p[:2] - o[:2]) < HELD_XY_CM and abs(p[2] - o[2]) < 3.0
    )
    if priv.get("object_inside") and not holding:
        if g < OPEN_ENOUGH:
            return (
                "The cube is in the bowl; I open the gripper and hold still while it settles.",
                {part: _act(None, None, 1.0)},
            )
        return (
            "The cube is in the bowl and the gripper is open; I move away upwards.",
            {part: _act(np.array([0, 0, 6.0]), None, 1.0)},
        )
    if not holding:
        if g >= 0.9:
            opening = float(tool.get("max_opening_cm") or 8.0)
            yaw = _bowl_grasp_yaw(
                obj, b[:2], radius + opening / 2 + FINGER_CM + 2.0, float(arm["orientation"][2])
            )
            table_z = float(tool.get("table_z_cm") or 0.0)
            grasp_z = max(o[2] + 0.3, _lowest_tcp_cm(tool, table_z))
            hover_z = max(o[2] + size / 2 + 8.0, grasp_z + 6.0, bowl["rim_height_cm"] + 5.0)
            why, act = approach_and_grasp(arm, o, yaw, grasp_z, hover_z, o[2] + size / 2 + 3.0, CUBE_WORDS)
            return why, {part: act}
        why, act = _approach_and_grasp(arm, obj, tool)
        return why, {part: act}
    carry_z = bowl["rim_height_cm"] + size / 2 + 4.0
    dxy = b[:2] - o[:2]
    if np.linalg.norm(dxy) > CENTRED_CM:
        if o[2] < carry_z - 1.0 and np.linalg.norm(dxy) > radius:
            return (
                "I hold the cube; I lift it above the bowl's rim before carrying it.",
                {part: _act(np.array([0, 0, carry_z - o[2]]), None, 0.0)},
            )
        dz = max(carry_z - o[2], 0.0) if np.linalg.norm(dxy) > radius else 0.0
        return (
            f"I carry the cube {np.linalg.norm(dxy):.1f} cm, to the middle of the bowl.",
            {part: _act(np.array([dxy[0], dxy[1], dz]), None, 0.0)},
        )
    opening = float(tool.get("max_opening_cm") or 8.0)
    floor = float(bowl.get("floor_cm", float(bowl["rim_height_cm"]) - 2.9))
    if opening / 2 + FINGER_CM < radius - 0.5:  # the open fingers fit inside the walls
        release_z = floor + size / 2 + RELEASE_ABOVE_FLOOR_CM
    else:
        release_z = bowl["rim_height_cm"] + size / 2 + 1.0
    # the cube goes down to its release height, the fingertips never below the floor's clearance
    dz = max(release_z - o[2], _lowest_tcp_cm(tool, floor) - p[2])
    if dz < -0.5:
        return "The cube is over the middle of the bowl; I lower it inside.", {
            part: _act(np.array([dxy[0], dxy[1], dz]), None, 0.0)
        }
    return "The cube is low in the middle of the bowl; I let go and hold still.", {
        part: _act(None, None, 1.0)
    }


WRIST_MARGIN_RAD = 0.1
"""How close to the end of its last joint's room the push expert turns the tool."""


def _in_room(yaw: float, room: list[float]) -> bool:
    """Is the yaw (any turn of it) within the wrist's room [lo, hi] (absolute yaws, pointing down),
    `WRIST_MARGIN_RAD` inside its ends? (A YAM's wrist stops 0.95 rad below its home yaw: a push
    asked for the other way round, past the stop, was refused by IK on every turn.)"""
    lo, hi = room[0] + WRIST_MARGIN_RAD, room[1] - WRIST_MARGIN_RAD
    return any(lo <= yaw + k * 2 * np.pi <= hi for k in range(-2, 3))


FINAL_PUSH_CM = 6.0
"""push_to_target: closer than this to the target, the block is pushed only part of the way."""
FINAL_PUSH_SHARE = 0.7
"""The share of the remaining distance one push covers in the last stretch."""


def push_to_target(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part, arm, obj, stopped = _arm_and_object(state, priv, "block", grasp=False)
    if stopped:
        return stopped
    target = priv["target"]
    p = np.asarray(arm["position"], float)
    o = np.asarray(obj["position_cm"], float)
    t = np.asarray(target["position_cm"], float)
    size = float(obj["size_cm"])
    tool = priv.get("tool") or {}
    table_z = float(tool.get("table_z_cm") or 0.0)
    dist, u, push_z, along, lateral, grip = push_line(arm, o, t[:2], tool, table_z)
    # 4 cm between the block and the tool point as the hand comes down behind it: fingers that reach
    # further on one side of the tool point (a thumb-and-fingers hand) nudged it off the line at 3
    standoff = size / 2 + 4.0
    hover_z = table_z + size + 5.0
    # push with the wide face of the closed fingers: tool x along the push (yaw has period pi),
    # of the two ways round the one nearer the tool's yaw that the wrist can turn to
    face_yaw = float(np.arctan2(u[1], u[0]))
    options = face_yaw + np.arange(-2, 3) * np.pi
    dist_yaw = np.abs(wrap(options - float(arm["orientation"][2])))
    room = tool.get("yaw_room_rad")
    if room is not None:
        inside = np.array([_in_room(float(v), room) for v in options])
        if inside.any():
            dist_yaw = np.where(inside, dist_yaw, np.inf)
    yaw = float(options[np.argmin(dist_yaw)])
    rot = _rot_delta(arm, yaw)
    in_line = lateral < 1.0 and -(standoff + 1.5) < along < -(size / 2 - 0.5)
    if in_line and p[2] < push_z + 1.0:
        contact_gap = max(0.0, -along - size / 2 - 1.2)
        # the last stretch in shorter pushes: a block pushed all the way at once slid on past the
        # target, out of the arm's reach behind it, on a slightly more slippery table
        step = min(dist * FINAL_PUSH_SHARE if dist < FINAL_PUSH_CM else dist, 6.0) + contact_gap
        return (
            f"The block is {dist:.1f} cm from the target centre and I am behind it; I push "
            f"{step:.1f} cm towards the target.",
            {part: _act(np.append(u * step, 0.0), None, grip)},
        )
    if p[2] < table_z + size + 3.0:
        return (
            "I am low but not lined up behind the block; I rise before repositioning.",
            {part: _act(np.array([0, 0, hover_z - p[2]]), None, grip)},
        )
    pre = o[:2] - u * standoff
    d = pre - p[:2]
    if np.linalg.norm(d) > 0.8 or max(abs(v) for v in rot) > 0.05:
        return (
            "I move above the point behind the block, on the line from it to the target, with the "
            "gripper closed.",
            {part: _act(np.array([d[0], d[1], hover_z - p[2]]), rot, grip)},
        )
    return "I am above the pushing point; I lower the gripper to the table.", {
        part: _act(np.array([d[0], d[1], push_z - p[2]]), None, grip)
    }


LAND_AHEAD_CM = 3.0
"""On the belt, the open gripper lands this far ahead of where the cube will be."""


def _belt_grasp_yaw(v: np.ndarray, size: float, tool: dict[str, Any], current_yaw: float) -> float:
    """The yaw that closes the fingers on a cube riding the belt at velocity `v`.

    A gripper that opens wide enough to land around the cube's path along the belt (half its
    opening spans half the cube, the landing lead and 1 cm) closes along the belt, the tool's +y
    downstream: the finger(s) on +y are a stop the belt carries the cube into, so the catch does
    not hang on timing the close to the cube's arrival; for a hand whose thumb closes against two
    fingers (+y by the tool-frame convention) those two are a fork across the cube's path and the
    thumb pushes the cube into it from behind. Across the belt, the thumb would press the cube
    into the gap between the two fingers unless the close is timed to the millimetre. A narrower
    gripper cannot straddle the cube along the belt: it closes across the belt (either way
    round), landing ahead of the cube with the fingers on both sides of its path."""
    heading = float(np.arctan2(v[1], v[0]))
    opening = tool.get("max_opening_cm")
    if opening is not None and float(opening) / 2 >= size / 2 + LAND_AHEAD_CM + 1.0:
        # tool +y = (sin yaw, -cos yaw) with the hand pointing down: along the belt at heading + pi/2
        return float(wrap(heading + np.pi / 2))
    options = heading + np.arange(-2, 3) * np.pi
    return float(options[np.argmin(np.abs(wrap(options - current_yaw)))])


def conveyor_pick(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Ambush a cube riding a belt: land ahead of it with the fingers straddling its path, slide to
    meet it, close. It leads the cube by fixed motion-time guesses and assumes the observation is
    fresh, which is exactly what a 2 s decision latency in realtime mode breaks."""
    part, arm, obj, stopped = _arm_and_object(state, priv, "cube")
    if stopped:
        return stopped
    p, o = np.asarray(arm["position"], float), np.asarray(obj["position_cm"], float)
    v = np.asarray(priv["belt"]["velocity_cm_s"], float)
    u = v / max(float(np.linalg.norm(v)), 1e-6)
    size = float(obj["size_cm"])
    g = float(arm.get("gripper", 1.0))
    if _holding(arm, obj) and g < 0.85:
        goal = priv["object_start_z_cm"] + priv["lift_cm"] + 3.0
        return "I hold the cube; I lift it off the belt.", {
            part: _act(np.array([0, 0, goal - o[2]]), None, 0.0)
        }
    belt_top = float(priv["belt"]["top_cm"])
    grasp_z = max(o[2] + 0.3, _lowest_tcp_cm(priv.get("tool") or {}, belt_top))
    hover_z = max(o[2] + size / 2 + 8.0, grasp_z + 6.0)
    yaw = _belt_grasp_yaw(v, size, priv.get("tool") or {}, float(arm["orientation"][2]))
    rot = _rot_delta(arm, yaw)
    if g < 0.9:
        return "The gripper is closed on nothing; I open it and rise.", {
            part: _act(np.array([0, 0, max(0.0, hover_z - p[2])]), None, 1.0)
        }
    if p[2] >= grasp_z + 1.5:
        d = o + v * 1.6 + u * LAND_AHEAD_CM - p  # where the cube will be after the descent, plus a margin
        if np.linalg.norm(d[:2]) > 12 or max(abs(x) for x in rot) > 0.05:
            d = o + v * 2.5 + u * LAND_AHEAD_CM - p
            return "I move above the belt ahead of the cube and turn the fingers across its path.", {
                part: _act(np.array([d[0], d[1], hover_z - p[2]]), rot)
            }
        return "I lower the open gripper onto the belt just ahead of the cube.", {
            part: _act(np.array([d[0], d[1], grasp_z - p[2]]), None)
        }
    # a gripper that takes a while to close (its move_time_s) meets the cube further along the belt
    lead_s = 0.3 + 0.5 * float((priv.get("tool") or {}).get("close_time_s") or 0.0)
    off = o + v * lead_s - p
    across = off[:2] - (off[:2] @ u[:2]) * u[:2]  # off the belt's line
    if np.linalg.norm(across) < 0.8 and np.linalg.norm(off[:2]) < 1.0:
        return "The cube is between the fingers; I close the gripper.", {part: _act(None, None, 0.0)}
    d = o + v * (lead_s + 0.4) - p
    return "I slide along the belt to meet the cube.", {
        part: _act(np.array([d[0], d[1], grasp_z - p[2]]), None)
    }


PICK_CUBE: Expert = within_caps(pick_cube)
PLACE_IN_BOWL: Expert = within_caps(place_in_bowl)
PUSH_TO_TARGET: Expert = within_caps(push_to_target)
CONVEYOR_PICK: Expert = within_caps(conveyor_pick)
"""The single-arm experts as a task names them (`MujocoTask.expert`, e.g. "...experts:PICK_CUBE")."""
