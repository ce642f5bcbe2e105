"""Local executor: every job once; workers are real processes that die with their runner."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pear_agent.loop.workers import run_local

pytestmark = pytest.mark.wallclock

REPO = Path(__file__).resolve().parents[2]


def _square(x: int) -> int:
    return x * x


def _park(job: dict) -> int:
    """A job that records its worker's pid and then runs for a long time (an episode in flight)."""
    Path(job["dir"], f"{os.getpid()}.pid").write_text(str(os.getpid()))
    time.sleep(120)
    return 0


def test_local_runs_every_job_once_in_either_mode() -> None:
    for workers in (1, 2):
        got = dict(run_local(_square, range(7), workers=workers))
        assert got == {i: i * i for i in range(7)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _runner_with_two_parked_workers(tmp_path: Path, ray: bool = False) -> tuple[subprocess.Popen, list[int]]:
    jobs = f"[{{'dir': {json.dumps(str(tmp_path))}}}] * 2"
    run = (
        f"run_ray(_park, {jobs}, address='local', num_workers=2)"
        if ray
        else f"run_local(_park, {jobs}, workers=2)"
    )
    code = f"from pear_agent.loop.workers import *; from tests.loop.test_executors import _park; list({run})"
    runner = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)}
    )
    deadline = time.monotonic() + (120 if ray else 60)
    while len(list(tmp_path.glob("*.pid"))) < 2:
        assert time.monotonic() < deadline, "workers did not start"
        assert runner.poll() is None, "the runner died early"
        time.sleep(0.1)
    return runner, [int(p.stem) for p in tmp_path.glob("*.pid")]


def _wait_gone(pids: list[int], timeout_s: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_exit_when_their_runner_is_killed(tmp_path, sig) -> None:
    runner, workers = _runner_with_two_parked_workers(tmp_path)
    assert all(_alive(p) for p in workers)
    runner.send_signal(sig)
    runner.wait(timeout=30)
    left = _wait_gone(workers)
    for p in left:  # do not leak them if the assertion fails
        os.kill(p, signal.SIGKILL)
    assert left == [], f"orphaned workers after {sig.name}: {left}"


def test_a_worker_stops_on_sigterm(tmp_path) -> None:
    runner, workers = _runner_with_two_parked_workers(tmp_path)
    try:
        os.kill(workers[0], signal.SIGTERM)
        assert _wait_gone(workers[:1]) == []
    finally:
        runner.kill()
        runner.wait(timeout=30)
        for p in _wait_gone(workers):
            os.kill(p, signal.SIGKILL)


def test_ray_reclaims_its_workers_when_the_driver_is_killed(tmp_path) -> None:
    """Ray tasks are Ray's: with a local instance, kill -9 of the driver ends its workers too."""
    pytest.importorskip("ray")
    runner, workers = _runner_with_two_parked_workers(tmp_path, ray=True)
    runner.kill()
    runner.wait(timeout=30)
    left = _wait_gone(workers, timeout_s=60)
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == [], f"Ray workers left after kill -9 of the driver: {left}"


# -- coroutine jobs: several in flight per worker --------------------------------------------
_FLIGHT = {"now": 0, "peak": 0}


async def _overlap(job: int | tuple[int, str]) -> tuple[int, int, int]:
    """(job squared, this worker's pid, the most jobs this worker had in flight so far).

    A job `(n, folder)` does not end before two workers have each started a job (a pid file each
    in `folder`): without that, a worker that comes up late (spawn and imports take seconds on a
    loaded machine) could find every job already done by the other, and the two-worker run would
    prove nothing about two workers. The wait is for an event; its deadline only fails the test."""
    import asyncio

    n, folder = job if isinstance(job, tuple) else (job, None)
    _FLIGHT["now"] += 1
    _FLIGHT["peak"] = max(_FLIGHT["peak"], _FLIGHT["now"])
    if folder is not None:
        Path(folder, f"{os.getpid()}.pid").touch()
        deadline = time.monotonic() + 120
        while len(list(Path(folder).glob("*.pid"))) < 2:
            assert time.monotonic() < deadline, "the second worker never took a job"
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    _FLIGHT["now"] -= 1
    return n * n, os.getpid(), _FLIGHT["peak"]


async def _crash(job: int) -> int:
    if job == 3:
        os._exit(3)  # a worker killed mid-episode (a segfaulting simulator)
    return job


async def _raises(job: int) -> int:
    raise ValueError(f"bad job {job}")


def test_coroutine_jobs_run_concurrency_at_a_time_per_worker(tmp_path) -> None:
    _FLIGHT.update(now=0, peak=0)
    got = dict(run_local(_overlap, range(9), workers=1, concurrency=3))
    assert {j: r[0] for j, r in got.items()} == {i: i * i for i in range(9)}
    assert max(r[2] for r in got.values()) == 3 and {r[1] for r in got.values()} == {os.getpid()}
    jobs = [(i, str(tmp_path)) for i in range(12)]
    got = dict(run_local(_overlap, jobs, workers=2, concurrency=3))
    assert {j[0]: r[0] for j, r in got.items()} == {i: i * i for i in range(12)}  # every job once
    pids = {r[1] for r in got.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    # the first worker holds its 3 jobs until the second starts one: 3 in flight, never more
    assert all(r[2] <= 3 for r in got.values()) and max(r[2] for r in got.values()) == 3


def test_a_dead_async_worker_or_a_raising_job_stops_the_run_with_one_error() -> None:
    from pear_agent.loop.workers import ExecutorError

    with pytest.raises(
        ExecutorError, match=r"worker process died \(exit code 3\); [1-6] job\(s\) unfinished"
    ):
        list(run_local(_crash, range(6), workers=2, concurrency=2))
    with pytest.raises(ValueError, match="bad job"):
        list(run_local(_raises, range(2), workers=2, concurrency=2))
    with pytest.raises(ValueError, match="needs a coroutine"):
        list(run_local(_square, range(2), workers=1, concurrency=2))


async def _apark(job: dict) -> int:
    return _park(job)


def test_async_workers_exit_when_their_runner_is_killed(tmp_path) -> None:
    jobs = f"[{{'dir': {json.dumps(str(tmp_path))}}}] * 4"
    code = (
        "from pear_agent.loop.workers import run_local; from tests.loop.test_executors import _apark; "
        f"list(run_local(_apark, {jobs}, workers=2, concurrency=2))"
    )
    runner = subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, env=os.environ | {"PYTHONPATH": str(REPO)}
    )
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.pid"))) < 2:
        assert time.monotonic() < deadline and runner.poll() is None, "workers did not start"
        time.sleep(0.1)
    workers = [int(p.stem) for p in tmp_path.glob("*.pid")]
    runner.kill()
    runner.wait(timeout=30)
    left = _wait_gone(workers)
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert left == [], f"orphaned async workers after SIGKILL: {left}"
