"""Many episodes in one process: a pool of built environments, and an event loop that keeps N
episodes in flight (`Episode.arun`), each awaiting its model while the others move.

Simulation and rendering stay on the loop's thread, one step at a time, and every episode in flight
has an environment of its own (its own simulator state and renderer), so episodes never share
mutable simulator state; building a scene costs more than a short episode, so a finished episode
gives its environment back to the pool and the next one of the same task reuses it (`reset(seed)`
re-initialises it fully).

From Python (e.g. a trainer's rollouts), N episodes at once:

    from pear_agent.episodes import EpisodeJob, run_episodes
    from pear_agent.registry import EnvSpec

    jobs = [EpisodeJob(EnvSpec("pick_cube"), lambda: my_policy(), seed=s) for s in range(64)]
    for out in run_episodes(jobs, concurrency=16):
        print(out.result.success, len(out.messages))
"""

from __future__ import annotations

import asyncio
import atexit
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pear_agent.environment import Environment
from pear_agent.episode import Episode, EpisodeConfig, EpisodeResult, TurnRecord
from pear_agent.policies.base import Policy
from pear_agent.records import RunWriter
from pear_agent.registry import (
    EnvSpec,
    UnknownNameError,
    close_environment,
    family_of,
    make_spec_environment,
)

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
    on_turn: Callable[[TurnRecord], None] | None = None
    tag: Any = None
    """Anything the caller wants back with the outcome (e.g. a group id)."""


@dataclass
class EpisodeOutcome:
    job: EpisodeJob
    result: EpisodeResult | None
    """None when the episode raised (see `error`)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """The whole conversation, prompts and replies (what a trainer trains on)."""
    environment: Environment | None = None
    """The environment it ran in (for rewards and extra fields; back in the pool by now)."""
    error: str | None = None


async def arun_episode(job: EpisodeJob, pool: EnvironmentPool = POOL) -> EpisodeOutcome:
    """One episode on this event loop; an exception becomes `error` (one line), not a raise."""
    spec = job.environment if isinstance(job.environment, EnvSpec) else None
    env = None
    try:
        env = pool.acquire(spec) if spec is not None else job.environment()  # type: ignore[operator]
        policy = job.policy() if callable(job.policy) and not hasattr(job.policy, "act") else job.policy
        writer = job.writer() if job.writer is not None else None
        episode = Episode.of(env, policy, job.config, writer, job.on_turn)  # type: ignore[arg-type]
        result = await episode.arun(job.seed)
    except Exception as exc:
        if spec is not None:
            pool.discard(env)
        else:
            close_environment(env)
        return EpisodeOutcome(job, None, error=" ".join(f"{type(exc).__name__}: {exc}".split())[:500])
    if spec is not None:
        pool.release(spec, env)
    else:
        close_environment(env)
    return EpisodeOutcome(job, result, episode.messages, env)


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
    from pear_agent.executors import run_coroutine

    jobs = list(jobs)

    async def all_of() -> list[EpisodeOutcome]:
        return [o async for o in arun_episodes(jobs, concurrency, pool)]

    outcomes = run_coroutine(all_of())
    order = {id(j): i for i, j in enumerate(jobs)}
    return sorted(outcomes, key=lambda o: order[id(o.job)])
