"""Many episodes in one process: a pool of built environments, and an event loop that keeps N
episodes in flight (`Episode.arun`), each awaiting its model while the others move.

Simulation and rendering stay on the loop's thread, one step at a time, and every episode in flight
has an environment of its own (its own simulator state and renderer), so episodes never share
mutable simulator state; building a scene costs more than a short episode, so a finished episode
gives its environment back to the pool and the next one of the same task reuses it (`reset(seed)`
re-initialises it fully).

From Python (e.g. a trainer's rollouts), N episodes at once:

    from pear_agent.loop.runner import EpisodeJob, run_episodes
    from pear_agent.loop.registry import EnvSpec

    jobs = [EpisodeJob(EnvSpec("pick_cube"), lambda: my_policy(), seed=s) for s in range(64)]
    for out in run_episodes(jobs, concurrency=16):
        print(out.result.success, out.reward, len(out.messages))

This is the ONE episode runner: `pear-agent bench` (`bench.runner.arun_job`), RL rollouts
(`rl.rollouts.arun_rollout`) and the trainer (`train.episodes.run_episodes`) all run their episodes
through `arun_episode` (tests/loop/test_one_runner.py fails if another copy appears).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import time
import traceback
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pear_agent.loop import family_parts
from pear_agent.loop.environment import Environment
from pear_agent.loop.episode import Episode, EpisodeConfig, EpisodeResult, TurnRecord
from pear_agent.loop.registry import (
    EnvSpec,
    UnknownNameError,
    close_environment,
    family_of,
    make_spec_environment,
)
from pear_agent.loop.step_watch import env_step
from pear_agent.loop.workers import run_coroutine
from pear_agent.policies.base import Policy, PolicyReply, TurnContext, decide_async
from pear_agent.protocol.prompts import Message
from pear_agent.records.log import RunWriter

MAX_IDLE = 4
"""Idle environments a process keeps by default (a LIBERO suite has 10 tasks, each a simulator)."""


class EnvironmentPool:
    """Built environments by `EnvSpec`: one checked out per episode in flight, idle ones kept for
    the next episode of the same task (the least recently used closed beyond `max_idle`)."""

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self._idle: OrderedDict[int, tuple[EnvSpec, Environment]] = OrderedDict()
        self.built = 0
        """Environments built so far (a test sees reuse in it)."""
        self.in_use = 0
        self.concurrency = 1
        """Episodes this process runs at once (raised by its callers): that many stay reusable."""

    def in_flight(self, concurrency: int) -> None:
        """Episodes will run `concurrency` at a time: keep that many idle for reuse."""
        self.concurrency = max(self.concurrency, concurrency)
        self.max_idle = max(self.max_idle, concurrency)

    def acquire(self, spec: EnvSpec) -> Environment:
        for key, (s, env) in reversed(self._idle.items()):  # the most recently used first
            if s == spec:
                del self._idle[key]
                self.in_use += 1
                return env
        env = make_spec_environment(spec)
        # close before whatever the build registered to run at exit (robosuite ends its EGL display
        # there): handlers run last-registered first
        atexit.unregister(self.close)
        atexit.register(self.close)
        self.built += 1
        self.in_use += 1
        return env

    def release(self, spec: EnvSpec, env: Environment) -> None:
        """Back to the pool, ready for another episode of `spec`."""
        self.in_use -= 1
        self._idle[id(env)] = (spec, env)
        while len(self._idle) > self.max_idle:
            _, (_, old) = self._idle.popitem(last=False)
            close_environment(old)
        self._trim_family(spec)

    def _trim_family(self, spec: EnvSpec) -> None:
        """Keep at most the family's `idle_environments` of its kind idle, but never fewer than the
        episodes run at once (each may want one back)."""
        try:
            family = family_of(spec.task)
        except UnknownNameError:
            return
        if family.idle_environments is None:
            return
        cap = max(family.idle_environments, self.concurrency)
        mine = [k for k, (s, _) in self._idle.items() if family_of(s.task) is family]
        for key in mine[: max(0, len(mine) - cap)]:  # the least recently used first
            _, old = self._idle.pop(key)
            close_environment(old)

    def discard(self, env: Environment | None) -> None:
        """Close an environment that may be in a bad state (its episode raised)."""
        if env is not None:
            self.in_use -= 1
            close_environment(env)

    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        while self._idle:
            _, (_, env) = self._idle.popitem()
            close_environment(env)


POOL = EnvironmentPool()
"""This process's pool (bench workers, rollout workers, `run_episodes`)."""
atexit.register(POOL.close)


@dataclass
class EpisodeJob:
    """One episode to run: where (a registry spec, or a factory of any environment), with which
    policy (an instance or a factory), which seed."""

    environment: EnvSpec | Callable[[], Environment]
    policy: Policy | Callable[[], Policy]
    seed: int = 0
    config: EpisodeConfig = field(default_factory=EpisodeConfig)
    writer: Callable[[], RunWriter | None] | None = None
    """Called when the episode starts (a run folder per episode); None: no records."""
    on_start: Callable[[Any, RunWriter | None], None] | None = None
    """Called with the environment and the writer before the episode starts (e.g. the bench's
    Rerun view, which draws the environment's robot)."""
    on_turn: Callable[[TurnRecord], None] | None = None
    tag: Any = None
    """Anything the caller wants back with the outcome (e.g. a group id)."""
    policy_version: int | None = None
    """Stamped on every reply's token trace (the weights that sampled it); None: the policy's own."""


@dataclass
class EpisodeOutcome:
    job: EpisodeJob
    result: EpisodeResult | None
    """None when the episode raised (see `error`)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The whole conversation, prompts and replies (what a trainer trains on)."""
    turn_tokens: list[dict[str, Any] | None] = field(default_factory=list)
    """Each reply's token trace as the policy sampled it (ids, log-probabilities, policy version),
    aligned with the assistant messages; None for a reply without one (a scripted policy's)."""
    reward: float | None = None
    shaped_reward: float | None = None
    """The family's rewards (`Family.rewards`), read before the environment went back to the pool."""
    fields: dict[str, Any] = field(default_factory=dict)
    """The family's extra result fields (`Family.result_fields`), read at the same moment."""
    error: str | None = None
    traceback: str | None = None
    """The formatted traceback of the error (unredacted: the caller decides what to keep)."""
    wall_time_s: float = 0.0

    def record_fields(self) -> dict[str, Any]:
        """The trajectory record's fields read off the finished episode, named alike for RL rollouts
        and the trainer (each adds its job's ids and its own reward)."""
        r = self.result
        if r is None:
            raise ValueError(f"the episode raised, no record: {self.error}")
        return {
            "task": r.task,
            "robot": r.robot,
            "policy": r.policy,
            "mode": r.mode,
            "shaped_reward": self.shaped_reward,
            "success": r.success,
            "end_reason": r.end_reason,
            "detail": r.detail,
            "turns": r.turns,
            "latencies_s": list(r.latencies_s),
            "sim_time_s": r.sim_time_s,
            "messages": self.messages,
        }


class _Traced:
    """The job's policy, keeping each reply's token trace (aligned with the assistant messages the
    loop appends) and stamping the job's policy version on it."""

    def __init__(self, policy: Policy, version: int | None) -> None:
        self.policy, self.version, self.name = policy, version, policy.name
        self.traces: list[dict[str, Any] | None] = []

    def reset(self, seed: int) -> None:
        self.traces = []
        self.policy.reset(seed)

    def _keep(self, reply: PolicyReply) -> PolicyReply:
        if not reply.error:
            if reply.tokens is not None and self.version is not None:
                reply.tokens.policy_version = self.version
            self.traces.append(reply.tokens.to_json() if reply.tokens is not None else None)
        return reply

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        return self._keep(self.policy.act(messages, ctx))

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        return self._keep(await decide_async(self.policy, messages, ctx))


def _family_rewards(task: str, env: Environment, result: EpisodeResult) -> tuple[float, float | None, dict]:
    try:
        family = family_of(task)
    except UnknownNameError:  # an environment outside the registry: binary success
        reward = float(result.reward) if result.reward is not None else float(result.success)
        return reward, None, {}
    reward, shaped = family_parts.rewards(family, env, result)
    return reward, shaped, family_parts.result_fields(family, env)


async def arun_episode(job: EpisodeJob, pool: EnvironmentPool = POOL) -> EpisodeOutcome:
    """THE one place an episode runs (bench, RL rollouts, the trainer): an environment from the
    pool, the policy traced, the episode on this event loop, the family's rewards and result fields
    read while the environment is still this episode's, then the environment back to the pool. An
    exception becomes `error` (one line) and `traceback`, never a raise."""
    spec = job.environment if isinstance(job.environment, EnvSpec) else None
    env = writer = None
    t0 = time.perf_counter()
    try:
        if spec is not None:  # the registry's imports first: the watch times the family's build only
            family_of(spec.task)
        with env_step("build"):
            env = pool.acquire(spec) if spec is not None else job.environment()  # type: ignore[operator]
        policy = job.policy() if callable(job.policy) and not hasattr(job.policy, "act") else job.policy
        traced = _Traced(policy, job.policy_version)  # type: ignore[arg-type]
        writer = job.writer() if job.writer is not None else None
        if job.on_start is not None:
            job.on_start(env, writer)
        episode = Episode(env, traced, job.config, writer, job.on_turn)  # type: ignore[arg-type]
        result = await episode.arun(job.seed)
        writer = None  # finished (closed) by the episode
        reward, shaped, fields = _family_rewards(result.task, env, result)
    except Exception as exc:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.finish({"end_reason": "error"})
        if spec is not None:
            pool.discard(env)
        elif env is not None:
            close_environment(env)
        return EpisodeOutcome(
            job,
            None,
            error=" ".join(f"{type(exc).__name__}: {exc}".split())[:500],
            traceback=traceback.format_exc(),
            wall_time_s=time.perf_counter() - t0,
        )
    if spec is not None:
        pool.release(spec, env)
    else:
        close_environment(env)
    return EpisodeOutcome(
        job,
        result,
        episode.messages,
        traced.traces,
        reward,
        shaped,
        fields,
        wall_time_s=time.perf_counter() - t0,
    )


async def arun_episodes(
    jobs: Iterable[EpisodeJob], concurrency: int = 8, pool: EnvironmentPool = POOL
) -> AsyncIterator[EpisodeOutcome]:
    """Outcomes in completion order, `concurrency` episodes in flight on the running loop."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    pool.in_flight(concurrency)
    it = iter(jobs)
    pending: set[asyncio.Task] = set()
    try:
        while True:
            while len(pending) < concurrency:
                job = next(it, None)
                if job is None:
                    break
                pending.add(asyncio.ensure_future(arun_episode(job, pool)))
            if not pending:
                return
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                yield task.result()
    finally:
        for task in pending:
            task.cancel()


def run_episodes(
    jobs: Iterable[EpisodeJob], concurrency: int = 8, pool: EnvironmentPool = POOL
) -> list[EpisodeOutcome]:
    """Every job's outcome, in the jobs' order, `concurrency` episodes in flight in this process."""
    jobs = list(jobs)

    async def all_of() -> list[EpisodeOutcome]:
        return [o async for o in arun_episodes(jobs, concurrency, pool)]

    outcomes = run_coroutine(all_of())
    order = {id(j): i for i, j in enumerate(jobs)}
    return sorted(outcomes, key=lambda o: order[id(o.job)])
