"""A bring-up motion as a policy: raise every arm a little, lower it back, close each gripper halfway
and open it again, then say done. It reads only the state a model is shown (no simulator facts), so
it drives any graph, a real robot or I2RT's sim mode, before a model is in the loop; the operator
then judges whether the robot did what the motion says."""

from __future__ import annotations

import time
from typing import Any

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.actions import reply_text, wire_action
from pear_agent.protocol.prompts import Message


class BringupPolicy:
    """Four replies in the protocol's text form (two when no part has a gripper); the last one has
    `"done": true`. `height_cm` is the lift, well inside the per-turn caps."""

    name = "bringup"

    def __init__(self, height_cm: float = 3.0) -> None:
        if not 0 < height_cm <= 10:
            raise ValueError(f"bring-up height_cm must be in (0, 10], got {height_cm:g}")
        self.height_cm = float(height_cm)
        self._script: list[tuple[str, dict[str, dict[str, Any]]]] = []

    def reset(self, seed: int) -> None:
        self._script = []

    def _plan(self, state: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
        h = self.height_cm
        parts = list(state)
        steps = [
            (f"raise every arm {h:g} cm", {p: {"position": [0.0, 0.0, h]} for p in parts}),
            (
                f"lower every arm {h:g} cm, back where it was",
                {p: {"position": [0.0, 0.0, -h]} for p in parts},
            ),
        ]
        grippers = {p: float(s["gripper"]) for p, s in state.items() if s.get("gripper") is not None}
        if grippers:
            half = {p: 0.5 if abs(g - 0.5) > 0.2 else (0.9 if g < 0.5 else 0.1) for p, g in grippers.items()}
            steps.append(("move each gripper halfway", {p: {"gripper": half[p]} for p in grippers}))
            steps.append(
                ("put each gripper back as it was", {p: {"gripper": g} for p, g in grippers.items()})
            )
        return steps

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        t0 = time.perf_counter()
        if not self._script:
            self._script = self._plan(ctx.state)
        i = min(ctx.turn, len(self._script)) - 1
        what, action = self._script[i]
        last = i == len(self._script) - 1
        reasoning = f"Bring-up motion, step {i + 1} of {len(self._script)}: {what}."
        text = reply_text(reasoning, wire_action(action, done=last))
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
