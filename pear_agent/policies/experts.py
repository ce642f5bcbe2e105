"""What every scripted expert shares (the experts themselves live with their family:
`sim_adapters/mujoco/experts/`, `sim_adapters/libero/expert/`).

Scripted experts are hand-written pilots that read privileged simulator facts and answer in the
same words and JSON a model would. Each is stateless: it decides its phase from the geometry it
sees, so a fumbled grasp or a slipped block is simply retried.

Their replies are training data, so they honour the robot as a model should: every move stays
within the arm's per-turn caps and workspace box (`within_caps`: a long move is split over turns),
heights come from the gripper's geometry and the table top, and when the object has left the table
or every arm's reach the expert stops (`Stop`: the reply holds still and says it cannot finish; it
declares the episode done only when the task's own check agrees, `chunking.claims_done`) instead
of asking for a move it cannot make. Stateless as they are, they never ask a third time in a row
for a move that did not arrive twice (`unstick`, read from the conversation): they back off and
re-plan.

Units are the protocol's: cm and rad, robot base frame.
"""

from __future__ import annotations

import functools
import json
import math
import re
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
    """An expert's last action (by part, possibly empty): it holds still, and the reply declares
    the episode done when the task's own check agrees (else it says it cannot finish). Experts stop
    when nothing they can do would succeed: the object has left the table or every arm's reach, or
    no grasp fits it."""


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


# -- never the same failed move more than twice ------------------------------------------------
REPEATS_ALLOWED = 2
"""How many times in a row an expert may ask for the same move that did not arrive."""
FAILED_STATUSES = frozenset({"blocked", "ik_failed", "timeout"})
"""Outcomes that mean the move did not arrive (the arm stopped short, IK refused it, it timed out)."""
SAME_MOVE_CM = 1.0
"""Two asked moves within this many cm (and 0.05 rad, the same grip) are the same move."""
BACK_OFF_CM = 4.0
"""A back-off rises this far and steps this far back against the blocked move's sideways part."""
BACK_OFF_SAYS = "I back off"
"""How a back-off reply begins (the next back-offs of the episode turn their direction by it)."""

_FENCE = re.compile(r"```json\s*(\{.*?\})\s*```", re.S)
_LAST = re.compile(r"Last action:\s*([a-z_]+)")
_INTERNAL = {"move_cm": "position", "turn_rad": "orientation", "gripper": "gripper"}
"""Wire quantity -> an expert's internal name (`pear_agent.protocol.actions.wire_action`, reversed)."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(c.get("text", "") for c in content or [] if isinstance(c, dict))


def reply_history(messages: list[dict[str, Any]]) -> list[tuple[dict[str, Any] | None, str | None, str]]:
    """(the first step each earlier reply asked for, by part, or None when unreadable; the outcome
    status the next turn reported; the reply's text), oldest first, read from the conversation
    alone: the in-process expert and the served one (`pear-agent serve`) see the same history."""
    out: list[tuple[dict[str, Any] | None, str | None, str]] = []
    for i, m in enumerate(messages):
        if m.get("role") != "assistant":
            continue
        text = _text(m.get("content"))
        step: dict[str, Any] | None = None
        found = _FENCE.findall(text)
        if found:
            try:
                wire = json.loads(found[-1]).get("action")
                first = wire[0] if isinstance(wire, list) and wire else wire
                step = {
                    part: {_INTERNAL[k]: v for k, v in body.items() if k in _INTERNAL}
                    for part, body in first.items()
                }
            except (ValueError, AttributeError, TypeError, IndexError):
                step = None
        status = None
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        if nxt is not None and nxt.get("role") == "user":
            said = _LAST.search(_text(nxt.get("content")))
            status = said.group(1) if said else None
        out.append((step, status, text))
    return out


def _moving(step: dict[str, Any]) -> dict[str, Any]:
    return {p: a for p, a in step.items() if isinstance(a, dict) and a}


def _same_move(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return False
    a, b = _moving(a), _moving(b)
    if not a or set(a) != set(b):
        return False
    for part in a:
        pa, pb = a[part] or {}, b[part] or {}
        if not isinstance(pa, dict) or not isinstance(pb, dict):
            return False
        va, vb = (
            np.asarray(pa.get("position") or [0, 0, 0], float),
            np.asarray(pb.get("position") or [0, 0, 0], float),
        )
        if va.shape != vb.shape or float(np.linalg.norm(va - vb)) > SAME_MOVE_CM:
            return False
        ra, rb = (
            np.asarray(pa.get("orientation") or [0, 0, 0], float),
            np.asarray(pb.get("orientation") or [0, 0, 0], float),
        )
        if ra.shape != rb.shape or float(np.max(np.abs(wrap(ra - rb)))) > 0.05:
            return False
        ga, gb = pa.get("gripper"), pb.get("gripper")
        if (ga is None) != (gb is None) or (ga is not None and abs(float(ga) - float(gb)) > 0.2):
            return False
    return True


def unstick(
    why: str,
    steps: list[dict[str, Any]],
    history: list[tuple[dict[str, Any] | None, str | None, str]],
    state: State,
    priv: dict[str, Any],
) -> tuple[str, list[dict[str, Any]]]:
    """The expert's reply, unless it asks a third time in a row for a move that did not arrive the
    last two times (`REPEATS_ALLOWED`): then a back-off instead, so the stateless expert re-plans
    from a new pose. Each arm in the repeated move rises `BACK_OFF_CM` and steps back against the
    move's sideways part (turned a quarter further round at each later back-off of the episode, so
    a re-plan does not meet the same wall); from the third back-off on, an arm whose gripper is
    closed also opens it, so the expert grasps again from the start."""
    if len(history) < REPEATS_ALLOWED or not steps:
        return why, steps
    first = _moving(steps[0])
    recent = history[-REPEATS_ALLOWED:]
    if not all(s in FAILED_STATUSES and _same_move(a, first) for a, s, _ in recent):
        return why, steps
    k = sum(text.startswith(BACK_OFF_SAYS) for _, _, text in history)
    turn = k * math.pi / 2
    rot = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
    back: dict[str, Any] = {}
    for part, act in first.items():
        if part not in state:
            continue
        move = np.asarray(act.get("position") or [0.0, 0.0, 0.0], float)
        side = -move[:2]
        norm = float(np.linalg.norm(side))
        side = rot @ (side / norm) * BACK_OFF_CM if norm > 0.3 else rot @ np.array([-BACK_OFF_CM, 0.0])
        up = BACK_OFF_CM if move[2] <= 0.5 else -min(BACK_OFF_CM, 0.5 * float(move[2]))
        out: dict[str, Any] = {"position": [round(float(side[0]), 2), round(float(side[1]), 2), round(up, 2)]}
        if k >= 2 and float(state[part].get("gripper", 1.0)) < 0.85:
            out["gripper"] = 1.0
        back[part] = out
    if not back:
        return why, steps
    cap_action(state, priv, back)
    told = " and open the gripper to grasp again" if any("gripper" in a for a in back.values()) else ""
    return (
        f"{BACK_OFF_SAYS}: the same move did not arrive {REPEATS_ALLOWED} times in a row, so I move "
        f"away from where it stopped{told} and plan again from there.",
        [back],
    )
