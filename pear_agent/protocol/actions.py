"""The action a model replies with (protocol v2): its schema per robot, and a parser for replies.

An action is a JSON object that cannot be mistaken for the state the model is shown::

    {"action": {"arm": {"move_cm": [0, 1.5, -2], "turn_rad": [0, 0, 0.1], "gripper": 0}}, "done": false}

`move_cm` [dx, dy, dz] and `turn_rad` [droll, dpitch, dyaw] are changes; `gripper` is an absolute
command in [0, 1]. At least one part with at least one quantity; parts or quantities left out do
not move; a part whose only quantities are zero changes holds still. `"done": true` declares the
task finished (the action in the same reply runs first). The state (`{"arm": {"position": ...}}`)
has no `action` key and none of these quantity names, so an echoed state is refused, never run.

A chunk is a list of such steps, each a change from the previous step's target::

    {"action": [{"arm": {"move_cm": [0, 0, -4]}}, {"arm": {"gripper": 0}}], "done": false}

One object is a chunk of one (backward compatible). A chunk longer than the environment's
`max_chunk` is refused with a correction turn, never cut short.

`parse_reply` never raises anything but `ActionError`, takes time linear in the reply's length,
and refuses replies longer than `MAX_REPLY_CHARS`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pear_agent.robot.config import RobotConfig

PROTOCOL_VERSION = 2
"""1: actions had the state's shape (protocol v1); 2: `{"action": {...}}` with move_cm/turn_rad."""

# Bounds a sane single action never exceeds; anything beyond is a misunderstanding of the
# protocol (e.g. absolute coordinates), refused with a correction turn rather than clipped.
MAX_ABS_POSITION_DELTA_CM = 100.0
MAX_ABS_ROTATION_DELTA_RAD = math.pi
MAX_REPLY_CHARS = 1_000_000
"""Longer replies are refused at once (a runaway generation, not an answer)."""
MAX_ACTION_CHARS = 4096
"""An action object is a few hundred characters; longer candidates are not decoded."""
MAX_CANDIDATES = 16
"""How many `"action"` keys, from the end of the reply, are looked at."""

MOVE, TURN, GRIPPER, DONE, ACTION = "move_cm", "turn_rad", "gripper", "done", "action"
PRESS = "press"
"""A move's flag: keep pushing toward the target through contact for the move's time budget,
instead of ending `blocked` when the hand stalls (only where the backend honours it)."""
# the state's quantity names -> the action's, for the message to a model that echoed the state
_STATE_KEYS = {"position": MOVE, "orientation": TURN}


@dataclass
class PartAction:
    position_cm: list[float] | None = None
    """Change of the tool point, cm (wire: `move_cm`)."""
    orientation_rad: list[float] | None = None
    """Change of orientation, rad (wire: `turn_rad`)."""
    gripper: float | None = None
    """Absolute command, 0 closed .. 1 open."""
    press: bool = False
    """The move keeps pushing through contact (wire: `press`; see `PRESS`)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.position_cm is not None:
            out[MOVE] = self.position_cm
        if self.orientation_rad is not None:
            out[TURN] = self.orientation_rad
        if self.gripper is not None:
            out[GRIPPER] = self.gripper
        if self.press:
            out[PRESS] = True
        return out


@dataclass
class Action:
    parts: dict[str, PartAction] = field(default_factory=dict)
    """The first (for a single action: the only) step."""
    done: bool = False
    notes: list[str] = field(default_factory=list)
    """What the parser changed (e.g. a gripper command clipped into [0, 1])."""
    steps: list[dict[str, PartAction]] = field(default_factory=list)
    """A chunk's steps in order (`parts` is steps[0]); empty for a single action."""
    chunked: bool = False
    """The reply gave `"action"` as a list (recorded in list form even with one step)."""

    @property
    def chunk(self) -> list[dict[str, PartAction]]:
        """Every step, a single action being a chunk of one."""
        return self.steps or [self.parts]

    def to_json(self) -> dict[str, Any]:
        """The wire form: `{"action": {...}}` (a chunk: `{"action": [{...}, ...]}`) plus `"done": true`."""
        hold = {MOVE: [0.0, 0.0, 0.0]}

        def one(parts: dict[str, PartAction]) -> dict[str, Any]:
            return {name: p.to_json() or hold for name, p in parts.items()}

        body: Any = [one(s) for s in self.chunk] if self.chunked else one(self.parts)
        out: dict[str, Any] = {ACTION: body}
        if self.done:
            out[DONE] = True
        return out


class ActionError(ValueError):
    """A reply holds no valid action; the message says what is wrong, for the log and the model.

    The message is one printable line of at most `MAX_MESSAGE_CHARS` characters, whatever the reply
    held (control characters, lone surrogates and long keys are escaped or cut)."""

    def __init__(self, message: str) -> None:
        super().__init__(_clean(message))


MAX_MESSAGE_CHARS = 400


def _clean(message: str) -> str:
    text = str(message).encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return text if len(text) <= MAX_MESSAGE_CHARS else text[: MAX_MESSAGE_CHARS - 3] + "..."


# -- the expert's internal dict -> the wire ------------------------------------------------------
def wire_chunk(
    steps: list[dict[str, dict[str, Any]]], done: bool = False, parts: Sequence[str] | None = None
) -> dict[str, Any]:
    """A chunk of expert actions on the wire: one step is sent as a plain action (a chunk of one)."""
    if len(steps) == 1:
        return wire_action(steps[0], done, parts)
    out: dict[str, Any] = {ACTION: [wire_action(s, parts=parts)[ACTION] for s in steps]}
    if done:
        out[DONE] = True
    return out


def wire_action(
    internal: dict[str, dict[str, Any]], done: bool = False, parts: Sequence[str] | None = None
) -> dict[str, Any]:
    """The ONE conversion from a scripted expert's internal action to the wire format.

    Experts speak `{"arm": {"position": [dx, dy, dz], "orientation": [...], "gripper": g}}` (changes
    in cm / rad, absolute gripper). Empty parts are dropped; when nothing is left, every named part
    holds still with a zero `move_cm`, since an action must name a quantity. An expert that waits
    with no part named (`{}`) holds the robot's first part (`parts`, its part names); only without
    them does it fall back to `arm` (on a robot without that part, the hold was refused as an
    unknown part, three times over, and the episode ended invalid).
    """
    names = {"position": MOVE, "orientation": TURN, "gripper": GRIPPER, "press": PRESS}
    action: dict[str, dict[str, Any]] = {}
    for part, body in internal.items():
        wire = {names[k]: v for k, v in body.items() if k in names}
        unknown = set(body) - set(names)
        if unknown:
            raise ValueError(f"expert action for {part!r} has unknown quantities {sorted(unknown)}")
        if wire:
            action[part] = wire
    if not action:
        names = list(internal) or list(parts or [])[:1] or ["arm"]
        action = {part: {MOVE: [0.0, 0.0, 0.0]} for part in names}
    out: dict[str, Any] = {ACTION: action}
    if done:
        out[DONE] = True
    return out


def reply_text(reasoning: str, wire: dict[str, Any]) -> str:
    """A reply as the prompt asks for it: reasoning, then the action in a ```json fence."""
    return f"{reasoning}\n```json\n{json.dumps(wire)}\n```"


# -- schema -----------------------------------------------------------------------------------
def _vector_schema(bound: float, what: str) -> dict[str, Any]:
    return {
        "type": "array",
        "items": {"type": "number", "minimum": -bound, "maximum": bound},
        "minItems": 3,
        "maxItems": 3,
        "description": what,
    }


def _part_schema(has_gripper: bool, press: bool = False) -> dict[str, Any]:
    props: dict[str, Any] = {
        MOVE: _vector_schema(MAX_ABS_POSITION_DELTA_CM, "change of the tool point, cm, [dx, dy, dz]"),
        TURN: _vector_schema(MAX_ABS_ROTATION_DELTA_RAD, "change of orientation, rad, [droll, dpitch, dyaw]"),
    }
    if has_gripper:
        props[GRIPPER] = {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "absolute command: 0 closed .. 1 open (not a change)",
        }
    required = list(props)
    if press:
        props[PRESS] = {
            "type": "boolean",
            "description": "with move_cm: keep pushing through contact instead of stopping blocked",
        }
    # at least one quantity: one alternative per quantity that requires it (grammar-friendly)
    return {
        "anyOf": [
            {"type": "object", "properties": props, "required": [q], "additionalProperties": False}
            for q in required
        ]
    }


def response_schema(robot: RobotConfig, max_chunk: int = 1, press: bool = False) -> dict[str, Any]:
    """JSON Schema of a whole valid reply object for this robot: for prompts and `response_format`.

    At least one part with at least one quantity, written with `anyOf`/`required` only (no
    `minProperties`), so grammar-constrained decoders cannot produce `{}` or an empty action.
    With `max_chunk` > 1 the action may also be a list of 1..max_chunk steps (`maxItems`); with
    `press` (the backend honours it) a part may add `"press": true`.
    """
    parts = {name: _part_schema(part.gripper is not None, press) for name, part in robot.parts.items()}
    action: dict[str, Any] = {
        "anyOf": [
            {"type": "object", "properties": parts, "required": [name], "additionalProperties": False}
            for name in parts
        ],
        "description": "part name -> the change to make; at least one part with at least one quantity",
    }
    if max_chunk > 1:
        action = {
            "anyOf": [
                action,
                {
                    "type": "array",
                    "items": action,
                    "minItems": 1,
                    "maxItems": max_chunk,
                    "description": f"a chunk: up to {max_chunk} steps run in order, each a change from "
                    "the previous step's target",
                },
            ]
        }
    return {
        "type": "object",
        "properties": {
            ACTION: action,
            DONE: {"type": "boolean", "description": "true when the task is finished (optional)"},
        },
        "required": [ACTION],
        "additionalProperties": False,
    }


action_schema = response_schema
"""Kept name: the schema printed by `pear-agent prompt --schema`."""


# -- validation -------------------------------------------------------------------------------
def _show(value: Any) -> str:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 60 else text[:57] + "..."


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ActionError(f"{where} must be a number, got {_show(value)}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out):
        raise ActionError(f"{where} must be a finite number, got {_show(value)}")
    return out


def _vector(value: Any, where: str, bound: float, unit: str) -> list[float]:
    if not isinstance(value, list) or len(value) != 3:
        raise ActionError(f"{where} must be a list of 3 numbers ({unit}), got {_show(value)}")
    out = [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    for i, v in enumerate(out):
        if abs(v) > bound:
            raise ActionError(
                f"{where}[{i}] = {v:g} is out of range: a change must be within +-{bound:g} {unit} "
                "(actions are changes, not absolute values)"
            )
    return out


def _part(name: str, body: Any, robot: RobotConfig, notes: list[str], press: bool = False) -> PartAction:
    part = robot.parts[name]
    if not isinstance(body, dict):
        raise ActionError(f"action.{name} must be an object of quantities, got {_show(body)}")
    allowed = [MOVE, TURN] + ([GRIPPER] if part.gripper is not None else [])
    pressing = False
    if PRESS in body:
        where = f"action.{name}.{PRESS}"
        if not press:
            raise ActionError(
                f"{where}: this robot cannot press (its moves end `blocked` when the hand stalls); "
                f"leave {PRESS!r} out"
            )
        if not isinstance(body[PRESS], bool):
            raise ActionError(f"{where} must be true or false, got {_show(body[PRESS])}")
        if body[PRESS] and MOVE not in body:
            raise ActionError(f"{where}: press goes with a move; give {MOVE!r} with it")
        pressing = body[PRESS]
        body = {k: v for k, v in body.items() if k != PRESS}
    if not body:
        raise ActionError(f"action.{name} names no quantity; give at least one of {allowed}")
    pa = PartAction(press=pressing)
    for key, value in body.items():
        where = f"action.{name}.{key}"
        if key in _STATE_KEYS:
            raise ActionError(
                f"{where}: {key!r} is how the state reports where the {name} IS; an action gives a change "
                f"with {_STATE_KEYS[key]!r}"
            )
        if key not in allowed:
            raise ActionError(f"unknown quantity {_show(where)}; {name} takes {allowed}")
        if key == MOVE:
            pa.position_cm = _vector(value, where, MAX_ABS_POSITION_DELTA_CM, "cm")
        elif key == TURN:
            pa.orientation_rad = _vector(value, where, MAX_ABS_ROTATION_DELTA_RAD, "rad")
        else:
            g = _number(value, where)
            if not 0.0 <= g <= 1.0:
                clipped = min(max(g, 0.0), 1.0)
                notes.append(f"{name} gripper {g:g} is outside [0, 1]; clipped to {clipped:g}")
                g = clipped
            pa.gripper = g
    if pa.gripper is None and all(
        v is None or not any(v) for v in (pa.position_cm, pa.orientation_rad)
    ):  # only zero changes: hold still (no IK, no motion, nothing to press)
        pa.position_cm = pa.orientation_rad = None
        pa.press = False
    return pa


def _step(
    body: Any, robot: RobotConfig, notes: list[str], where: str, press: bool = False
) -> dict[str, PartAction]:
    """One step's parts (`where`: "" for a single action, "step N: " in a chunk)."""
    try:
        if not isinstance(body, dict):
            raise ActionError(f'"action" must be an object of parts, got {_show(body)}')
        if not body:
            raise ActionError(
                f'"action" names no part; give at least one of {sorted(robot.parts)} with at least one '
                'quantity (to hold still: {"move_cm": [0, 0, 0]})'
            )
        parts: dict[str, PartAction] = {}
        step_notes: list[str] = []
        for name, part_body in body.items():
            if name not in robot.parts:
                raise ActionError(f"unknown part {_show(name)}; parts are {sorted(robot.parts)}")
            parts[name] = _part(name, part_body, robot, step_notes, press)
        notes.extend(where + n for n in step_notes)
        return parts
    except ActionError as exc:
        if not where:
            raise
        raise ActionError(f"{where}{exc}") from None


def validate_action(obj: Any, robot: RobotConfig, max_chunk: int = 1, press: bool = False) -> Action:
    """A decoded reply object -> Action, or ActionError naming the first problem (and, in a chunk,
    its step: "step 3: ..."). A chunk longer than `max_chunk` is refused, not cut short; `press`
    on a move is refused unless `press` (the backend honours it)."""
    if not isinstance(obj, dict):
        raise ActionError(f"the reply must end with a JSON object, got {type(obj).__name__}")
    if ACTION not in obj:
        old = [k for k in obj if k in robot.parts]
        if old:
            raise ActionError(
                f"this looks like the state or the old action format ({{{old[0]!r}: ...}}); an action is "
                f'{{"action": {{"{old[0]}": {{"move_cm": [dx, dy, dz]}}}}}}'
            )
        raise ActionError('the JSON object has no "action" key; reply with {"action": {<part>: {...}}}')
    extra = sorted(set(obj) - {ACTION, DONE})
    if extra:
        raise ActionError(
            f'unexpected top-level keys {_show(extra[:5])}; only "action" and "done" are allowed'
        )
    done = obj.get(DONE, False)
    if not isinstance(done, bool):
        raise ActionError(f'"done" must be true or false, got {_show(done)}')
    body = obj[ACTION]
    action = Action(done=done)
    if isinstance(body, list):
        if not body:
            raise ActionError('"action" is an empty list; a chunk has at least one step')
        if len(body) > max_chunk:
            limit = (
                "a single action (an object, not a list of more than one)"
                if max_chunk == 1
                else f"at most {max_chunk} steps"
            )
            raise ActionError(
                f"the chunk has {len(body)} steps; this robot takes {limit} per reply: nothing was run "
                "(send fewer steps; the rest can follow next turn)"
            )
        action.steps = [_step(b, robot, action.notes, f"step {i}: ", press) for i, b in enumerate(body, 1)]
        action.parts = action.steps[0]
        action.chunked = True
        return action
    action.parts = _step(body, robot, action.notes, "", press)
    return action


# -- finding the action in a reply ---------------------------------------------------------------
_DECODER = json.JSONDecoder(parse_int=float)  # ints of any length become floats (inf when huge)


def _decode_at(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value starting at `start` (bounded length and depth), with its end; None if none."""
    window = text[start : start + MAX_ACTION_CHARS]
    try:
        obj, end = _DECODER.raw_decode(window)
    except (ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    return obj, start + end


def _visible(text: str) -> str:
    close = text.rfind("</think>")
    if close != -1:
        return text[close + len("</think>") :]
    if "<think>" in text:
        raise ActionError("the reasoning was cut off before </think>: no action after it")
    return text


def _is_key(visible: str, end: int) -> bool:
    """Is the `"action"` ending at `end` a JSON key (followed by a colon), not a word in prose?"""
    rest = visible[end : end + 64].lstrip()
    return rest.startswith(":")


def _last_candidate(visible: str) -> Any:
    """The object holding the last `"action"` key; None when the reply names no action.

    Only that last object counts: when it does not decode (cut off by the token limit, a trailing
    comma, a misspelt literal, too long) the reply is invalid: an earlier draft is never run
    instead. Works backwards from the end with C-speed searches, a bounded number of candidates and
    a bounded window per candidate, so the time is linear in the reply's length.
    """
    pos = len(visible)
    for _ in range(MAX_CANDIDATES):
        key = visible.rfind('"action"', 0, pos)
        if key == -1:
            return None
        pos = key
        if not _is_key(visible, key + len('"action"')):
            continue  # the word in prose
        lo = max(0, key - MAX_ACTION_CHARS)
        first = brace = visible.rfind("{", lo, key)
        for _ in range(4):  # the object's "{" is the nearest one before the key, bar braces in strings
            if brace == -1:
                break
            got = _decode_at(visible, brace)
            if got is not None and isinstance(got[0], dict) and got[1] > key:
                return got[0]
            brace = visible.rfind("{", lo, brace)
        raise ActionError(_why_not_json(visible, first))
    return None


def _unclosed(text: str) -> bool:
    """Does the JSON-ish text starting with "{" end inside a string or before its braces close?"""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return False
    return True


def _why_not_json(visible: str, brace: int) -> str:
    """One line on why the last action object does not decode (it is never replaced by a draft)."""
    tail = "it was not run, nor any earlier action in the reply; end the reply with one complete JSON action"
    if brace == -1:
        return f'the last "action" key is not inside a JSON object: {tail}'
    if len(visible) - brace > MAX_ACTION_CHARS:
        return f"the last action object is longer than {MAX_ACTION_CHARS} characters of JSON: {tail}"
    try:
        _DECODER.raw_decode(visible[brace:])
    except (ValueError, RecursionError) as exc:
        msg = getattr(exc, "msg", None) or type(exc).__name__
        if _unclosed(visible[brace:]):
            return f"the last action object is cut off (no closing brace): {tail}"
        at = f" at character {exc.pos + 1}" if isinstance(exc, json.JSONDecodeError) else ""
        return f"the last action object is not valid JSON ({msg}{at}): {tail}"
    return f"the last action object is not a JSON object holding the key: {tail}"


def parse_reply(text: Any, robot: RobotConfig, max_chunk: int = 1, press: bool = False) -> Action:
    """The action in a reply (fenced or bare JSON, last one wins), or ActionError naming the problem.

    Reasoning up to the last `</think>` is ignored. Only the last JSON object holding an "action"
    key counts: if it is invalid, the reply is invalid (an earlier draft is never run instead).
    """
    if not isinstance(text, str):
        raise ActionError(f"the reply must be text, got {type(text).__name__}")
    if len(text) > MAX_REPLY_CHARS:
        raise ActionError(
            f"the reply is {len(text)} characters long; the limit is {MAX_REPLY_CHARS} (end with one short "
            "JSON action)"
        )
    if not text or text.isspace():
        raise ActionError("the reply is empty")
    visible = _visible(text)
    candidate = _last_candidate(visible)
    if candidate is None:
        # say why: an echoed state or an old-format action is the common case
        for brace in (visible.find("{"), visible.rfind("{")):
            got = _decode_at(visible, brace) if brace != -1 else None
            if got is not None and isinstance(got[0], dict):
                validate_action(got[0], robot, max_chunk, press)  # raises with the reason
        raise ActionError(
            'no action found: end the reply with one JSON object {"action": {<part>: {<quantity>: ...}}}'
        )
    return validate_action(candidate, robot, max_chunk, press)
