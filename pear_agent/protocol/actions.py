"""The action a model replies with: its schema per robot, and a parser for free-text replies.

An action has the structure of the state JSON and holds changes: `position` in cm and
`orientation` in rad are deltas, `gripper` is an absolute command in [0, 1]. Parts or quantities
left out do not move.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from pear_agent.robot_config import RobotConfig

# Bounds a sane single action never exceeds; anything beyond is a misunderstanding of the
# protocol (e.g. absolute coordinates), refused rather than clipped.
MAX_ABS_POSITION_DELTA_CM = 100.0
MAX_ABS_ROTATION_DELTA_RAD = math.pi


@dataclass
class PartAction:
    position_cm: list[float] | None = None
    orientation_rad: list[float] | None = None
    gripper: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.position_cm is not None:
            out["position"] = self.position_cm
        if self.orientation_rad is not None:
            out["orientation"] = self.orientation_rad
        if self.gripper is not None:
            out["gripper"] = self.gripper
        return out


@dataclass
class Action:
    parts: dict[str, PartAction] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {name: p.to_json() for name, p in self.parts.items()}


class ActionError(ValueError):
    """A reply holds no valid action; the message says what is wrong, for the log and the model."""


def action_schema(robot: RobotConfig) -> dict[str, Any]:
    """JSON Schema of a valid action for this robot (for prompts and structured outputs)."""
    vec = lambda bound, unit: {  # noqa: E731
        "type": "array",
        "items": {"type": "number", "minimum": -bound, "maximum": bound},
        "minItems": 3,
        "maxItems": 3,
        "description": f"change, {unit}",
    }
    props: dict[str, Any] = {}
    for name, part in robot.parts.items():
        q: dict[str, Any] = {
            "position": vec(MAX_ABS_POSITION_DELTA_CM, "cm, [dx, dy, dz]"),
            "orientation": vec(MAX_ABS_ROTATION_DELTA_RAD, "rad, [droll, dpitch, dyaw]"),
        }
        if part.gripper is not None:
            q["gripper"] = {
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "absolute command: 0 closed .. 1 open",
            }
        props[name] = {"type": "object", "properties": q, "additionalProperties": False}
    return {"type": "object", "properties": props, "additionalProperties": False}


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError(f"{where} must be a number, got {json.dumps(value)}")
    if not math.isfinite(value):
        raise ActionError(f"{where} must be finite, got {value}")
    return float(value)


def _vector(value: Any, where: str, bound: float, unit: str) -> list[float]:
    if not isinstance(value, list) or len(value) != 3:
        raise ActionError(f"{where} must be a list of 3 numbers ({unit}), got {json.dumps(value)}")
    out = [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    for i, v in enumerate(out):
        if abs(v) > bound:
            raise ActionError(
                f"{where}[{i}] = {v:g} is out of range: a change must be within +-{bound:g} {unit} "
                "(actions are changes, not absolute values)"
            )
    return out


def validate_action(obj: Any, robot: RobotConfig) -> Action:
    if not isinstance(obj, dict):
        raise ActionError(f"the action must be a JSON object, got {type(obj).__name__}")
    if set(obj) == {"action"} and isinstance(obj["action"], dict):
        obj = obj["action"]
    action = Action()
    for part_name, body in obj.items():
        if part_name not in robot.parts:
            raise ActionError(f"unknown part {part_name!r}; parts are {sorted(robot.parts)}")
        part = robot.parts[part_name]
        if not isinstance(body, dict):
            raise ActionError(f"{part_name} must be an object of quantities, got {json.dumps(body)}")
        pa = PartAction()
        for key, value in body.items():
            where = f"{part_name}.{key}"
            if key not in part.quantities:
                raise ActionError(f"unknown quantity {where!r}; {part_name} has {sorted(part.quantities)}")
            if key == "position":
                pa.position_cm = _vector(value, where, MAX_ABS_POSITION_DELTA_CM, "cm")
            elif key == "orientation":
                pa.orientation_rad = _vector(value, where, MAX_ABS_ROTATION_DELTA_RAD, "rad")
            else:
                g = _number(value, where)
                if not 0.0 <= g <= 1.0:
                    raise ActionError(f"{where} = {g:g} is out of range: it must be in [0, 1]")
                pa.gripper = g
        action.parts[part_name] = pa
    return action


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def _json_objects(text: str) -> list[tuple[int, Any]]:
    """Every top-level JSON object in the text, with its start offset, in order."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        found.append((i, obj))
        i = text.find("{", end)
    return found


def parse_reply(text: str, robot: RobotConfig) -> Action:
    """The last valid action in a reply (fenced or bare JSON), or ActionError naming the problem.

    Reasoning inside <think>...</think> is ignored; JSON in fenced blocks is preferred over bare
    JSON elsewhere in the text.
    """
    if not isinstance(text, str) or not text.strip():
        raise ActionError("the reply is empty")
    visible = _THINK.sub("", text)
    if "<think>" in visible and "</think>" not in visible:
        visible = ""  # reasoning cut off before it ended: nothing after it to act on
    candidates: list[Any] = []
    fenced = [m.group(1) for m in _FENCE.finditer(visible)]
    for block in fenced:
        candidates.extend(obj for _, obj in _json_objects(block))
    if not candidates:
        candidates = [obj for _, obj in _json_objects(visible)]
    if not candidates:
        raise ActionError("no JSON object found in the reply; end it with one JSON action object")
    last_error: ActionError | None = None
    for obj in reversed(candidates):
        try:
            return validate_action(obj, robot)
        except ActionError as exc:
            last_error = exc if last_error is None else last_error
    assert last_error is not None
    raise last_error
