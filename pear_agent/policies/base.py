"""The policy contract: given the conversation so far, return one reply string.

A policy that calls a model sees only the messages; the scripted expert also reads the turn's
privileged facts from `TurnContext`, which never reaches a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from pear_agent.backend import Observation
from pear_agent.protocol.prompts import Message


@dataclass
class TurnContext:
    turn: int
    task: str
    state: dict[str, dict[str, Any]]
    observation: Observation | Any
    response_schema: dict[str, Any] | None = None
    """JSON Schema of a valid reply object, from the environment (for structured output)."""


@dataclass
class PolicyReply:
    text: str
    latency_s: float = 0.0
    usage: dict[str, int] | None = None
    error: str | None = None
    """Set when no reply could be had (endpoint down, timeout...); the episode ends with it."""
    info: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    name: str

    def reset(self, seed: int) -> None: ...

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply: ...
