"""The policy contract: given the conversation so far, return one reply string.

A policy that calls a model sees only the messages; the scripted expert also reads the turn's
privileged facts from `TurnContext`, which never reaches a model.

The async path: a policy may also have `async def aact(messages, ctx)` (the model client does: it
awaits the server without blocking the other episodes of its event loop). One without it still
works under `Episode.arun`: its blocking `act` runs in a thread, or inline when it says it is cheap
(`blocking = False`: the scripted experts, replay, the roadster's pilot answer in microseconds).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pear_agent.protocol.prompts import Message
from pear_agent.robot.backend import Observation


@dataclass
class TurnContext:
    turn: int
    task: str
    state: dict[str, dict[str, Any]]
    observation: Observation | Any
    response_schema: dict[str, Any] | None = None
    """JSON Schema of a valid reply object, from the environment (for structured output)."""
    max_chunk: int = 1
    """The most steps (arm) or commands (roadster plan) one reply may carry, as the prompt says."""
    bare_json: bool = False
    """The prompt asks for the action as bare JSON, no reasoning (`--observation compact`): a
    scripted policy answers so."""
    control: Callable[[], dict[str, Any]] | None = None
    """The simulation now in a control recording's layout (`ArmEnvironment.current_control`), for a
    policy trained on control-rate recordings (LeRobot); None where the environment cannot run
    joint-target setpoints (it then takes no `PolicyReply.command`)."""
    instruction: str = ""
    """The task's instruction (a language-conditioned policy's input)."""


@dataclass
class TokenTrace:
    """The exact tokens a policy sampled for one reply, and their log-probabilities under the
    sampling policy: what an RL update trains on (re-tokenising the text is not the same sequence)."""

    token_ids: list[int]
    logprobs: list[float] | None = None
    """log p(token) under the policy that sampled it, one per token (None: the server gave none)."""
    policy_version: int | None = None
    """Which weights sampled it (a trainer's step counter), for off-policy corrections."""

    def to_json(self) -> dict[str, Any]:
        return {"ids": self.token_ids, "logprobs": self.logprobs, "policy_version": self.policy_version}


@dataclass
class PolicyReply:
    text: str
    latency_s: float = 0.0
    usage: dict[str, int] | None = None
    error: str | None = None
    """Set when no reply could be had (endpoint down, timeout...); the episode ends with it."""
    info: dict[str, Any] = field(default_factory=dict)
    tokens: TokenTrace | None = None
    """The sampled token ids and log-probabilities, where the policy knows them (recorded per turn)."""
    command: Any = None
    """A structured command for the environment instead of a text action (a LeRobot policy's chunk
    of joint targets: `Environment.parse_command` reads it). Only an in-process policy sets it; a
    model's reply is always text, parsed by the protocol."""


class Policy(Protocol):
    name: str

    def reset(self, seed: int) -> None: ...

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply: ...


async def decide_async(policy: Policy, messages: list[Message], ctx: TurnContext) -> PolicyReply:
    """The policy's reply without blocking the event loop: its `aact` where it has one, else its
    `act` inline when it declares `blocking = False`, else `act` in a worker thread."""
    aact = getattr(policy, "aact", None)
    if aact is not None:
        return await aact(messages, ctx)
    if not getattr(policy, "blocking", True):
        return policy.act(messages, ctx)
    return await asyncio.to_thread(policy.act, messages, ctx)
