"""Run many independent jobs (episodes) in parallel worker processes, results as they finish.

Workers are started with `spawn`: each owns its own simulator and renderer (MuJoCo and EGL
contexts must not be shared across a fork). A job function must be importable at module level.

A job function may be a coroutine function (`async def`, e.g. `pear_agent.bench.runner.arun_job`):
then each worker keeps `concurrency` jobs in flight on one event loop (episodes that await a model
server share the worker's process, its renderer and its connection pool), and results still come
back one by one, the moment each job ends.

A hung environment step (an EGL call or a physics step that never returns) blocks its worker's
event loop and cannot be interrupted in that process, so it is found from outside: each worker
stamps its environment calls in shared memory (`pear_agent.loop.step_watch`), the runner times
them, kills a worker whose step passed `env_step_timeout_s`, records the hung job through the
caller's `on_hang` and hands the worker's other jobs to a new one (`_run_async_workers`).

Workers die with their runner: each worker asks the kernel for SIGKILL when its parent dies
(Linux `prctl(PR_SET_PDEATHSIG)`), and a watchdog thread also exits the worker as soon as its parent
process is gone (any POSIX system). SIGTERM is restored to its default action, so a worker stops
on SIGTERM whatever a job installed. Ray tasks are Ray's: when the driver dies Ray fails its tasks
(owner died) and reclaims their worker processes itself (tested with a local instance: kill -9 of
the driver ends them).
"""

from __future__ import annotations

import asyncio
import ctypes
import inspect
import multiprocessing as mp
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import connection as mp_connection
from typing import Any, TypeVar

from pear_agent.loop import step_watch
from pear_agent.robot.gl import configure_gl
from pear_agent.settings import setting

J = TypeVar("J")


@dataclass
class WorkerOptions:
    """How a command spreads its episodes (`bench`, `rollouts`): worker processes or Ray tasks, each
    with episodes in flight."""

    workers: int = setting(
        1, metavar="N", help="episodes in parallel: worker processes, or Ray tasks (default 1)"
    )
    concurrency: int = setting(
        1,
        metavar="N",
        help="episodes in flight per worker (default 1): each awaits its model while the others move, "
        "so a few workers keep a server's batch full",
    )
    ray_address: str | None = setting(
        None,
        help="run episodes as Ray tasks: 'local' starts a local instance, 'auto' or host:port joins one "
        "(multi-node: the output folder must be on a file system every node shares)",
    )

    env_step_timeout_s: float = setting(
        120.0,
        metavar="S",
        help="an environment step (build, reset, render, physics) that has not returned after S s "
        "is a hang: its worker process is killed and replaced, the episode ends env_hang (an "
        "infrastructure fault, run again on a resume) and the worker's other episodes are run again "
        "(default 120). So episodes always run in worker processes, one with --workers 1; rollouts "
        "stops with a one-line error instead; Ray tasks (--ray-address) are not timed",
    )

    def __post_init__(self) -> None:
        if not self.env_step_timeout_s > 0:
            raise ValueError(f"--env-step-timeout-s must be > 0 seconds, not {self.env_step_timeout_s}")
        if self.workers < 1 or self.concurrency < 1:
            raise ValueError(
                f"--workers and --concurrency must be >= 1, not {self.workers} and {self.concurrency}"
            )


PR_SET_PDEATHSIG = 1
WATCHDOG_PERIOD_S = 0.5
POLL_S = 0.5
"""How often the runner checks its async workers are alive while it waits for a result."""


def _parent_gone(parent_pid: int) -> bool:
    return os.getppid() != parent_pid


def _watch_parent(parent_pid: int, period_s: float) -> None:
    while not _parent_gone(parent_pid):
        time.sleep(period_s)
    os._exit(1)  # the runner is gone: nobody will read this worker's result


def die_with_parent(parent_pid: int, period_s: float = WATCHDOG_PERIOD_S) -> None:
    """Worker initializer: exit when `parent_pid` dies (kill -9 included) and on SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still covers it
    if _parent_gone(parent_pid):  # died before we got here
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent_pid, period_s), daemon=True, name="parent-watch"
    ).start()


def is_async(fn: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "func", None))


async def _close_loop_resources() -> None:
    """What this process shares per event loop (the model client's connection pools), closed
    before the loop is."""
    client = sys.modules.get("pear_agent.policies.openai_client")
    if client is not None:
        await client.aclose_endpoints()


def drive(
    afn: Callable[[J], Awaitable[Any]], jobs: Iterable[J], concurrency: int = 1
) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order, `concurrency` coroutines in flight on a new event
    loop in this thread (the loop runs while the caller waits for the next result). An exception
    of a job is raised here; jobs not yet finished are cancelled when the caller stops."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    loop = asyncio.new_event_loop()
    it = enumerate(jobs)
    pending: dict[asyncio.Task, tuple[int, J]] = {}
    end = (-1, None)
    try:
        while True:
            while len(pending) < concurrency:
                n, job = next(it, end)
                if n < 0:
                    break
                pending[loop.create_task(afn(job))] = (n, job)  # type: ignore[arg-type]
            if not pending:
                return
            done, _ = loop.run_until_complete(
                asyncio.wait(list(pending), return_when=asyncio.FIRST_COMPLETED)
            )
            for task in sorted(done, key=lambda t: pending[t][0]):  # ties in the order jobs came
                _, job = pending.pop(task)
                yield job, task.result()
    finally:
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        try:
            loop.run_until_complete(_close_loop_resources())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def run_coroutine(coro: Awaitable[Any]) -> Any:
    """Run one coroutine to its end on a new event loop (a synchronous caller of an async job)."""

    async def once(_: None) -> Any:
        return await coro

    return next(drive(once, [None]))[1]


def _async_worker(
    afn: Callable[[Any], Awaitable[Any]],
    conn: Any,
    beat: Any,
    concurrency: int,
    parent_pid: int,
) -> None:
    """A spawned worker: ask the parent for a job (`want`) whenever a slot is free, run
    `concurrency` at a time, send each result on `conn`; stop at the first None (or a closed pipe).
    Each job's environment steps are stamped in `beat` for the parent to time (`step_watch`)."""
    die_with_parent(parent_pid)
    step_watch.attach(beat)

    def jobs() -> Iterator[tuple[int, Any]]:
        while True:
            try:
                conn.send(("want",))
                item = conn.recv()
            except (EOFError, OSError):  # the runner stopped (every job done by others, or an error)
                return
            if item is None:
                return
            yield item

    async def one(item: tuple[int, Any]) -> tuple[str, Any]:
        step_watch.set_job(item[0])
        try:
            return "done", await afn(item[1])
        except Exception as exc:  # sent to the runner, raised there
            try:
                pickle.dumps(exc)
                return "error", exc
            except Exception:
                return "error", RuntimeError(traceback.format_exc()[-2000:])

    for item, (kind, value) in drive(one, jobs(), concurrency):
        try:
            conn.send((kind, item[0], value))
        except OSError:  # the runner stopped: nobody reads this result
            return


@dataclass
class _Worker:
    proc: Any
    conn: Any
    beat: Any
    jobs: set[int] = field(default_factory=set)
    """The jobs given to it and not yet back."""
    closed: bool = False
    """It was sent None (or killed): it takes no more jobs."""
    gone: bool = False
    """Its pipe is closed: it exited or was killed."""


def _run_async_workers(
    afn: Callable[[J], Awaitable[Any]],
    jobs: list[J],
    workers: int,
    concurrency: int,
    step_timeout_s: float | None = None,
    on_hang: Callable[[J, step_watch.Hang], Any] | None = None,
) -> Iterator[tuple[J, Any]]:
    """Spawned workers, each with its own pipe and its own step array; the parent hands out jobs
    as workers ask (so a job can be handed out again) and, with `step_timeout_s`, times every
    environment step. A step past the bound is a hang: the worker is killed (a C call cannot be
    interrupted in-thread), the hung job yields `on_hang(job, hang)` (without `on_hang`: an
    `ExecutorError`), the worker's other unfinished jobs go back to the front of the queue, and a
    new worker takes them. Pipes per worker, not one shared queue: killing a process that holds
    a shared queue's lock or is half-way through writing to it corrupts the queue for every
    other worker."""
    ctx = mp.get_context("spawn")
    todo: deque[int] = deque(range(len(jobs)))
    pool: dict[int, _Worker] = {}
    serial = 0

    def start() -> None:
        nonlocal serial
        here, there = ctx.Pipe()
        beat = ctx.RawArray("d", [step_watch.NO_JOB] + [0.0] * (step_watch.BEAT_SIZE - 1))
        proc = ctx.Process(
            target=_async_worker,
            args=(afn, there, beat, concurrency, os.getpid()),
            name=f"pear-worker-{serial}",
            daemon=True,
        )
        proc.start()
        there.close()
        pool[serial] = _Worker(proc, here, beat)
        serial += 1

    def receive(w: _Worker) -> Iterator[tuple[J, Any]]:
        """Every whole message the worker has sent (it may have died since)."""
        while True:
            try:
                if not w.conn.poll():
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                w.gone = True
                return
            if msg[0] == "want":
                if w.closed:  # killed for a hang: nothing more for it
                    continue
                reply = None
                if todo:
                    reply = (todo[0], jobs[todo[0]])
                try:
                    w.conn.send(reply)
                except OSError:  # it died after asking: the job stays queued
                    w.gone = True
                    return
                if reply is None:
                    w.closed = True
                else:
                    w.jobs.add(todo.popleft())
            elif msg[0] == "done":
                w.jobs.discard(msg[1])
                yield jobs[msg[1]], msg[2]
            else:
                raise msg[2]

    def kill(w: _Worker) -> None:
        w.closed = True
        w.proc.kill()
        w.proc.join(timeout=10)

    for _ in range(min(workers, len(jobs)) or 1):
        start()
    left = len(jobs)
    try:
        while left:
            ready = mp_connection.wait([w.conn for w in pool.values() if not w.gone], timeout=POLL_S)
            for key, w in list(pool.items()):
                if w.conn in ready:
                    for item in receive(w):
                        left -= 1
                        yield item
                hang = step_watch.overdue(w.beat, step_timeout_s) if step_timeout_s else None
                if hang is not None and hang.job in w.jobs:
                    kill(w)
                    for item in receive(w):  # results sent before it hung
                        left -= 1
                        yield item
                    del pool[key]
                    hung = hang.job in w.jobs  # not if it finished as the bound passed
                    w.jobs.discard(hang.job)
                    todo.extendleft(sorted(w.jobs, reverse=True))  # in flight there, not hung: again
                    if hung and on_hang is None:
                        raise ExecutorError(f"{hang.detail()}: its worker was killed; stopping")
                    if todo:
                        start()
                    if hung:
                        left -= 1
                        yield jobs[hang.job], on_hang(jobs[hang.job], hang)  # type: ignore[misc]
                elif w.gone or not w.proc.is_alive():
                    w.proc.join(timeout=10)  # its pipe closed as it exits
                    for item in receive(w):
                        left -= 1
                        yield item
                    del pool[key]
                    if w.jobs:
                        raise ExecutorError(
                            f"a worker process died (exit code {w.proc.exitcode}); {left} job(s) "
                            "unfinished (the results already received are kept)"
                        )
                    if todo and not pool:
                        start()
    finally:
        for w in pool.values():
            w.conn.close()  # its next ask for a job ends its loop
        for w in pool.values():
            w.proc.join(timeout=0.5 if left else 10)
            if w.proc.is_alive():
                w.proc.terminate()
                w.proc.join(timeout=5)


def run_local(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    workers: int = 1,
    concurrency: int = 1,
    step_timeout_s: float | None = None,
    on_hang: Callable[[J, step_watch.Hang], Any] | None = None,
) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order; workers=1 runs in this process (easy to debug).

    A coroutine function runs `concurrency` jobs at once per worker (one event loop each); a plain
    function runs one job at a time per worker (a process pool). With `step_timeout_s`, coroutine
    jobs have their environment steps timed: a hung step's worker is replaced and the job yields
    `on_hang(job, hang)` (`_run_async_workers`). Timed jobs always run in worker processes, one
    at least: a call hung on this process's own thread could be neither ended nor even seen (a C
    call that holds the GIL freezes a watchdog thread too)."""
    jobs = list(jobs)
    if workers < 1 or concurrency < 1:
        raise ValueError(f"workers and concurrency must be >= 1, got {workers} and {concurrency}")
    if is_async(fn):
        if workers <= 1 and step_timeout_s is None:
            yield from drive(fn, jobs, concurrency)
        elif jobs:
            yield from _run_async_workers(fn, jobs, workers, concurrency, step_timeout_s, on_hang)
        return
    if concurrency > 1:
        raise ValueError("concurrency > 1 needs a coroutine job function (async def)")
    if workers <= 1:
        for job in jobs:
            yield job, fn(job)
        return
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        pending: dict[Future, J] = {}
        it = iter(jobs)
        for job in it:
            pending[pool.submit(fn, job)] = job
            if len(pending) >= workers * 2:
                break
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                job = pending.pop(fut)
                yield job, fut.result()
                nxt = next(it, None)
                if nxt is not None:
                    pending[pool.submit(fn, nxt)] = nxt


class ExecutorError(ValueError):
    """Ray missing or a cluster that cannot be reached: a one-line message, not a hang."""


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Ray retries an unreachable head for minutes; a TCP connect says so in seconds."""
    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"Ray address {address!r} is not 'local', 'auto' or host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Ray head at {hostport}: {exc}") from None


def _ray_call(fn: Callable[[Any], Any], job: Any) -> Any:
    configure_gl()  # before the job imports MuJoCo in this worker
    if is_async(fn):
        return run_coroutine(fn(job))
    return fn(job)


class _RayWorker:
    """A Ray actor running async jobs `max_concurrency` at a time on its event loop (one per worker
    process: its simulators, renderers and model connections are shared by the jobs in flight)."""

    def __init__(self) -> None:
        configure_gl()

    async def run(self, fn: Callable[[Any], Awaitable[Any]], job: Any) -> Any:
        return await fn(job)


def run_ray(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    address: str | None = None,
    num_workers: int = 2,
    env_vars: dict[str, str] | None = None,
    concurrency: int = 1,
) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order, the jobs spread over a Ray cluster.

    `address`: None or "local" starts a local Ray instance with `num_workers` CPUs; "auto" or
    "ray://host:10001" / "host:6379" joins an existing cluster. If Ray is already initialised in
    this process it is used as it is (and left running). At most `num_workers` jobs run at once,
    one CPU each; Ray reuses worker processes, so a job function that caches its simulator per
    process gives each worker its own. `env_vars` reach every worker (MUJOCO_GL: `configure_gl`).
    With a coroutine job function and `concurrency` > 1 the workers are `num_workers` async actors
    (one CPU each) that keep `concurrency` jobs in flight each.
    """
    try:
        import ray  # optional: ray
    except ImportError:
        raise ExecutorError(
            "Ray is not installed: pip install 'pear-agent[rl]' (or pip install ray)"
        ) from None
    if num_workers < 1 or concurrency < 1:
        raise ValueError(f"num_workers and concurrency must be >= 1, got {num_workers} and {concurrency}")
    if concurrency > 1 and not is_async(fn):
        raise ValueError("concurrency > 1 needs a coroutine job function (async def)")
    env = {"MUJOCO_GL": configure_gl()} | (env_vars or {})
    started = False
    if not ray.is_initialized():
        if address in (None, "local"):
            ray.init(num_cpus=num_workers, include_dashboard=False, log_to_driver=False)
        else:
            if address != "auto":
                _probe(address)
            try:
                ray.init(address=address, log_to_driver=False)
            except (ConnectionError, RuntimeError) as exc:
                raise ExecutorError(f"cannot join the Ray cluster at {address}: {exc}") from None
        started = True
    try:
        if concurrency > 1:
            yield from _ray_actors(ray, fn, list(jobs), num_workers, concurrency, env)
            return
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_call).options(runtime_env={"env_vars": env})
        jobs = list(jobs)
        it = iter(jobs)
        pending: dict[Any, J] = {}
        for job in it:
            pending[remote.remote(fn, job)] = job
            if len(pending) >= num_workers:
                break
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job = pending.pop(ref)
                yield job, ray.get(ref)
                nxt = next(it, None)
                if nxt is not None:
                    pending[remote.remote(fn, nxt)] = nxt
    finally:
        if started:
            ray.shutdown()


def _ray_actors(
    ray: Any,
    fn: Callable[[Any], Any],
    jobs: list[Any],
    num_workers: int,
    concurrency: int,
    env: dict[str, str],
) -> Iterator[tuple[Any, Any]]:
    cls = ray.remote(num_cpus=1, max_concurrency=concurrency, max_restarts=0)(_RayWorker)
    actors = [cls.options(runtime_env={"env_vars": env}).remote() for _ in range(num_workers)]
    load = [0] * num_workers
    it = iter(jobs)
    pending: dict[Any, tuple[Any, int]] = {}

    def submit() -> bool:
        job = next(it, None) if len(pending) < num_workers * concurrency else None
        if job is None:
            return False
        a = min(range(num_workers), key=load.__getitem__)  # the least busy actor
        load[a] += 1
        pending[actors[a].run.remote(fn, job)] = (job, a)
        return True

    try:
        while submit():
            pass
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                job, a = pending.pop(ref)
                load[a] -= 1
                yield job, ray.get(ref)
                submit()
    finally:
        for actor in actors:
            ray.kill(actor)


def ray_executor(
    address: str | None,
) -> Callable[..., Iterator[tuple[J, Any]]] | None:
    """An executor with `run_local`'s signature (fn, jobs, workers, concurrency) that runs on Ray at
    `address`; None when no address is given (the caller keeps its local default)."""
    if not address:
        return None

    def run(
        fn: Callable[[J], Any],
        jobs: Iterable[J],
        workers: int = 1,
        concurrency: int = 1,
        step_timeout_s: float | None = None,
        on_hang: Callable[[J, step_watch.Hang], Any] | None = None,
    ) -> Iterator[tuple[J, Any]]:
        del step_timeout_s, on_hang  # Ray's tasks are not watched: `ray.cancel(force=True)` is Ray's
        return run_ray(fn, jobs, address=address, num_workers=workers, concurrency=concurrency)

    return run
