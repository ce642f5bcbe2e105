"""Chunks from a stateless expert: ask it again on the state its own steps would reach.

A scripted expert decides one step from the state it sees. With `max_chunk` K > 1 the policy asks it
again on a PREDICTED state (the arm moved by the step; an object the hand holds moved with it) until
the chunk is K steps long or a prediction stops being trustworthy:

- a step that changes the gripper ends the chunk (what the fingers close on is measured, not guessed);
- a step that brings the hand into contact with an object ends it, except that a following step
  which only works the gripper joins it (descend + close in one reply);
- a step that asks for (almost) nothing, a `Stop` or a two-handed hold end it too, and with an
  object moving by itself no later step may change the gripper (a close timed to its arrival) and
  the chunk ends once the hand is down at its height.

An object that moves by itself (on a belt) is carried along by its velocity for each step's
estimated motion time (`step_time_s`: what the runtime takes for such a move, measured on the Panda).

Units are the protocol's (cm, rad); the steps are the expert's internal dicts.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from pear_agent.policies.experts import Expert, Stop, _holding, _tools, wrap
from pear_agent.robot.backend import TASK_SUCCESS

CONTACT_MARGIN_CM = 1.5
"""A tool point this close (horizontally, beyond half the object's size) and below its top + 1 cm
is in contact with the object: what happens next is measured, not predicted."""
MOVING_CM_S = 0.5
"""An object faster than this (a belt) is moved by its velocity in the prediction."""
GRIPPER_CHANGE = 0.3


def _objects(priv: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    if isinstance(priv.get("object"), dict) and "position_cm" in priv["object"]:
        out.append(priv["object"])
    for o in (priv.get("objects") or {}).values():
        if isinstance(o, dict) and "position_cm" in o:
            out.append(o)
    return out


def _shift(obj: dict[str, Any], delta: np.ndarray) -> None:
    """Move an object's facts (its centre and, where given, its bounding box) by `delta` cm."""
    for key in ("position_cm", "body_cm", "min_cm", "max_cm"):
        if key in obj:
            obj[key] = [float(x) for x in np.asarray(obj[key], float) + delta]


def _held(arm: dict[str, Any], obj: dict[str, Any]) -> bool:
    """Does the hand hold this object (so it moves with the hand)? The experts' own test, or, for
    an object with a bounding box (LIBERO: a bowl taken by its rim), a half-closed gripper whose
    tool point is inside the box grown by 1.5 cm."""
    if _holding(arm, obj):
        return True
    g = float(arm.get("gripper", 1.0))
    if not 0.012 < g < 0.85 or "min_cm" not in obj or "max_cm" not in obj:  # a bowl's wall: g ~0.03
        return False
    p = np.asarray(arm["position"], float)
    lo, hi = np.asarray(obj["min_cm"], float) - 1.5, np.asarray(obj["max_cm"], float) + 1.5
    return bool(np.all(p >= lo) and np.all(p <= hi))


def _size_cm(obj: dict[str, Any]) -> float:
    if "size_cm" not in obj and "min_cm" in obj and "max_cm" in obj:
        return float(np.max(np.asarray(obj["max_cm"], float) - np.asarray(obj["min_cm"], float)))
    size = obj.get("size_cm", 0.0)
    return float(max(size)) if isinstance(size, list | tuple) else float(size or 0.0)


def step_time_s(move_cm: np.ndarray, turn_rad: np.ndarray | None) -> float:
    """A step's motion time as the runtime takes it, roughly (0.93 s for 10 cm on the Panda)."""
    turn = float(np.max(np.abs(turn_rad))) if turn_rad is not None and len(turn_rad) else 0.0
    return 0.2 + 0.06 * float(np.linalg.norm(move_cm)) + 0.4 * turn


def _in_contact(pos: np.ndarray, obj: dict[str, Any]) -> bool:
    o = np.asarray(obj["position_cm"], float)
    size = _size_cm(obj)
    near = float(np.linalg.norm(pos[:2] - o[:2])) < size / 2 + CONTACT_MARGIN_CM
    return near and pos[2] < o[2] + size / 2 + 1.0


def _nothing(step: dict[str, Any], commanded: dict[str, float]) -> bool:
    for part, act in step.items():
        if float(np.linalg.norm(act.get("position") or [0.0])) > 0.05:
            return False
        if max((abs(v) for v in act.get("orientation") or [0.0]), default=0.0) > 0.005:
            return False
        if (
            "gripper" in act
            and abs(float(act["gripper"]) - commanded.get(part, act["gripper"])) > GRIPPER_CHANGE
        ):
            return False
    return True


def claims_done(priv: dict[str, Any]) -> bool:
    """May an expert's `Stop` declare the episode done? Only when the task's own success check
    agrees (`task_success`, which the MuJoCo backend adds to every turn's facts): an expert that
    cannot finish says so and holds still, it never claims a task done that is not (a ball rolled out
    of the Panda's reach and a `done` on faith would have ended six episodes of ten as successes)."""
    return priv.get(TASK_SUCCESS) is True


def cannot_finish(why: str) -> str:
    """A `Stop`'s reasoning when the task is not done: it says it cannot, and claims nothing."""
    reason = why.split(":", 1)[0]
    return f"{reason}: I cannot finish the task from here; I hold still and do not claim it done."


def expert_chunk(
    expert: Expert, state: dict[str, Any], priv: dict[str, Any], max_chunk: int
) -> tuple[str, list[dict[str, Any]], bool]:
    """(reasoning, steps, done): up to `max_chunk` steps of `expert`, each planned on the state the
    previous ones predict. `done`: the expert stopped and the task's own check agrees (`claims_done`)."""
    why, action = expert(state, priv)
    if isinstance(action, Stop):
        done = claims_done(priv)
        return (why if done else cannot_finish(why)), [dict(action)], done
    if max_chunk <= 1:
        return why, [dict(action)], False
    state, priv = copy.deepcopy(state), copy.deepcopy(priv)
    tools = _tools(priv)
    objects = _objects(priv)
    # what each gripper is commanded to now: a reading below fully open is a closed command
    commanded = {p: (0.0 if float(s.get("gripper", 1.0)) < 0.85 else 1.0) for p, s in state.items()}
    whys, steps = [why], [action]
    # a close timed to a moving object's arrival is decided on a fresh observation, never predicted
    moving = any(
        o.get("velocity_cm_s") is not None and float(np.linalg.norm(o["velocity_cm_s"])) > MOVING_CM_S
        for o in objects
    )
    while True:
        two_handed = bool(priv.get("touching")) and len(tools) > 1
        ends = two_handed
        held_all: list[dict[str, Any]] = []
        duration_s = 0.0
        for part, act in action.items():
            arm = state.get(part)
            if arm is None:
                ends = True
                continue
            held = [o for o in objects if _held(arm, o)]
            held_all += held
            move = np.asarray(act.get("position") or [0.0, 0.0, 0.0], float)
            duration_s = max(duration_s, step_time_s(move, act.get("orientation")))
            arm["position"] = [float(v) for v in np.asarray(arm["position"], float) + move]
            if act.get("orientation"):
                turn = np.asarray(act["orientation"], float)
                arm["orientation"] = [float(v) for v in wrap(np.asarray(arm["orientation"], float) + turn)]
            for o in held:
                _shift(o, move)
            if "gripper" in act:
                g = float(act["gripper"])
                if abs(g - commanded.get(part, g)) > GRIPPER_CHANGE:
                    ends = True
                commanded[part] = g
        for o in objects:  # what the belt carries on meanwhile
            v = o.get("velocity_cm_s")
            if v is not None and float(np.linalg.norm(v)) > MOVING_CM_S and o not in held_all:
                _shift(o, duration_s * np.asarray(v, float))
        for part in action:
            arm = state.get(part)
            if arm is None:
                continue
            held = [o for o in objects if _held(arm, o)]
            pos = np.asarray(arm["position"], float)
            if moving and any(pos[2] < o["position_cm"][2] + _size_cm(o) / 2 + 3.0 for o in objects):
                ends = True  # down at a moving object: meeting it is timed on fresh observations
                break
            if any(_in_contact(pos, o) for o in objects if o not in held):
                ends = True
                nxt_why, nxt = expert(state, priv)
                gripper_only = (
                    not moving
                    and not isinstance(nxt, Stop)
                    and len(steps) < max_chunk
                    and all(set(a) == {"gripper"} for a in nxt.values())
                    and nxt
                )
                if gripper_only:
                    whys.append(nxt_why)
                    steps.append(nxt)
                break
        if ends or len(steps) >= max_chunk:
            break
        why, action = expert(state, priv)
        if isinstance(action, Stop) or _nothing(action, commanded):
            break
        if moving and any(
            abs(float(a["gripper"]) - commanded.get(p, float(a["gripper"]))) > GRIPPER_CHANGE
            for p, a in action.items()
            if "gripper" in a
        ):
            break
        whys.append(why)
        steps.append(action)
    if len(steps) == 1:
        return whys[0], steps, False
    told = " Then: ".join(f"step {i}: {w.rstrip('.')}" for i, w in enumerate(whys, 1))
    return f"I plan {len(steps)} steps in one reply. {told}.", steps, False
