"""Rollout groups: G episodes of one task from one initial state, a stochastic policy, rewards and
group-relative advantages; groups without a learning signal are dropped and resampled.

`arun_rollout` is the unit of work an executor (local processes or Ray) runs: a module-level
coroutine function of a picklable `RolloutJob`; it runs its episode through the one runner
(`pear_agent.loop.runner.arun_episode`: an environment from the worker's pool, one per episode in
flight, reused by the next episode of the task)
and returns a plain dict that crosses process and machine boundaries: the record of
`pear_agent.rl.trajectories.TrajectoryRecord`, images inline. With an executor that keeps N of
them in flight per worker (`run_local(..., concurrency=N)`), a group's G episodes await one model
server together. `run_rollout` is the same episode for a synchronous caller.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pear_agent.loop.episode import NO_REPLY_ENDINGS, EpisodeConfig
from pear_agent.loop.registry import EnvSpec, PolicyAsk, family_of, resolve
from pear_agent.loop.runner import EpisodeJob, arun_episode
from pear_agent.loop.workers import drive, is_async, run_coroutine
from pear_agent.policies.base import Policy
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_client import OpenAIPolicy
from pear_agent.rl.advantages import FilterCounts, GroupVerdict, classify_group, group_advantages
from pear_agent.rl.curriculum import CurriculumSampler, SuccessTracker
from pear_agent.robot.gl import configure_gl

Executor = Callable[[Callable[[Any], Any], Iterable[Any]], Iterator[tuple[Any, Any]]]


@dataclass(frozen=True)
class PolicySpec:
    """How a worker builds the policy (a spec, not an object: it must cross to other machines).

    kind "scripted": the scripted expert with Gaussian `action_noise_cm` on its moves (stochastic
    when > 0, seeded per rollout). kind "openai": `pear_agent.policies.openai_client.OpenAIPolicy`
    with `model` holding `ModelSettings` fields (set `temperature` > 0 for distinct rollouts).
    """

    kind: Literal["scripted", "openai"] = "scripted"
    action_noise_cm: float = 0.0
    pilot_noise: float = 1.0
    """Roadster tasks: the scripted pilot's per-flight rule jitter (0 = deterministic)."""
    model: tuple[tuple[str, Any], ...] = ()
    """ModelSettings fields as (name, value) pairs (hashable)."""

    def build(self, task: str, policy_seed: int) -> Policy:
        if self.kind == "scripted":  # the task's family's own: the arm experts, the roadster's pilot
            ask = PolicyAsk(
                seed=policy_seed, action_noise_cm=self.action_noise_cm, pilot_noise=self.pilot_noise
            )
            return family_of(task).default_policy(task, ask=ask)
        if self.kind == "openai":
            return OpenAIPolicy(ModelSettings(**dict(self.model)))
        raise ValueError(f"unknown policy kind {self.kind!r}; kinds are scripted, openai")


@dataclass(frozen=True)
class RolloutJob:
    task: str
    seed: int
    """Episode seed: the initial state, shared by a group."""
    policy: PolicySpec = field(default_factory=PolicySpec)
    policy_seed: int = 0
    """Distinct per rollout of a group: what makes the rollouts differ."""
    robot: str | None = None
    render: bool = True
    group_id: str | None = None
    index_in_group: int = 0
    config: EpisodeConfig = field(default_factory=EpisodeConfig)
    """The loop's settings for the episode (its mode and turn limit where a caller sets them)."""

    @property
    def id(self) -> str:
        return f"{self.group_id or 'ep'}-{self.task}-s{self.seed}-r{self.index_in_group}"


def run_rollout(job: RolloutJob) -> dict[str, Any]:
    """`arun_rollout` for a synchronous caller (one episode on its own event loop)."""
    return run_coroutine(arun_rollout(job))


class RolloutError(RuntimeError):
    """An episode of a rollout raised (the one-line cause)."""


async def arun_rollout(job: RolloutJob) -> dict[str, Any]:
    """One episode through the one runner (`pear_agent.loop.runner.arun_episode`); returns its
    trajectory record (advantage not yet known: None)."""
    configure_gl()  # before any MuJoCo import in this worker
    _, task = resolve(job.task)  # a roadster task without a band flies the light one
    spec = EnvSpec.of(task, {"robot": job.robot}, mode=job.config.mode, render=job.render, config=job.config)
    out = await arun_episode(
        EpisodeJob(spec, lambda: job.policy.build(job.task, job.policy_seed), job.seed, job.config)
    )
    if out.result is None:
        raise RolloutError(f"rollout {job.id}: {out.error}")
    return {
        "schema": "pear-agent/trajectory/v1",
        "id": job.id,
        "group_id": job.group_id,
        "index_in_group": job.index_in_group,
        "seed": job.seed,
        "policy_seed": job.policy_seed,
        **out.record_fields(),
        "reward": out.reward,
        "advantage": None,
        "wall_time_s": out.result.wall_time_s,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }


def sequential(fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """The default executor: this process, one job after another."""
    if is_async(fn):
        yield from drive(fn, jobs, 1)
        return
    for job in jobs:
        yield job, fn(job)


@dataclass
class RolloutGroup:
    """A group `pear-agent rollouts` collected: its records and the filter's verdict, for export."""

    group_id: str
    task: str
    seed: int
    records: list[dict[str, Any]]
    verdict: GroupVerdict

    @property
    def kept(self) -> bool:
        return self.verdict == "kept"

    @property
    def rewards(self) -> list[float]:
        return [r["reward"] for r in self.records]


@dataclass
class RolloutReport:
    counts: FilterCounts
    tracker: SuccessTracker
    episodes: int = 0
    wall_s: float = 0.0
    attempts_exhausted: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "groups": self.counts.to_json(),
            "episodes": self.episodes,
            "wall_s": round(self.wall_s, 3),
            "episodes_per_s": round(self.episodes / self.wall_s, 4) if self.wall_s > 0 else None,
            "attempts_exhausted": self.attempts_exhausted,
            "tasks": self.tracker.to_json(),
        }


def collect_groups(
    tasks: Sequence[str],
    n_groups: int,
    group_size: int,
    policy: PolicySpec,
    *,
    base_seed: int = 0,
    max_attempts: int | None = None,
    executor: Executor = sequential,
    on_group: Callable[[RolloutGroup], None] | None = None,
    robot: str | None = None,
    render: bool = True,
    max_turns: int | None = None,
    mode: str = "paused",
    eps: float = 1e-6,
    curriculum_seed: int = 0,
    job_fn: Callable[[RolloutJob], Any] = run_rollout,
) -> RolloutReport:
    """Sample groups until `n_groups` are kept or `max_attempts` groups (default 3 x n_groups)
    were sampled. Each attempt draws a new initial state (episode seed base_seed, base_seed+1, ...);
    with several tasks a curriculum sampler picks each group's task. `on_group` sees every group,
    kept or dropped, with advantages filled in (zeros for a dropped group). `job_fn` is what the
    executor runs per episode: `run_rollout`, or `arun_rollout` with an executor that keeps several
    in flight (`functools.partial(run_local, workers=W, concurrency=N)`)."""
    if group_size < 1 or n_groups < 1:
        raise ValueError(f"need group_size >= 1 and groups >= 1, got {group_size} and {n_groups}")
    config = EpisodeConfig(max_turns=max_turns, mode=mode)  # type: ignore[arg-type]
    tracker = SuccessTracker(tasks)
    sampler = CurriculumSampler(tracker, seed=curriculum_seed, tasks=tasks)
    max_attempts = max_attempts if max_attempts is not None else 3 * n_groups
    report = RolloutReport(FilterCounts(), tracker)
    t0 = time.perf_counter()
    attempts, seed = 0, base_seed
    while report.counts.kept < n_groups and attempts < max_attempts:
        batch = min(n_groups - report.counts.kept, max_attempts - attempts)
        meta: dict[str, tuple[str, int]] = {}
        jobs = []
        for _ in range(batch):
            task = sampler.sample() if len(tasks) > 1 else tasks[0]
            gid = f"g{attempts:04d}"
            meta[gid] = (task, seed)
            for i in range(group_size):
                jobs.append(RolloutJob(task, seed, policy, i, robot, render, gid, i, config))
            attempts += 1
            seed += 1
        results: dict[str, dict[int, dict[str, Any]]] = {gid: {} for gid in meta}
        for job, rec in executor(job_fn, jobs):
            results[job.group_id][job.index_in_group] = rec
            report.episodes += 1
        for gid, (task, gseed) in meta.items():
            recs = [results[gid][i] for i in range(group_size)]
            rewards = [r["reward"] for r in recs]
            verdict = classify_group(rewards)
            if any(r["end_reason"] in NO_REPLY_ENDINGS for r in recs):  # no reply: the reward says nothing
                verdict = "policy_error"
            report.counts.add(verdict)
            tracker.update(task, [r["success"] for r in recs])
            adv = group_advantages(rewards, eps) if verdict == "kept" else [0.0] * group_size
            for r, a in zip(recs, adv, strict=True):
                r["advantage"] = float(a)
                r["group_kept"] = verdict == "kept"
            if on_group is not None:
                on_group(RolloutGroup(gid, task, gseed, recs, verdict))
    report.attempts_exhausted = report.counts.kept < n_groups
    report.wall_s = time.perf_counter() - t0
    return report
