"""Ray scale-out: a local 2-CPU Ray instance, started once for the module (start-up is slow)."""

import json

import pytest

ray = pytest.importorskip("ray")

from pear_agent.cli import main  # noqa: E402
from pear_agent.executors import run_local, run_ray  # noqa: E402
from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout  # noqa: E402


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_eight_episodes_on_two_ray_workers_match_the_local_run(ray_local) -> None:
    jobs = [
        RolloutJob(task, seed, PolicySpec("scripted", 0.0), render=False)
        for task in ("pick_cube", "push_to_target")
        for seed in range(4)
    ]
    remote = list(run_ray(run_rollout, jobs, num_workers=2))
    local = dict(run_local(run_rollout, jobs, workers=1))
    assert sorted(j.id for j, _ in remote) == sorted(j.id for j in jobs)  # each job once
    for job, rec in remote:
        ref = local[job]
        for key in ("success", "turns", "end_reason", "sim_time_s", "reward"):
            assert rec[key] == ref[key], (job.id, key)
        assert rec["messages"] == ref["messages"]  # every prompt and reply, turn by turn
    assert all(rec["worker"] != local[job]["worker"] for job, rec in remote)  # ran in Ray workers


def test_rollouts_command_on_ray(ray_local, tmp_path, capsys) -> None:
    out = tmp_path / "ro"
    argv = [
        "rollouts",
        "--task",
        "pick_cube",
        "--groups",
        "1",
        "--group-size",
        "4",
        "--no-render",
        "--out",
        str(out),
        "--ray-address",
        "local",
        "--workers",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["executor"] == "ray:local" and summary["groups"]["kept"] == 1
    assert ray.is_initialized()  # an instance it did not start is left running
