"""Run many independent jobs (episodes) in parallel worker processes, results as they finish.

Workers are started with `spawn`: each owns its own simulator and renderer (MuJoCo and EGL
contexts must not be shared across a fork). A job function must be importable at module level.
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

J = TypeVar("J")


def run_local(fn: Callable[[J], Any], jobs: Iterable[J], workers: int = 1) -> Iterator[tuple[J, Any]]:
    """Yield (job, result) in completion order; workers=1 runs in this process (easy to debug)."""
    jobs = list(jobs)
    if workers <= 1:
        for job in jobs:
            yield job, fn(job)
        return
    ctx = mp.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
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
