"""Ray scale-out: a local 2-CPU Ray instance, started once for the module (start-up is slow)."""

import json

import pytest

pytestmark = pytest.mark.wallclock

ray = pytest.importorskip("ray")

from pear_agent.cli import main  # noqa: E402
from pear_agent.loop.workers import run_local, run_ray  # noqa: E402
from pear_agent.rl.rollouts import PolicySpec, RolloutJob, run_rollout  # noqa: E402


def test_unreachable_or_bad_address_is_one_line_not_a_hang(tmp_path, capsys) -> None:
    # runs before the module's Ray instance starts (Ray retries a dead head for minutes)
    assert not ray.is_initialized()
    for address in ("127.0.0.1:1", "not-an-address"):
        assert main(["rollouts", "--no-render", "--ray-address", address, "--out", str(tmp_path / "o")]) == 2
    assert main(["rollouts", "--no-render", "--out", "/dev/null/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("pear-agent: error: cannot reach the Ray head at 127.0.0.1:1")
    assert "is not 'local', 'auto' or host:port" in err[1]
    assert "cannot write records to --out /dev/null/x" in err[2] and len(err) == 3


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


def test_bench_on_ray_matches_the_local_bench(ray_local, tmp_path) -> None:
    common = ["bench", "--tasks", "push_to_target", "--seeds", "0-3", "--no-video", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "local")]) in (0, 1)
    assert main([*common, "--out", str(tmp_path / "ray"), "--ray-address", "local", "--workers", "2"]) in (
        0,
        1,
    )

    def results(name):
        lines = (tmp_path / name / "results.jsonl").read_text().splitlines()
        return {r["key"]: (r["success"], r["turns"], r["end_reason"]) for r in map(json.loads, lines)}

    local = results("local")
    assert len(local) == 4 and results("ray") == local
