"""Hypothesis strategies for model replies: random, adversarial and valid ones.

Shared by tests/protocol/test_actions_properties.py and benchmarks/parser_fuzz.py.
"""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import strategies as st

from pear_agent.robot.config import RobotConfig

KEYS = [
    "action",
    "done",
    "arm",
    "left_arm",
    "right_arm",
    "move_cm",
    "turn_rad",
    "gripper",
    "position",
    "orientation",
    "leg",
    "",
]
# pieces models (and attackers) put around or inside JSON
TOKENS = [
    "{",
    "}",
    "[",
    "]",
    '"',
    "\\",
    ",",
    ":",
    '"action"',
    '"action":',
    '{"action": {',
    '{"action": [',
    "```",
    "```json\n",
    "<think>",
    "</think>",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-0",
    "\x00",
    "\x1b[31m",
    "\ud800",
    "\u202e",
    "State: ",
    "\n",
]


def _number_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers().map(str),
        st.floats(allow_nan=True, allow_infinity=True).map(json.dumps),
        st.text("0123456789", min_size=300, max_size=5000),  # integers of any size
        st.sampled_from(["1e999", "-1e999", "1e-999", "NaN", "Infinity", "-0", "0.5", "1.", ".5", "01"]),
    )


def _string_text() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=20).map(json.dumps),
        st.text(max_size=20).map(lambda t: '"' + t + '"'),  # raw: control characters, bad escapes
        st.sampled_from(KEYS).map(json.dumps),
    )


def json_text(max_leaves: int = 12) -> st.SearchStrategy[str]:
    """JSON-looking text: mostly well-formed, sometimes broken, with adversarial leaves."""
    leaf = st.one_of(_number_text(), _string_text(), st.sampled_from(["true", "false", "null", "tru", ""]))

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        key = st.one_of(st.sampled_from(KEYS).map(json.dumps), _string_text())
        obj = st.lists(st.tuples(key, children), max_size=4).map(
            lambda kv: "{" + ", ".join(f"{k}: {v}" for k, v in kv) + "}"
        )
        arr = st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
        broken = st.tuples(st.sampled_from(["{", "[", '{"action": ']), children).map("".join)
        return st.one_of(obj, arr, broken)

    return st.recursive(leaf, extend, max_leaves=max_leaves)


def _depth_bomb() -> st.SearchStrategy[str]:
    return st.tuples(st.sampled_from(["[", "{", '{"action": ', '{"a": [', "[{"]), st.integers(1, 20_000)).map(
        lambda t: t[0] * t[1]
    )


def replies(max_repeat: int = 1000) -> st.SearchStrategy[str]:
    """Whole replies: prose, JSON-looking text, tokens and bombs, optionally repeated to large sizes."""
    piece = st.one_of(st.text(max_size=40), json_text(), st.sampled_from(TOKENS), _depth_bomb())
    body = st.lists(piece, max_size=8).map("".join)
    repeat = st.one_of(st.just(1), st.just(1), st.just(1), st.integers(1, max_repeat))
    return st.tuples(body, repeat).map(lambda t: t[0] * t[1])


def _vec(bound: float) -> st.SearchStrategy[list[float]]:
    x = st.floats(-bound, bound, allow_nan=False, allow_infinity=False)
    return st.lists(x, min_size=3, max_size=3)


def valid_actions(robot: RobotConfig) -> st.SearchStrategy[dict[str, Any]]:
    """Wire actions the parser must accept, per the protocol (at least one part, one quantity)."""

    def part(has_gripper: bool) -> st.SearchStrategy[dict[str, Any]]:
        q: dict[str, st.SearchStrategy[Any]] = {"move_cm": _vec(100.0), "turn_rad": _vec(math.pi)}
        if has_gripper:
            q["gripper"] = st.floats(0.0, 1.0)
        return st.fixed_dictionaries({}, optional=q).filter(bool)

    parts = {name: part(p.gripper is not None) for name, p in robot.parts.items()}
    action = st.fixed_dictionaries({}, optional=parts).filter(bool)
    return st.fixed_dictionaries({"action": action}, optional={"done": st.booleans()})


def states(robot: RobotConfig) -> st.SearchStrategy[dict[str, Any]]:
    """State JSON as the model sees it (any values): must never parse as an action."""
    num = st.floats(-1e6, 1e6, allow_nan=False)
    vec = st.lists(num, min_size=3, max_size=3)
    part = st.fixed_dictionaries({"position": vec, "orientation": vec}, optional={"gripper": num})
    return st.fixed_dictionaries({name: part for name in robot.parts})


PROSE = st.text(st.characters(blacklist_characters='{}"`<>', blacklist_categories=("Cs",)), max_size=200)
"""Reasoning text around an action: no braces, quotes, fences or tags."""
