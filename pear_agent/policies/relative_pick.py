"""A pick-up teacher whose replies a small model can imitate: it reads only what the model reads
(the compact observation's state line and its `--scene-relative` line) and copies numbers from
that text into short bare-JSON replies. The task's scripted expert plans from privileged facts and
answers with computed floats (a 10 cm step along the way, a yaw turn); this one moves over the
object by its `dx dy` (the runtime shortens a long move to the per-turn cap), turns by its `dyaw`,
goes down by its `dz`, closes the gripper when the object is within 1 cm, and lifts 10 cm a turn
once closed. It succeeds on `pick_cube` (Panda) without any fact the model does not see."""

from __future__ import annotations

import json
import time

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message
from pear_agent.protocol.state import parse_compact_relative, parse_compact_state

AT_CM = 1
"""Within this many cm on every axis the tool point is at the object: close the gripper."""
TURN_FROM_RAD = 0.05
"""A smaller yaw difference is left alone."""


def _text(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(c.get("text", "") for c in content or [] if isinstance(c, dict))


def pick_reply(observation: str) -> dict:
    """The action for one compact observation with `--scene-relative` (its first object and part)."""
    lines = [x for x in observation.splitlines() if x and not x.startswith("last:")]
    rel_lines = [x for x in lines if " from " in x and "dx=" in x]
    if not rel_lines:
        raise ValueError(
            "relative_pick reads the relative line: fly it with "
            "--observation compact --scene-facts --scene-relative"
        )
    (_obj, part), rel = next(iter(parse_compact_relative(rel_lines[0]).items()))
    grip = parse_compact_state(lines[0])[part].get("grip", 1)
    dx, dy, dz = (int(rel[k]) for k in ("dx", "dy", "dz"))
    if grip == 0:  # closed (on the object): lift
        return {part: {"move_cm": [0, 0, 10], "gripper": 0}}
    if max(abs(dx), abs(dy), abs(dz)) <= AT_CM:
        return {part: {"gripper": 0}}
    act: dict = {"move_cm": [dx, dy, 0] if max(abs(dx), abs(dy)) > AT_CM else [0, 0, dz]}
    dyaw = rel.get("dyaw", 0.0)
    if abs(dyaw) >= TURN_FROM_RAD:
        act["turn_rad"] = [0, 0, round(dyaw, 2)]
    return {part: act}


class RelativePickPolicy:
    """`pick_reply` on each turn's observation, as bare JSON (`teacher.policy: relative_pick`)."""

    name = "relative_pick"
    blocking = False

    def reset(self, seed: int) -> None:
        return None

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        t0 = time.perf_counter()
        action = pick_reply(_text(messages[-1]))
        text = json.dumps({"action": action}, separators=(",", ":"))
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
