"""A hung environment step does not hang the bench: the step is timed from the parent process, the
hung episode is recorded `env_hang` (an infrastructure fault, not scored), its worker is killed and
replaced, the worker's other episodes are run again and recorded once, and a resume runs the hung
episode again.

The hanging task (`tests/bench/hang_family.py`) is a family registered by entry point, so the
spawned workers build it as they build any task. One seed hangs in `execute` inside a C call that
holds the GIL, another in `observe` on a lock wait: neither returns, so the worker cannot report
anything; the test waits on the bench's own end, never on a sleep. Its steps take microseconds, so
the 4 s bound is a wide margin under load; a hang costs the bound plus the parent's 0.5 s poll.

Mutations tried by hand (each undone; run with WAIT_S at 100 s, workers=2):
- `if hang is not None and hang.job in w.jobs:` -> `if False:` in `_run_async_workers` (no watch):
  the bench never ends; "TimeoutExpired: Command [... bench ...] timed out after 100 seconds".
- `todo.extendleft(sorted(w.jobs, reverse=True))` -> `pass` (the killed worker's other episodes
  not handed out again): the bench waits for them for good; the same TimeoutExpired.
- `with env_step("execute", turn):` -> `if True:` in `Episode.apply` (physics steps unwatched):
  seed 3's hang goes unseen; the same TimeoutExpired.
- `again = set(INFRA_ENDINGS) - ...` -> `again = {"endpoint_error"} - ...` in `pending_again`:
  "AssertionError: the resume ran the hung episodes again; assert set() == {3, 5}".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pear_agent.bench.compare import compare
from pear_agent.bench.report import format_table, summarize, write_report
from pear_agent.bench.runner import RESULTS, read_results
from pear_agent.loop.step_watch import env_step
from tests.bench import hang_family

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 4.0
SEEDS = list(range(10))
HUNG = {3: ("execute", 2), 5: ("observe", 3)}
WAIT_S = 300
"""The most a bench here may take (a broken watch hangs it: the test then fails, it does not hang)."""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """The family's package metadata, as pip leaves it."""
    hang_family.install(tmp_path / "site")
    return tmp_path / "site"


def _bench(site: Path, out: Path, *args: str, hang: dict | None = None, marks: Path | None = None):
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    env.pop(hang_family.HANG_ENV, None)
    if hang:
        env[hang_family.HANG_ENV] = ",".join(f"{s}:{st}:{t}" for s, (st, t) in hang.items())
    if marks is not None:
        env[hang_family.MARKS_ENV] = str(marks)
    argv = ["bench", "--tasks", hang_family.TASK, "--seeds", f"{SEEDS[0]}-{SEEDS[-1]}", "--no-video",
            "--quiet", "--env-step-timeout-s", f"{TIMEOUT_S:g}", "--out", str(out), *args]  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "pear_agent", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )


def _starts(marks: Path) -> tuple[dict[int, set[int]], set[int]]:
    """Seed -> the pids its episode started in; the parents of those processes."""
    out: dict[int, set[int]] = {}
    parents = set()
    for m in marks.iterdir():
        seed, pid, ppid, _ = m.name.split("-")
        out.setdefault(int(seed), set()).add(int(pid))
        parents.add(int(ppid))
    return out, parents


@pytest.mark.parametrize("workers", ["2", "1"])
def test_a_hung_step_ends_its_episode_env_hang_the_worker_is_replaced_and_a_resume_reruns_it(
    site: Path, tmp_path: Path, workers: str
) -> None:
    """With one worker too: the bench's own process never runs a timed episode."""
    out, marks = tmp_path / "bench", tmp_path / "marks"
    marks.mkdir()
    spread = ("--workers", workers, "--concurrency", "3")
    p = _bench(site, out, *spread, hang=HUNG, marks=marks)
    assert p.returncode == 0, p.stderr[-2000:]

    lines = [json.loads(x) for x in (out / RESULTS).read_text().splitlines()]
    assert sorted(r["seed"] for r in lines) == SEEDS, "each episode recorded exactly once"
    by_seed = {r["seed"]: r for r in lines}
    for seed, (step, turn) in HUNG.items():
        r = by_seed[seed]
        assert r["end_reason"] == "env_hang" and not r["success"], r
        assert r["hang_step"] == step and f"{step} at turn {turn}" in r["detail"], r["detail"]
        assert f"within {TIMEOUT_S:g} s" in r["detail"] and "replaced" in r["detail"]
    done = [s for s in SEEDS if s not in HUNG]
    assert all(by_seed[s]["success"] and by_seed[s]["turns"] == hang_family.GOAL for s in done)

    starts, parents = _starts(marks)
    assert os.getpid() not in parents, "an episode ran in the bench's own process"
    killed = set().union(*(starts[s] for s in HUNG))
    again = [s for s in done if len(starts[s]) > 1]
    assert again, f"no episode in flight in a killed worker was run again: {starts}"
    assert all(starts[s] & killed for s in again), "an episode started twice outside a killed worker"

    (row,) = summarize(lines)
    assert (row["successes"], row["episodes"]) == (len(done), len(done))  # hangs are not scored
    assert row["not_scored_reasons"] == {"env_hang": len(HUNG)}
    assert f"not scored: env_hang:{len(HUNG)}" in p.stdout and "infrastructure fault" in p.stdout
    assert format_table([row]) in p.stdout
    assert write_report(out, lines).exists()  # the hung episodes' partial logs render

    # the same command again (a resume) without the hang: only the hung episodes run, and succeed
    before = {s: len(list(marks.glob(f"{s}-*"))) for s in SEEDS}
    p = _bench(site, out, *spread, marks=marks)
    assert p.returncode == 0, p.stderr[-2000:]
    after = {s: len(list(marks.glob(f"{s}-*"))) for s in SEEDS}
    assert {s for s in SEEDS if after[s] > before[s]} == set(HUNG), "the resume ran the hung episodes again"
    recs = read_results(out / RESULTS)
    assert sorted(r["seed"] for r in recs) == SEEDS and all(r["success"] for r in recs)
    assert len((out / RESULTS).read_text().splitlines()) == len(SEEDS) + len(HUNG)


def test_compare_leaves_a_hung_episode_out_of_the_pairs(tmp_path: Path) -> None:
    def bench(name: str, ends: list[str]) -> Path:
        d = tmp_path / name
        d.mkdir()
        lines = [
            {"key": f"t/s{i}", "task": "t", "seed": i, "success": e == "success", "end_reason": e}
            for i, e in enumerate(ends)
        ]
        (d / RESULTS).write_text("".join(json.dumps(x) + "\n" for x in lines))
        return d

    a = bench("a", ["success", "env_hang", "turn_limit", "success"])
    b = bench("b", ["success", "turn_limit", "env_hang", "turn_limit"])
    c = compare(a, b)
    assert c["shared"] == 2 and c["not_completed_by_both"] == 2
    assert "env_hang" not in c["a"]["end_reasons"] and c["a_only_success"] == 1


async def _hang_job(job: int) -> int:
    """Job 1 hangs inside an environment step (for `run_local` without a hang handler)."""
    with env_step("execute", 1):
        if job == 1:
            hang_family._hang("observe")
    return job


def test_without_a_hang_handler_a_hang_is_a_one_line_error() -> None:
    code = (
        "from pear_agent.loop.workers import run_local; from tests.bench.test_env_hang import _hang_job\n"
        "list(run_local(_hang_job, range(4), workers=2, concurrency=2, step_timeout_s=2.0))"
    )
    env = os.environ | {"PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=WAIT_S)  # fmt: skip
    assert p.returncode == 1
    assert "ExecutorError: the environment's execute at turn 1 did not return within 2 s" in p.stderr
