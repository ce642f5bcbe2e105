"""The environment seam: what the ONE turn loop (`pear_agent.loop.episode.Episode`) drives.

An environment brings its own system prompt, per-turn observation message, action schema and
parser, execution and realtime advance, and its task's success check. The loop owns everything
else: the conversation, the policy call, correction turns for invalid replies, the clock, token
budget, records, the console line and the episode's end. The arm (clip + IK + backend) is
`pear_agent.loop.arm_environment.ArmEnvironment`; other worlds (e.g. the roadster) implement the same
protocol. Nothing here imports a simulator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from pear_agent.policies.base import TurnContext
from pear_agent.protocol.prompts import Message
from pear_agent.robot.backend import TaskInfo

FrameSink = Callable[[np.ndarray], None]

ENVIRONMENT_OPTIONS = (
    "observation",
    "scene_facts",
    "scene_relative",
    "jpeg_quality",
    "tokens_per_image_patch_px",
    "max_invalid",
    "max_chunk",
    "max_turns",
)
"""The loop options (`EpisodeConfig` fields) an environment is built with: an `EnvSpec` carries
them to workers (`EnvSpec.loop`) and `ArmEnvironment` takes them as keywords of the same names."""


def environment_options(source: Any) -> dict[str, Any]:
    """The `ENVIRONMENT_OPTIONS` of an `EpisodeConfig` (an `EnvSpec` carries them as `spec.loop`), by name."""
    return {name: getattr(source, name) for name in ENVIRONMENT_OPTIONS}


class EnvAction(Protocol):
    """A parsed action. `done`: the model declared the task finished (the loop ends the episode
    after executing it, end_reason "done"). `to_json()` is what the loop records as "action"."""

    done: bool

    def to_json(self) -> dict[str, Any]: ...


@dataclass
class TurnPrompt:
    """One turn's observation, as the environment renders it."""

    message: Message
    """The user message appended to the conversation (content: a string or a list of parts)."""
    text: str
    """Its text, recorded as the turn's "prompt"."""
    context: TurnContext
    """What the policy gets besides the messages (privileged facts for scripted experts)."""
    tokens: int
    """Estimated tokens the message adds (the loop's context budget when the server reports none)."""
    images: dict[str, bytes] = field(default_factory=dict)
    """JPEGs sent in the message, camera -> bytes; the loop saves them and records the file names."""
    record: dict[str, Any] = field(default_factory=dict)
    """Extra fields for the turn's log line (e.g. {"state": ...})."""
    line: str | None = None
    """The observation in one line (the compact state or telemetry row): what the model is sent of
    this turn once it is older than the history window (`--history K`); None: its last text line."""


@dataclass
class StepResult:
    """What executing one parsed action did."""

    status: str
    """Outcome status, e.g. "reached" / "blocked" / "timeout" / "ik_failed" (a refusal that counts as a
    turn), "stopped" / "refused" (with `end=True`)."""
    feedback: str
    """The "Last action:" text of the next turn (with clipping notes)."""
    executed: str
    """One line saying what was EXECUTED (after clipping), for the console."""
    success: bool
    """The task's own check after this step."""
    record: dict[str, Any] = field(default_factory=dict)
    """Extra fields for the turn's log line (e.g. plan, executed action, outcome, sim_time_s)."""
    end: bool = False
    """The environment ends the episode here; the end_reason is `status`, the detail `detail`."""
    detail: str = ""
    reward: float | None = None


class Environment(Protocol):
    name: str
    """Recorded as the result's `robot` (e.g. "panda", "roadster")."""

    @property
    def task(self) -> TaskInfo: ...

    def reset(self, seed: int) -> None:
        """Start an episode (the loop calls it once, after the policy's reset)."""
        ...

    def system_prompt(self) -> str: ...

    def header(self) -> dict[str, Any]:
        """Options worth recording in the episode header and result (e.g. observation mode)."""
        ...

    def observe(self, turn: int, max_turns: int, feedback: str | None) -> TurnPrompt:
        """The user turn for the current state; `feedback` is None on turn 1, else the previous
        turn's outcome (a StepResult's feedback or the loop's correction text)."""
        ...

    def response_schema(self) -> dict[str, Any]:
        """JSON Schema of a valid reply object (sent as `response_format` with structured output)."""
        ...

    def parse(self, reply: str) -> EnvAction:
        """The action in a reply; raises `pear_agent.protocol.actions.ActionError` (only) when none."""
        ...

    def execute(self, action: EnvAction) -> StepResult: ...

    def advance(self, duration_s: float) -> None:
        """Realtime mode: let time pass with the last command in force (the model was thinking)."""
        ...

    def time_s(self) -> float:
        """The environment's clock (simulated seconds)."""
        ...

    def set_frame_sink(self, sink: FrameSink | None) -> None:
        """Video frames go to `sink` (None: stop). May push the current frame at once."""
        ...

    def judge_success(self, end_reason: str, detail: str) -> bool | None:
        """Seam 2: a verdict that overrides the loop's (hardware: the operator's); None keeps it."""
        ...
