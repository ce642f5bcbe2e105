from pear_agent.executors import run_local


def _square(x: int) -> int:
    return x * x


def test_local_runs_every_job_once_in_either_mode() -> None:
    for workers in (1, 2):
        got = dict(run_local(_square, range(7), workers=workers))
        assert got == {i: i * i for i in range(7)}
