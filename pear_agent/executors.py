"""Run many independent jobs (episodes) in parallel worker processes, results as they finish.

Workers are started with `spawn`: each owns its own simulator and renderer (MuJoCo and EGL
contexts must not be shared across a fork). A job function must be importable at module level.

Workers die with their runner: each worker asks the kernel for SIGKILL when its parent dies
(Linux `prctl(PR_SET_PDEATHSIG)`), and a watchdog thread also exits the worker as soon as its parent
process is gone (any POSIX system). SIGTERM is restored to its default action, so a worker stops
on SIGTERM whatever a job installed. Ray tasks are Ray's: when the driver dies Ray fails its tasks
(owner died) and reclaims their worker processes itself (tested with a local instance: kill -9 of
the driver ends them).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

J = TypeVar("J")
PR_SET_PDEATHSIG = 1
WATCHDOG_PERIOD_S = 0.5


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
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still covers it
    if _parent_gone(parent_pid):  # died before we got here
        os._exit(1)
    threading.Thread(
        target=_watch_parent, args=(parent_pid, period_s), daemon=True, name="parent-watch"
    ).start()


def run_local(fn: Callable[[J], Any], jobs: Iterable[J], workers: int = 1) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order; workers=1 runs in this process (easy to debug)."""
    jobs = list(jobs)
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
    import socket

    hostport = address.removeprefix("ray://")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"Ray address {address!r} is not 'local', 'auto' or host:port")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Ray head at {hostport}: {exc}") from None


def _ray_call(fn: Callable[[Any], Any], job: Any) -> Any:
    import os

    os.environ.setdefault("MUJOCO_GL", "egl")  # before the job imports MuJoCo in this worker
    return fn(job)


def run_ray(
    fn: Callable[[J], Any],
    jobs: Iterable[J],
    address: str | None = None,
    num_workers: int = 2,
    env_vars: dict[str, str] | None = None,
) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order, the jobs spread over a Ray cluster.

    `address`: None or "local" starts a local Ray instance with `num_workers` CPUs; "auto" or
    "ray://host:10001" / "host:6379" joins an existing cluster. If Ray is already initialised in
    this process it is used as it is (and left running). At most `num_workers` jobs run at once,
    one CPU each; Ray reuses worker processes, so a job function that caches its simulator per
    process gives each worker its own. `env_vars` reach every worker (MUJOCO_GL defaults to egl).
    """
    import os

    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "Ray is not installed: pip install 'pear-agent[rl]' (or pip install ray)"
        ) from None
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    env = {"MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")} | (env_vars or {})
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


def ray_executor(
    address: str | None,
) -> Callable[[Callable[[J], Any], Iterable[J], int], Iterator[tuple[J, Any]]] | None:
    """An executor with `run_local`'s signature (fn, jobs, workers) that runs on Ray at `address`;
    None when no address is given (the caller keeps its local default)."""
    if not address:
        return None

    def run(fn: Callable[[J], Any], jobs: Iterable[J], workers: int = 1) -> Iterator[tuple[J, Any]]:
        return run_ray(fn, jobs, address=address, num_workers=workers)

    return run
