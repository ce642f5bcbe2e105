"""Scripted experts: hand-written pilots that read privileged simulator facts and answer in the
same words and JSON a model would. Each is stateless: it decides its phase from the geometry it
sees, so a fumbled grasp or a slipped block is simply retried.

Their replies are training data, so they honour the robot as a model should: every move stays
within the arm's per-turn caps and workspace box (`within_caps`: a long move is split over turns),
heights come from the gripper's geometry and the table top, and when the object has left the table
or every arm's reach the expert stops (`Stop`: the reply declares the episode done) instead of
asking for a move it cannot make.

Units are the protocol's: cm and rad, robot base frame.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

State = dict[str, dict[str, Any]]
Expert = Callable[[State, dict[str, Any]], tuple[str, dict[str, Any]]]

DOWN_ROLL = math.pi
FALLEN_BELOW_TABLE_CM = 3.0
"""An object whose centre is this far below the table top has fallen off it."""
OUT_OF_REACH_CM = 5.0
"""An object whose centre is this far outside every arm's workspace box cannot be handled."""


class Stop(dict):
    """An expert's last action (by part, possibly empty): the reply declares the episode done.
    Experts stop when nothing they can do would succeed: the object has left the table or every
    arm's reach, or no grasp fits it."""


def _tools(priv: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each part's tool facts (caps, workspace, gripper geometry), by part name: single-arm tasks
    give `part` + `tool`, two-arm tasks `arms` (role -> part) + `tool` by role."""
    tool = priv.get("tool") or {}
    if "part" in priv:
        return {priv["part"]: tool}
    roles = priv.get("arms") or {}
    return {part: tool.get(role) or {} for role, part in roles.items()}


def _cap_part(
    move: np.ndarray | None, turn: np.ndarray | None, pos: np.ndarray, tool: dict[str, Any]
) -> tuple[np.ndarray | None, np.ndarray | None, float | None]:
    """The move kept inside the workspace box and shortened to the per-turn cap, the turn clipped
    per axis to its cap (a hair under each, so rounding cannot cross it); and the length of the
    move asked for when it was shortened."""
    asked = None
    if move is not None:
        box = tool.get("workspace_cm")
        if box:
            lo = np.array([box[a][0] for a in "xyz"], float)
            hi = np.array([box[a][1] for a in "xyz"], float)
            move = np.clip(pos + move, lo, hi) - pos
        cap = tool.get("max_step_cm")
        norm = float(np.linalg.norm(move))
        if cap and norm > cap:
            move = move * (float(cap) - 0.01) / norm
            asked = norm
    if turn is not None and tool.get("max_turn_rad"):
        cap = float(tool["max_turn_rad"]) - 0.001
        turn = np.clip(turn, -cap, cap)
    return move, turn, asked


def cap_action(state: State, priv: dict[str, Any], action: dict[str, Any]) -> list[str]:
    """Shortens, in place, every part's move and turn to that part's caps and workspace box (from
    the privileged tool facts; parts without them pass unchanged). Returns a note per move that
    was longer than one turn allows."""
    tools = _tools(priv)
    notes = []
    for part, act in action.items():
        tool = tools.get(part)
        if not tool or part not in state:
            continue
        pos = np.asarray(state[part]["position"], float)
        move = np.asarray(act["position"], float) if "position" in act else None
        turn = np.asarray(act["orientation"], float) if "orientation" in act else None
        move, turn, asked = _cap_part(move, turn, pos, tool)
        if move is not None:
            act["position"] = [round(float(v), 2) for v in move]
        if turn is not None:
            act["orientation"] = [round(float(v), 3) for v in turn]
        if asked is not None:
            step = float(tool["max_step_cm"])
            who = "" if len(action) == 1 else f"{part}: "
            notes.append(f"{who}{asked:.1f} cm is more than one turn's {step:g} cm: I go part of the way now")
    return notes


def within_caps(expert: Expert) -> Expert:
    """Wraps an expert so every move it asks for honours the caps (`cap_action`). A long move
    becomes its first step, which the stateless expert continues next turn; the reasoning says so."""

    @functools.wraps(expert)
    def capped(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        why, action = expert(state, priv)
        notes = cap_action(state, priv, action)
        if notes:
            why = f"{why.rstrip('.')}. {'; '.join(notes)}."
        return why, action

    return capped


def object_lost(position_cm: Any, priv: dict[str, Any], what: str = "object") -> str | None:
    """Why the object cannot be handled any more (fallen off the table, or outside every arm's
    workspace box), or None."""
    o = np.asarray(position_cm, float)
    tools = list(_tools(priv).values())
    tables = [float(t["table_z_cm"]) for t in tools if t.get("table_z_cm") is not None]
    if tables and o[2] < min(tables) - FALLEN_BELOW_TABLE_CM:
        return f"The {what} has fallen off the table ({min(tables) - o[2]:.0f} cm below its top)"
    boxes = [t["workspace_cm"] for t in tools if t.get("workspace_cm")]
    if boxes:
        outside = min(
            float(np.linalg.norm([max(b[a][0] - o[i], 0.0, o[i] - b[a][1]) for i, a in enumerate("xy")]))
            for b in boxes
        )
        if outside > OUT_OF_REACH_CM:
            arms = "arms" if len(boxes) > 1 else "arm"
            return f"The {what} is {outside:.0f} cm beyond the reach of the {arms}"
    return None


def stop(reason: str, parts: list[str]) -> tuple[str, Stop]:
    """Declare the episode over, holding every part still."""
    return f"{reason}: nothing I can do will finish the task, so I stop here.", Stop({p: {} for p in parts})


def wrap(a: np.ndarray | float) -> np.ndarray:
    return (np.asarray(a, dtype=float) + np.pi) % (2 * np.pi) - np.pi


def _grasp_yaw(obj_yaw: float, current_yaw: float) -> float:
    """The yaw (of the four that square the fingers on a box's faces) closest to the current one."""
    options = obj_yaw + np.arange(-4, 5) * (np.pi / 2)
    return float(options[np.argmin(np.abs(wrap(options - current_yaw)))])


def _rot_delta(arm: dict[str, Any], yaw: float) -> list[float]:
    cur = np.asarray(arm["orientation"], dtype=float)
    return [round(float(v), 3) for v in wrap(np.array([DOWN_ROLL, 0.0, yaw]) - cur)]


def _act(
    pos: np.ndarray | None = None, rot: list[float] | None = None, gripper: float | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if pos is not None:
        out["position"] = [round(float(v), 2) for v in pos]
    if rot is not None and max(abs(v) for v in rot) > 0.01:
        out["orientation"] = rot
    if gripper is not None:
        out["gripper"] = gripper
    return out


def _holding(arm: dict[str, Any], obj: dict[str, Any]) -> bool:
    p, o = np.asarray(arm["position"]), np.asarray(obj["position_cm"])
    g = float(arm.get("gripper", 1.0))
    return 0.15 < g < 0.85 and np.linalg.norm(p[:2] - o[:2]) < 2.5 and abs(p[2] - o[2]) < 3.0


def _lowest_tcp_cm(tool: dict[str, Any], floor_cm: float) -> float:
    """The lowest tool point that keeps the fingertips 0.5 cm above a surface at `floor_cm`."""
    return floor_cm + float(tool.get("fingertip_below_tcp_cm", 1.0)) + 0.5


@dataclass(frozen=True)
class GraspWords:
    """What an approach says at each of its stages (`move`: given the cm still to go sideways)."""

    reopen: str
    rise: str
    move: Callable[[float], str]
    turn: str
    lower: str
    close: str


def approach_and_grasp(
    arm: dict[str, Any],
    o: np.ndarray,
    yaw: float,
    grasp_z: float,
    hover_z: float,
    clear_z: float,
    words: GraspWords,
) -> tuple[str, dict[str, Any]]:
    """Open gripper: go above the grasp point `o` (rising to `hover_z` first when below `clear_z`),
    turn to `yaw`, descend to `grasp_z`, close. A closed gripper holding nothing first opens and
    backs off upwards. One move a turn; the cube tasks and the object task say it their own way."""
    p = np.asarray(arm["position"], float)
    rot = _rot_delta(arm, yaw)
    dxy = o[:2] - p[:2]
    if float(arm.get("gripper", 1.0)) < 0.9:
        up = max(0.0, min(6.0, hover_z - p[2]))
        return words.reopen, _act(np.array([0, 0, up]), None, 1.0)
    if np.linalg.norm(dxy) > 0.8:
        if p[2] < clear_z:
            return words.rise, _act(np.array([0, 0, hover_z - p[2]]), rot)
        return words.move(float(np.linalg.norm(dxy))), _act(np.array([dxy[0], dxy[1], hover_z - p[2]]), rot)
    if max(abs(v) for v in rot) > 0.04:
        return words.turn, _act(None, rot)
    if p[2] > grasp_z + 0.6:
        return words.lower, _act(np.array([dxy[0], dxy[1], grasp_z - p[2]]), rot)
    return words.close, _act(None, None, 0.0)


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


def place_in_bowl(state: State, priv: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    part, arm, obj, stopped = _arm_and_object(state, priv, "cube")
    if stopped:
        return stopped
    bowl = priv["container"]
    o = np.asarray(obj["position_cm"], float)
    b = np.asarray(bowl["position_cm"], float)
    size = float(obj["size_cm"])
    if priv.get("object_inside"):
        return (
            "The cube is in the bowl; I open the gripper and move away upwards.",
            {part: _act(np.array([0, 0, 6.0]), None, 1.0)},
        )
    if not _holding(arm, obj):
        why, act = _approach_and_grasp(arm, obj, priv.get("tool"))
        return why, {part: act}
    carry_z = bowl["rim_height_cm"] + size / 2 + 4.0
    dxy = b[:2] - o[:2]
    if np.linalg.norm(dxy) > 1.5:
        if o[2] < carry_z - 1.0:
            return (
                "I hold the cube; I lift it above the bowl's rim before carrying it.",
                {part: _act(np.array([0, 0, carry_z - o[2]]), None, 0.0)},
            )
        return (
            f"I carry the cube {np.linalg.norm(dxy):.1f} cm towards the bowl.",
            {part: _act(np.array([dxy[0], dxy[1], carry_z - o[2]]), None, 0.0)},
        )
    release_z = bowl["rim_height_cm"] + size / 2 + 1.0
    if o[2] > release_z + 0.8:
        return "The cube is above the bowl; I lower it.", {
            part: _act(np.array([0, 0, release_z - o[2]]), None, 0.0)
        }
    return "The cube is just above the bowl's floor; I let go.", {part: _act(None, None, 1.0)}


WRIST_MARGIN_RAD = 0.1
"""How close to the end of its last joint's room the push expert turns the tool."""


def _in_room(yaw: float, room: list[float]) -> bool:
    """Is the yaw (any turn of it) within the wrist's room [lo, hi] (absolute yaws, pointing down),
    `WRIST_MARGIN_RAD` inside its ends? (A YAM's wrist stops 0.95 rad below its home yaw: a push
    asked for the other way round, past the stop, was refused by IK on every turn.)"""
    lo, hi = room[0] + WRIST_MARGIN_RAD, room[1] - WRIST_MARGIN_RAD
    return any(lo <= yaw + k * 2 * np.pi <= hi for k in range(-2, 3))


def push_line(
    arm: dict[str, Any], o: np.ndarray, target_xy: np.ndarray, tool: dict[str, Any], table_z: float
) -> tuple[float, np.ndarray, float, float, float, float | None]:
    """Where a push of the block at `o` towards `target_xy` stands: the distance to go (cm), its
    unit direction, the height the fingertips sweep at, the tool point's offset along the push line
    (negative: behind the block) and across it, and the grip to command (close an open gripper)."""
    p = np.asarray(arm["position"], float)
    to_target = target_xy - o[:2]
    dist = float(np.linalg.norm(to_target))
    u = to_target / max(dist, 1e-6)
    # the fingertips sweep just above the table: at least 1 cm of clearance below the tool point
    push_z = table_z + max(2.0, float(tool.get("fingertip_below_tcp_cm", 1.0)) + 1.0)
    r = p[:2] - o[:2]
    along = float(r @ u)
    lateral = float(np.linalg.norm(r - along * u))
    grip = 0.0 if float(arm.get("gripper", 1.0)) > 0.2 else None
    return dist, u, push_z, along, lateral, grip


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
        step = min(dist + contact_gap, contact_gap + 6.0)
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

SINGLE_ARM_EXPERTS: dict[str, Expert] = {
    e.__name__: e for e in (PICK_CUBE, PLACE_IN_BOWL, PUSH_TO_TARGET, CONVEYOR_PICK)
}
"""The same by function name (for tests that look them up so; a task points at its own expert)."""
