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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pear_agent.loop.config import EpisodeConfig
from pear_agent.loop.registry import EnvSpec, resolve
from pear_agent.loop.runner import EpisodeJob, arun_episodes
from pear_agent.loop.workers import run_coroutine
from pear_agent.policies.base import Policy
from pear_agent.robot.gl import configure_gl


@dataclass(frozen=True)
class TrainJob:
    task: str
    seed: int
    """The episode seed: the initial state (shared by a group)."""
    policy_seed: int = 0
    group_id: str | None = None
    index_in_group: int = 0


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
    config: EpisodeConfig,
    on_record: Callable[[TrainJob, dict[str, Any]], None] | None = None,
    *,
    concurrency: int = 1,
    policy_version: int | None = None,
    writer: Callable[[TrainJob], Any] | None = None,
) -> list[dict[str, Any]]:
    """One record per job, in the jobs' order, each episode flown with the loop's own `config`
    (a recipe's: `Recipe.episode_config`), `concurrency` episodes in flight (`make_policy` is
    called once per episode: with more than one in flight, each needs a policy of its own).
    `on_record` sees each record as its episode ends (completion order). `writer(job)`: the
    `RunWriter` of the episodes whose full log is kept (None for the others)."""

    configure_gl()
    render = config.observation in (
        "both",
        "images",
    )  # arm tasks render cameras only when the model sees images
    runner_jobs = []
    for job in jobs:
        spec = EnvSpec.of(resolve(job.task)[1], mode=config.mode, render=render, config=config)
        runner_jobs.append(
            EpisodeJob(
                spec,
                lambda job=job: make_policy(job),
                job.seed,
                config,
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
