"""The step stamp a worker leaves for its parent: a step is timed only while it runs, only in a
watched process, and only a step past the bound is a hang."""

import asyncio

import pytest

from pear_agent.loop import step_watch
from pear_agent.loop.step_watch import Hang, env_step, overdue


@pytest.fixture
def beat():
    array = [step_watch.NO_JOB] + [0.0] * (step_watch.BEAT_SIZE - 1)
    step_watch.attach(array)
    yield array
    step_watch.attach(None)


def test_a_step_is_stamped_while_it_runs_and_cleared_after(beat) -> None:
    async def job() -> None:
        step_watch.set_job(7)
        with env_step("execute", 3):
            assert beat[0] == 7 and step_watch.STEPS[int(beat[2])] == "execute" and beat[3] == 3
            hang = overdue(beat, 10.0, now=beat[1] + 10.5)
            assert hang == Hang(7, "execute", 3, pytest.approx(10.5), 10.0)
            assert overdue(beat, 10.0, now=beat[1] + 9.5) is None  # within the bound
        assert beat[0] == step_watch.NO_JOB and overdue(beat, 10.0, now=beat[1] + 99) is None

    asyncio.run(job())
    assert "execute at turn 3 did not return within 10 s" in Hang(7, "execute", 3, 10.5, 10.0).detail()


def test_a_step_raising_is_cleared_too(beat) -> None:
    async def job() -> None:
        step_watch.set_job(2)
        with pytest.raises(RuntimeError), env_step("observe", 1):
            raise RuntimeError("the simulator failed")
        assert beat[0] == step_watch.NO_JOB

    asyncio.run(job())


def test_outside_a_watched_job_nothing_is_stamped(beat) -> None:
    with env_step("reset"):  # no job set in this context (the bench's own process, `pear-agent run`)
        assert beat[0] == step_watch.NO_JOB
    step_watch.attach(None)

    async def job() -> None:
        step_watch.set_job(1)
        with env_step("reset"):  # a job, but no array: not a watched worker
            pass

    asyncio.run(job())
