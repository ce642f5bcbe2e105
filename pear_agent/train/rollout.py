"""The trainer's view of the one episode runner (`pear_agent.loop.runner.arun_episode`).

`run_episodes` turns the trainer's jobs (task, initial-state seed, policy seed, group) into the
runner's jobs and its outcomes into records: a `TrajectoryRecord`'s fields plus `turn_tokens`, each
reply's `TokenTrace` as the policy sampled it, stamped with the policy version that sampled it.
It keeps `concurrency` episodes in flight on one event loop, each in a pooled environment of its
own (`pear_agent.loop.runner.POOL`), so a policy that batches its generation across episodes (the
in-process `BatchedGenerator`, a server with parallel slots) sees them all at once. Nothing here
runs an episode itself: there is one runner.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import EnvSpec, resolve
from pear_agent.loop.runner import EpisodeJob, arun_episodes
from pear_agent.loop.workers import run_coroutine
from pear_agent.policies.base import Policy

if TYPE_CHECKING:
    from pear_agent.train.config import Recipe


@dataclass(frozen=True)
class TrainJob:
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
    scene_relative: bool = False
    max_context_tokens: int = 64000
    history: int | None = None
    history_older: str = "line"

    @classmethod
    def of(cls, recipe: Recipe) -> LoopOptions:
        """The loop options a training recipe asks for (its GRPO mode and turns, its observation)."""
        return cls(
            mode=recipe.grpo.mode,
            max_turns=recipe.grpo.max_turns,
            observation=recipe.observation,
            scene_facts=recipe.scene_facts,
            scene_relative=recipe.scene_relative,
            history=recipe.history,
            history_older=recipe.history_older,
        )


def _record(job: TrainJob, out: Any) -> dict[str, Any]:
    if out.result is None:
        raise RuntimeError(f"episode {job.task} seed {job.seed} raised: {out.error}")
    return {
        "id": f"{job.group_id or 'ep'}-{out.result.task}-s{job.seed}-r{job.index_in_group}",
        "group_id": job.group_id,
        "index_in_group": job.index_in_group,
        "seed": job.seed,
        "policy_seed": job.policy_seed,
        **out.record_fields(),
        "reward": 1.0 if out.result.success else 0.0,
        "wall_time_s": out.wall_time_s,
        "turn_tokens": out.turn_tokens,
        "completion_tokens": out.result.completion_tokens,
        "invalid_replies": out.result.invalid_replies,
        "history": out.result.history,
        "history_older": out.result.history_older,
    }


def run_episodes(
    jobs: list[TrainJob],
    make_policy: Callable[[TrainJob], Policy],
    opts: LoopOptions,
    on_record: Callable[[TrainJob, dict[str, Any]], None] | None = None,
    *,
    concurrency: int = 1,
    policy_version: int | None = None,
    writer: Callable[[TrainJob], Any] | None = None,
) -> list[dict[str, Any]]:
    """One record per job, in the jobs' order, `concurrency` episodes in flight (`make_policy` is
    called once per episode: with more than one in flight, each needs a policy of its own).
    `on_record` sees each record as its episode ends (completion order). `writer(job)`: the
    `RunWriter` of the episodes whose full log is kept (None for the others)."""

    os.environ.setdefault("MUJOCO_GL", "egl")
    cfg = EpisodeConfig(
        max_turns=opts.max_turns,
        mode=opts.mode,  # type: ignore[arg-type]
        observation=opts.observation,
        scene_facts=opts.scene_facts,
        scene_relative=opts.scene_relative,
        max_context_tokens=opts.max_context_tokens,
        history=opts.history,
        history_older=opts.history_older,
    )
    render = opts.observation in (
        "both",
        "images",
    )  # arm tasks render cameras only when the model sees images
    runner_jobs = []
    for job in jobs:
        spec = EnvSpec.of(resolve(job.task)[1], mode=opts.mode, render=render, config=cfg)
        runner_jobs.append(
            EpisodeJob(
                spec,
                lambda job=job: make_policy(job),
                job.seed,
                cfg,
                writer=(lambda job=job: writer(job)) if writer is not None else None,
                tag=job,
                policy_version=policy_version,
            )
        )

    async def fly() -> dict[int, dict[str, Any]]:
        records = {}
        async for out in arun_episodes(runner_jobs, concurrency):
            rec = _record(out.job.tag, out)
            records[id(out.job)] = rec
            if on_record is not None:
                on_record(out.job.tag, rec)
        return records

    records = run_coroutine(fly())
    return [records[id(j)] for j in runner_jobs]
