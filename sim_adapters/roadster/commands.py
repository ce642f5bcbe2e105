"""The five commands a pilot may send, their JSON Schema, and the reply parser.

A reply is any text holding one JSON object (a ```json fence, or bare); the last object wins, and
only the text after the last `</think>` counts.
Bad replies raise `CommandError` with one line naming the cause.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

MAX_VZ_MPS = 10.0
MAX_LEAN_DEG = 45.0
MAX_ROTATE_DEG = 720.0
MAX_REPLY_CHARS = 1_000_000
MAX_COMMAND_CHARS = 1000


class _Cmd(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Coast(_Cmd):
    """All thrusters off."""

    mode: Literal["coast"]


class Climb(_Cmd):
    """Hold level and a vertical speed (m/s, + up)."""

    mode: Literal["climb"]
    vz: float = Field(ge=-MAX_VZ_MPS, le=MAX_VZ_MPS, description="vertical speed to hold, m/s, + = up")


class Hold(_Cmd):
    """Hold a roll and a pitch (degrees from level, + roll = right side down, + pitch = nose up)
    and a vertical speed (default 0: keep the height)."""

    mode: Literal["hold"]
    roll: float = Field(
        ge=-MAX_LEAN_DEG, le=MAX_LEAN_DEG, description="degrees from level, + = right side down"
    )
    pitch: float = Field(ge=-MAX_LEAN_DEG, le=MAX_LEAN_DEG, description="degrees from level, + = nose up")
    vz: float = Field(0.0, ge=-MAX_VZ_MPS, le=MAX_VZ_MPS, description="vertical speed, m/s")


class Rotate(_Cmd):
    """Rotate about an axis to a total angle (the telemetry's unwrapped roll or pitch), braking to
    stop on it; `lift` (0..1) adds upward thrust while the floor faces the sky."""

    mode: Literal["rotate"]
    axis: Literal["roll", "pitch"]
    to: float = Field(ge=-MAX_ROTATE_DEG, le=MAX_ROTATE_DEG, description="total angle, degrees")
    lift: float = Field(1.0, ge=0.0, le=1.0)


class Land(_Cmd):
    """Level out and come down softly."""

    mode: Literal["land"]


Command = Annotated[Coast | Climb | Hold | Rotate | Land, Field(discriminator="mode")]
MODES = ("coast", "climb", "hold", "rotate", "land")
_ADAPTER: TypeAdapter[Any] = TypeAdapter(Command)


class CommandError(ValueError):
    """A reply that is not one valid command; the message is one line naming the cause."""


def command_schema(max_chunk: int = 1) -> dict[str, Any]:
    """JSON Schema of one command (for structured output / guided decoding); with `max_chunk` > 1
    also of a plan `{"plan": [command, ...]}` of 1..max_chunk commands (`maxItems`)."""
    one = _ADAPTER.json_schema()
    if max_chunk <= 1:
        return one
    defs = one.pop("$defs", {})
    plan = {
        "type": "object",
        "properties": {
            "plan": {
                "type": "array",
                "items": one,
                "minItems": 1,
                "maxItems": max_chunk,
                "description": f"up to {max_chunk} commands, one per 0.2 s interval, in order",
            }
        },
        "required": ["plan"],
        "additionalProperties": False,
    }
    return {"anyOf": [one, plan], "$defs": defs}


def _json_candidates(text: str) -> list[str]:
    """The reply's JSON objects in order. A last object that never closes and names a "mode" (cut
    off by the token limit) is an error: an earlier draft is never flown instead."""
    out, depth, start = [], 0, -1
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start : i + 1])
    if depth > 0 and '"mode"' in text[start:]:
        raise CommandError(
            "the last command is cut off (no closing brace): it was not flown, nor any earlier command in "
            'the reply; send one complete JSON command such as {"mode": "coast"}'
        )
    fenced = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text, flags=re.S)
    return fenced or out


def _describe(err: ValidationError, obj: dict[str, Any]) -> str:
    e = err.errors()[0]
    loc = [str(x) for x in e["loc"] if str(x) not in MODES]
    mode = obj.get("mode")
    where = f"{mode}: " if mode in MODES else ""
    kind = e["type"]
    if kind == "union_tag_invalid" or (loc == ["mode"] and kind != "missing"):
        return f"'mode' must be one of {', '.join(MODES)} (got {obj.get('mode')!r})"
    if kind == "union_tag_not_found" or (kind == "missing" and loc == ["mode"]):
        return f"the command needs a 'mode' (one of {', '.join(MODES)})"
    field = ".".join(loc) or "command"
    if kind == "missing":
        return f"{where}'{field}' is missing"
    if kind == "extra_forbidden":
        return f"{where}unknown field '{field}' (this mode takes: {_fields(mode)})"
    got = e.get("input")
    return f"{where}'{field}': {e['msg'].lower()} (got {json.dumps(got) if _jsonable(got) else repr(got)})"


def _jsonable(x: Any) -> bool:
    try:
        json.dumps(x)
    except (TypeError, ValueError):
        return False
    return True


def _fields(mode: Any) -> str:
    for cls in (Coast, Climb, Hold, Rotate, Land):
        if cls.model_fields["mode"].annotation.__args__[0] == mode:  # type: ignore[union-attr]
            return ", ".join(cls.model_fields)
    return "mode"


def parse_command(text: str) -> Coast | Climb | Hold | Rotate | Land:
    plan = parse_plan(text, 1)
    return plan[0]


def _one(obj: Any, where: str = "") -> Any:
    if not isinstance(obj, dict):
        raise CommandError(f"{where}the command must be a JSON object")
    for key, value in obj.items():
        if (isinstance(value, float) and value != value) or value in (float("inf"), float("-inf")):
            raise CommandError(f"{where}'{key}' must be a finite number")
    try:
        return _ADAPTER.validate_python(obj, strict=True)
    except ValidationError as exc:
        raise CommandError(where + _describe(exc, obj)) from None


def parse_plan(text: str, max_chunk: int = 1) -> list[Any]:
    """The reply's commands: one command (a plan of one) or `{"plan": [command, ...]}` of at most
    `max_chunk` (a longer plan is refused, not cut short); CommandError naming the cause (and the
    plan step) otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise CommandError('empty reply: send one JSON command such as {"mode": "coast"}')
    if len(text) > MAX_REPLY_CHARS:
        raise CommandError(
            f"the reply is longer than {MAX_REPLY_CHARS:,} characters: send one short JSON command"
        )
    if "</think>" in text:  # a reasoning model's thoughts are not its answer
        text = text.rsplit("</think>", 1)[1]
    candidates = _json_candidates(text)
    if not candidates:
        raise CommandError('no JSON object in the reply: send one command such as {"mode": "coast"}')
    raw = candidates[-1]
    if len(raw) > MAX_COMMAND_CHARS * max(1, max_chunk):
        raise CommandError(f"the command object is longer than {MAX_COMMAND_CHARS} characters")
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CommandError(f"the command is not valid JSON: {exc.msg} at character {exc.pos}") from None
    except RecursionError:
        raise CommandError("the command is nested too deeply") from None
    if isinstance(obj, dict) and "plan" in obj:
        extra = sorted(set(obj) - {"plan"})
        if extra:
            raise CommandError(f"a plan takes only the key 'plan', not {extra[:3]}")
        steps = obj["plan"]
        if not isinstance(steps, list) or not steps:
            raise CommandError("'plan' must be a non-empty list of commands")
        if len(steps) > max_chunk:
            limit = "one command per reply (no plans)" if max_chunk == 1 else f"plans of at most {max_chunk}"
            raise CommandError(
                f"the plan has {len(steps)} commands; this flight takes {limit}: nothing was flown"
            )
        return [_one(c, f"plan step {i}: ") for i, c in enumerate(steps, 1)]
    return [_one(obj)]


def command_json(cmd: BaseModel) -> str:
    return json.dumps(cmd.model_dump(), separators=(", ", ": "))


def describe_command(cmd: BaseModel) -> str:
    """Compact, space-free text for telemetry rows and logs: 'rotate:roll:360:lift1.0'."""
    if isinstance(cmd, Climb):
        return f"climb:vz{cmd.vz:+.1f}"
    if isinstance(cmd, Hold):
        return f"hold:roll{cmd.roll:+.0f}:pitch{cmd.pitch:+.0f}:vz{cmd.vz:+.1f}"
    if isinstance(cmd, Rotate):
        return f"rotate:{cmd.axis}:{cmd.to:.0f}:lift{cmd.lift:.1f}"
    return str(cmd.mode)  # type: ignore[attr-defined]
