"""THE rollout seam of the trainer: episodes through the project's ONE turn loop (`Episode`).

`run_episodes` is the only place the trainer runs episodes. Today it runs them one after another
through the synchronous API (`Episode.of(env, policy, cfg).run(seed)`); the concurrent runner
(many episodes in flight per worker) replaces its body without changing its contract: jobs in,
one record per job out (a `TrajectoryRecord`'s fields plus `turn_tokens`, each reply's
`TokenTrace` as the policy sampled it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pear_agent.policies.base import Policy, PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message


@dataclass(frozen=True)
class EpisodeJob:
    task: str
    seed: int
    """The episode seed: the initial state (shared by a group)."""
    policy_seed: int = 0
    group_id: str | None = None
    index_in_group: int = 0


@dataclass(frozen=True)
class LoopOptions:
    mode: str = "paused"
    max_turns: int | None = None
    observation: str = "state"
    scene_facts: bool = False
    max_context_tokens: int = 64000


class _Tracing:
    """Keeps each reply's token trace, aligned with the assistant messages the loop appends."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.traces: list[dict[str, Any] | None] = []

    def reset(self, seed: int) -> None:
        self.traces = []
        self.policy.reset(seed)

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        reply = self.policy.act(messages, ctx)
        if not reply.error:
            self.traces.append(reply.tokens.to_json() if reply.tokens is not None else None)
        return reply


_ENVS: dict[tuple[str, str, str, bool], Any] = {}


def _environment(task: str, opts: LoopOptions) -> Any:
    """An environment for the task, built once per process and reused (any family's task, through
    the registry: arm tasks render cameras only when the model is sent images)."""
    from pear_agent.episode import EpisodeConfig
    from pear_agent.registry import make_environment

    key = (task, opts.mode, opts.observation, opts.scene_facts)
    if key not in _ENVS:
        os.environ.setdefault("MUJOCO_GL", "egl")
        cfg = EpisodeConfig(observation=opts.observation, scene_facts=opts.scene_facts)
        render = opts.observation != "state"
        _ENVS[key] = make_environment(task, mode=opts.mode, render=render, config=cfg)
    return _ENVS[key]


def run_episodes(
    jobs: list[EpisodeJob],
    make_policy: Callable[[EpisodeJob], Policy],
    opts: LoopOptions,
    on_record: Callable[[EpisodeJob, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """One record per job, in order (sequential today: see the module docstring)."""
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.registry import family_of

    out = []
    for job in jobs:
        env = _environment(job.task, opts)
        policy = _Tracing(make_policy(job))
        cfg = EpisodeConfig(
            max_turns=opts.max_turns,
            mode=opts.mode,  # type: ignore[arg-type]
            observation=opts.observation,
            scene_facts=opts.scene_facts,
            max_context_tokens=opts.max_context_tokens,
        )
        episode = Episode.of(env, policy, cfg)
        t0 = time.perf_counter()
        result = episode.run(job.seed)
        _, shaped = family_of(job.task).rewards(env, result)  # the family's own shaped reward
        record = {
            "id": f"{job.group_id or 'ep'}-{result.task}-s{job.seed}-r{job.index_in_group}",
            "group_id": job.group_id,
            "index_in_group": job.index_in_group,
            "task": result.task,
            "robot": result.robot,
            "seed": job.seed,
            "policy": result.policy,
            "policy_seed": job.policy_seed,
            "mode": result.mode,
            "reward": 1.0 if result.success else 0.0,
            "shaped_reward": shaped,
            "success": result.success,
            "end_reason": result.end_reason,
            "detail": result.detail,
            "turns": result.turns,
            "latencies_s": list(result.latencies_s),
            "sim_time_s": result.sim_time_s,
            "wall_time_s": time.perf_counter() - t0,
            "messages": episode.messages,
            "turn_tokens": policy.traces,
            "completion_tokens": result.completion_tokens,
        }
        out.append(record)
        if on_record is not None:
            on_record(job, record)
    return out
