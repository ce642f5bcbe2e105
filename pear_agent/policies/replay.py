"""Replays the replies of a recorded episode, turn by turn, from its `episode.jsonl`.

Turn N gets the reply recorded at turn N, invalid ones included (they were correction turns), so a
replay walks the same turns as the recording."""

from __future__ import annotations

import json
from pathlib import Path

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.convert_v1 import is_v1_log
from pear_agent.protocol.prompts import Message


class ReplayPolicy:
    name = "replay"
    blocking = False

    def __init__(self, log_path: Path) -> None:
        lines = [json.loads(x) for x in Path(log_path).read_text().splitlines() if x.strip()]
        # every reply that made a turn: executed, refused, or invalid (a correction turn, even an empty
        # reply); not a failed request (no reply came, no turn was counted)
        self.replies = [
            str(x.get("reply") or "")
            for x in lines
            if x.get("kind") == "turn"
            and "reply" in x
            and ("outcome" in x or x.get("end") == "invalid_action")
        ]
        if not self.replies:
            raise ValueError(f"{log_path}: no recorded replies to replay")
        if is_v1_log(lines):
            raise ValueError(
                f"{log_path} was recorded with protocol v1 (actions shaped like the state, "
                '{"arm": {"position": ...}}); since protocol v2 an action is '
                '{"action": {"arm": {"move_cm": ...}}}. '
                f"Convert it: python -m pear_agent.protocol.convert_v1 {log_path} NEW/episode.jsonl"
            )

    def reset(self, seed: int) -> None:
        pass

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        i = ctx.turn - 1
        if i >= len(self.replies):
            return PolicyReply(text="", error=f"replay has only {len(self.replies)} replies")
        return PolicyReply(text=self.replies[i])
