"""The scripted expert as a policy: privileged facts in, a protocol reply string out."""

from __future__ import annotations

import json
import time

import numpy as np

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.policies.chunking import expert_chunk
from pear_agent.policies.experts import Expert, cap_action, reply_history, unstick
from pear_agent.protocol.actions import reply_text, wire_chunk
from pear_agent.protocol.prompts import Message


class ScriptedPolicy:
    """Answers through the text protocol so every layer a model would exercise is exercised.

    `expert` is the task's expert (`pear_agent.loop.task_experts.scripted_policy(task)` finds the one its
    family names: a policy never asks the registry itself);
    `action_noise_cm` adds Gaussian noise to position changes (for stochastic rollouts). When the
    environment takes chunks (`ctx.max_chunk` > 1) the reply carries up to that many steps
    (`pear_agent.policies.chunking`).
    """

    name = "scripted"
    blocking = False
    """Answers in microseconds: `Episode.arun` calls it inline."""

    def __init__(
        self, task: str, action_noise_cm: float = 0.0, seed: int = 0, expert: Expert | None = None
    ) -> None:
        if expert is None:
            raise ValueError(
                f"no scripted expert given for task {task!r} (`pear_agent.loop.task_experts.scripted_policy"
                "(task)` builds this policy with the expert the task's family names)"
            )
        self.expert = expert
        self.action_noise_cm = action_noise_cm
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def reset(self, seed: int) -> None:
        # noise depends on both the policy's seed and the episode's: rollouts of one episode differ
        self._rng = np.random.default_rng([self.seed, seed])

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        t0 = time.perf_counter()
        priv = ctx.observation.privileged
        reasoning, steps, done = expert_chunk(self.expert, ctx.state, priv, int(ctx.max_chunk or 1))
        if not done:  # never the same failed move a third time in a row: back off and re-plan
            reasoning, steps = unstick(reasoning, steps, reply_history(messages), ctx.state, priv or {})
        if self.action_noise_cm > 0:
            for action in steps:
                for part in action.values():
                    if "position" in part:
                        noise = self._rng.normal(0.0, self.action_noise_cm, 3)
                        part["position"] = [
                            round(v + n, 2) for v, n in zip(part["position"], noise, strict=True)
                        ]
                if len(steps) == 1:  # noise stays within the caps (a chunk's later steps: the runtime's)
                    cap_action(ctx.state, priv or {}, action)
        wire = wire_chunk(steps, done=done, parts=list(ctx.state))
        text = json.dumps(wire, separators=(",", ":")) if ctx.bare_json else reply_text(reasoning, wire)
        return PolicyReply(text=text, latency_s=time.perf_counter() - t0)
