"""Action chunks of absolute joint targets, run as LeRobot's `RobotClient` runs them.

A LeRobot policy (`pear_agent.policies.lerobot.client`) answers an observation with a chunk of actions,
each the controller's setpoint (per part the joint targets and the gripper command) for one step of
its control rate. The chunk of the observation taken at step t holds the actions for steps t, t+1,
...; it goes into the episode's `ActionQueue`: an action for a step already executed is dropped, one
for a step still queued is merged with the queued one by the aggregate function, the rest are
appended (LeRobot's `_aggregate_action_queues`). The environment then executes queued actions, each
held 1/fps simulated seconds, while `len(queue) / chunk size` is above `chunk_size_threshold` (at
least one), and the next observation is sent (LeRobot's `_ready_to_send_observation`). In realtime
mode the queue keeps running while a request is in flight (`ArmEnvironment.advance`).

No simulator or policy import here: plain numpy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

AGGREGATES: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "latest_only": lambda old, new: new,
    "weighted_average": lambda old, new: 0.3 * old + 0.7 * new,
    "average": lambda old, new: 0.5 * old + 0.5 * new,
    "conservative": lambda old, new: 0.7 * old + 0.3 * new,
}
"""How an action for a step already queued is merged with the new chunk's (LeRobot's names and
weights, `lerobot.async_inference.configs.AGGREGATE_FUNCTIONS`)."""


@dataclass
class JointChunk:
    """A policy's answer to one observation: `actions` (n x action size, the dataset's `action`
    layout), to run at `fps`. Built by the environment from the policy's command (`parse_command`),
    stamped with the step of the observation it answers."""

    actions: np.ndarray
    fps: float
    chunk_size_threshold: float = 0.5
    aggregate: str = "latest_only"
    time_limit_s: float | None = None
    """The episode ends (turn_limit) once the simulation has run this long without success."""
    timestep: int = 0
    """The control step of the observation this chunk answers (its first action's step)."""
    done: bool = False
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The turn's `action` in the log: the chunk's summary and its actions (rounded)."""
        return {
            "joint_chunk": {
                "timestep": self.timestep,
                "actions": len(self.actions),
                "fps": self.fps,
                "chunk_size_threshold": self.chunk_size_threshold,
                "aggregate": self.aggregate,
                "targets": np.round(np.asarray(self.actions, float), 5).tolist(),
            }
        }


def parse_chunk(command: Any, action_size: int) -> JointChunk:
    """A policy's command (`{"actions": [[...], ...], "fps": F, ...}`) as a `JointChunk`; ValueError
    naming what is wrong."""
    if not isinstance(command, dict) or "actions" not in command:
        raise ValueError("a joint-target chunk needs 'actions'")
    actions = np.asarray(command["actions"], dtype=float)
    if actions.ndim != 2 or len(actions) == 0 or actions.shape[1] != action_size:
        raise ValueError(
            f"a chunk of shape {list(actions.shape)}; expected n x {action_size} (n >= 1 actions)"
        )
    if not np.all(np.isfinite(actions)):
        raise ValueError("the chunk holds a value that is not finite")
    fps = float(command.get("fps") or 0)
    if not 0 < fps <= 1000:
        raise ValueError(f"fps must be in (0, 1000], not {command.get('fps')!r}")
    threshold = float(command.get("chunk_size_threshold", 0.5))
    if not 0 <= threshold <= 1:
        raise ValueError(f"chunk_size_threshold must be in [0, 1], not {threshold}")
    aggregate = str(command.get("aggregate", "latest_only"))
    if aggregate not in AGGREGATES:
        raise ValueError(f"aggregate {aggregate!r} is none of {sorted(AGGREGATES)}")
    limit = command.get("time_limit_s")
    return JointChunk(actions, fps, threshold, aggregate, None if limit is None else float(limit))


class ActionQueue:
    """The actions still to run, by control step; `executed` is the next step to run."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.actions: list[np.ndarray] = []
        self.executed = 0
        """How many control steps have run since the reset (the next action's step)."""
        self.chunk_size = 0
        """The largest chunk seen (LeRobot's `action_chunk_size`): the threshold's denominator."""

    def __len__(self) -> int:
        return len(self.steps)

    def merge(self, chunk: JointChunk) -> int:
        """Put `chunk` (its first action for step `chunk.timestep`) into the queue; returns how many
        of its actions were dropped as already executed."""
        agg = AGGREGATES[chunk.aggregate]
        self.chunk_size = max(self.chunk_size, len(chunk.actions))
        queued = dict(zip(self.steps, self.actions, strict=True))
        dropped = 0
        for i, action in enumerate(np.asarray(chunk.actions, float)):
            step = chunk.timestep + i
            if step < self.executed:
                dropped += 1
                continue
            queued[step] = agg(queued[step], action) if step in queued else action
        order = sorted(queued)
        self.steps, self.actions = order, [queued[s] for s in order]
        return dropped

    def pop(self) -> tuple[int, np.ndarray] | None:
        """The next action to run (its step), or None when the queue is empty; the step counts as
        executed either way (the robot held its setpoint for it)."""
        step = self.executed
        self.executed += 1
        if self.steps and self.steps[0] == step:
            self.steps.pop(0)
            return step, self.actions.pop(0)
        return None

    def ready_to_send(self, threshold: float) -> bool:
        """LeRobot's rule: a new observation goes out once the queue is at or under `threshold` x
        the chunk size."""
        return self.chunk_size == 0 or len(self) / self.chunk_size <= threshold
