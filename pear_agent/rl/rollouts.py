"""Rollout groups: G episodes of one task from one initial state, a stochastic policy, rewards and
group-relative advantages; groups without a learning signal are dropped and resampled.

`run_rollout` is the unit of work an executor (local processes or Ray) runs: it is a module-level
function of a picklable `RolloutJob`, builds its simulator inside the worker (cached per process,
so each worker owns one simulator per task) and returns a plain dict that crosses process and
machine boundaries: the record of `pear_agent.rl.trajectories.TrajectoryRecord`, images inline.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pear_agent.policies.base import Policy
from pear_agent.rl.advantages import FilterCounts, GroupVerdict, classify_group, group_advantages
from pear_agent.rl.curriculum import CurriculumSampler, SuccessTracker

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
    """Roadster tasks (issue 14): the scripted pilot's per-flight rule jitter (0 = deterministic)."""
    model: tuple[tuple[str, Any], ...] = ()
    """ModelSettings fields as (name, value) pairs (hashable)."""

    def build(self, task: str, policy_seed: int) -> Policy:
        from pear_agent.registry import is_environment_task

        if self.kind == "scripted" and is_environment_task(task):
            from pear_agent.policies.pilot import PilotPolicy

            return PilotPolicy(noise=self.pilot_noise, seed=policy_seed)
        if self.kind == "scripted":
            from pear_agent.policies.scripted import ScriptedPolicy

            return ScriptedPolicy(task, action_noise_cm=self.action_noise_cm, seed=policy_seed)
        if self.kind == "openai":
            from pear_agent.policies.openai_client import ModelSettings, OpenAIPolicy

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
    max_turns: int | None = None
    mode: str = "paused"

    @property
    def id(self) -> str:
        return f"{self.group_id or 'ep'}-{self.task}-s{self.seed}-r{self.index_in_group}"


_SIMS: dict[tuple[str, str, bool], Any] = {}
_ENVS: dict[tuple[str, str, bool], Any] = {}


def _simulator(task: str, robot_name: str | None, render: bool) -> tuple[Any, Any]:
    """This process's backend and kinematics for a task (built on first use, reused after)."""
    os.environ.setdefault("MUJOCO_GL", "egl")  # before any MuJoCo import in this worker
    from pear_agent.kinematics import Kinematics
    from pear_agent.registry import make_backend, task_entry
    from pear_agent.robot_config import load_robot

    robot_name = robot_name or task_entry(task).default_robot
    key = (task, robot_name, render)
    if key not in _SIMS:
        robot = load_robot(robot_name)
        _SIMS[key] = (make_backend(task, robot, render=render), Kinematics(robot))
    return _SIMS[key]


@atexit.register
def _close_simulators() -> None:
    for backend, _ in _SIMS.values():
        with contextlib.suppress(Exception):  # closing at exit must never raise
            backend.close()
    _SIMS.clear()


def run_rollout(job: RolloutJob) -> dict[str, Any]:
    """One episode; returns its trajectory record (advantage not yet known: None)."""
    from pear_agent.episode import Episode, EpisodeConfig
    from pear_agent.registry import is_environment_task, make_environment

    config = EpisodeConfig(max_turns=job.max_turns, mode=job.mode)  # type: ignore[arg-type]
    policy = job.policy.build(job.task, job.policy_seed)
    if is_environment_task(job.task):  # issue 14: the roadster; its reward is the shaped one in [0, 1]
        key = (job.task, job.mode, job.render)
        if key not in _ENVS:
            _ENVS[key] = make_environment(job.task, mode=job.mode, render=job.render)
        env = _ENVS[key]
        episode = Episode.of(env, policy, config)
        result = episode.run(job.seed)
        shaped = lambda: env.reward()["total"]  # noqa: E731
    else:
        backend, kin = _simulator(job.task, job.robot, job.render)
        episode = Episode(backend, kin, policy, config)
        result = episode.run(job.seed)
        shaped = getattr(backend, "shaped_reward", None)
    return {
        "schema": "pear-agent/trajectory/v1",
        "id": job.id,
        "group_id": job.group_id,
        "index_in_group": job.index_in_group,
        "task": result.task,
        "robot": result.robot,
        "seed": job.seed,
        "policy": result.policy,
        "policy_seed": job.policy_seed,
        "mode": result.mode,
        "reward": float(shaped()) if is_environment_task(job.task) else (1.0 if result.success else 0.0),
        "shaped_reward": float(shaped()) if callable(shaped) else None,
        "advantage": None,
        "success": result.success,
        "end_reason": result.end_reason,
        "detail": result.detail,
        "turns": result.turns,
        "latencies_s": list(result.latencies_s),
        "sim_time_s": result.sim_time_s,
        "wall_time_s": result.wall_time_s,
        "worker": f"{socket.gethostname()}:{os.getpid()}",
        "messages": episode.messages,
    }


def sequential(fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
    """The default executor: this process, one job after another."""
    for job in jobs:
        yield job, fn(job)


@dataclass
class Group:
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
    on_group: Callable[[Group], None] | None = None,
    robot: str | None = None,
    render: bool = True,
    max_turns: int | None = None,
    mode: str = "paused",
    eps: float = 1e-6,
    curriculum_seed: int = 0,
) -> RolloutReport:
    """Sample groups until `n_groups` are kept or `max_attempts` groups (default 3 x n_groups)
    were sampled. Each attempt draws a new initial state (episode seed base_seed, base_seed+1, ...);
    with several tasks a curriculum sampler picks each group's task. `on_group` sees every group,
    kept or dropped, with advantages filled in (zeros for a dropped group)."""
    if group_size < 1 or n_groups < 1:
        raise ValueError(f"need group_size >= 1 and groups >= 1, got {group_size} and {n_groups}")
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
                jobs.append(
                    RolloutJob(task, seed, policy, i, robot, render, gid, i, max_turns=max_turns, mode=mode)
                )
            attempts += 1
            seed += 1
        results: dict[str, dict[int, dict[str, Any]]] = {gid: {} for gid in meta}
        for job, rec in executor(run_rollout, jobs):
            results[job.group_id][job.index_in_group] = rec
            report.episodes += 1
        for gid, (task, gseed) in meta.items():
            recs = [results[gid][i] for i in range(group_size)]
            rewards = [r["reward"] for r in recs]
            verdict = classify_group(rewards)
            if any(r["end_reason"] == "policy_error" for r in recs):
                verdict = "policy_error"
            report.counts.add(verdict)
            tracker.update(task, [r["success"] for r in recs])
            adv = group_advantages(rewards, eps) if verdict == "kept" else [0.0] * group_size
            for r, a in zip(recs, adv, strict=True):
                r["advantage"] = float(a)
                r["group_kept"] = verdict == "kept"
            if on_group is not None:
                on_group(Group(gid, task, gseed, recs, verdict))
    report.attempts_exhausted = report.counts.kept < n_groups
    report.wall_s = time.perf_counter() - t0
    return report
