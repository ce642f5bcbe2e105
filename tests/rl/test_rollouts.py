import json

import numpy as np
import pytest

from pear_agent.cli import main
from pear_agent.rl.rollouts import PolicySpec, collect_groups
from pear_agent.rl.trajectories import load_trajectories


@pytest.mark.parametrize("task", ["pick_cube", "place_in_bowl", "push_to_target"])
def test_noisy_expert_groups_of_four_have_nonzero_advantages(task) -> None:
    groups = []
    report = collect_groups(
        [task],
        1,
        4,
        PolicySpec("scripted", action_noise_cm=1.0),
        max_attempts=6,
        render=False,
        on_group=groups.append,
    )
    c = report.counts
    assert c.kept == 1 and c.sampled == len(groups) == c.kept + c.dropped_total
    kept = [g for g in groups if g.kept]
    assert len(kept) == 1
    g = kept[0]
    adv = np.array([r["advantage"] for r in g.records])
    assert np.abs(adv).min() > 0 and abs(adv.sum()) < 1e-6
    assert len({r["seed"] for r in g.records}) == 1  # one initial state
    assert len({r["policy_seed"] for r in g.records}) == 4  # four samples of the policy
    for dropped in (g for g in groups if not g.kept):
        assert all(r["advantage"] == 0.0 for r in dropped.records)
    assert report.tracker.stats()[task].attempts == 4 * c.sampled


def test_uniform_groups_are_dropped_resampled_and_capped() -> None:
    # the noiseless expert solves these seeds every time: no group has a learning signal
    report = collect_groups(["pick_cube"], 2, 2, PolicySpec("scripted", 0.0), max_attempts=3, render=False)
    assert report.counts.to_json()["dropped_all_success"] == 3
    assert report.counts.kept == 0 and report.attempts_exhausted and report.episodes == 6


def test_rollouts_command_writes_records_and_reports_drops(tmp_path, capsys) -> None:
    out = tmp_path / "ro"
    argv = [
        "rollouts",
        "--task",
        "push_to_target",
        "--group-size",
        "4",
        "--groups",
        "1",
        "--action-noise-cm",
        "1.0",
        "--no-render",
        "--out",
        str(out),
        "--json",
        "--keep-dropped",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["groups"]["kept"] == 1 and "dropped_all_success" in summary["groups"]
    recs = load_trajectories(out)
    assert len(recs) == 4 * summary["groups"]["sampled"] == summary["records"]
    assert sum(r.group_kept for r in recs) == 4  # the dropped groups are marked
    assert json.loads((out / "summary.json").read_text())["episodes"] == len(recs)


def test_rollouts_command_rejects_bad_options(capsys) -> None:
    assert main(["rollouts", "--task", "nope"]) == 2
    assert main(["rollouts", "--group-size", "0"]) == 2
    assert main(["rollouts", "--policy", "openai"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "unknown task 'nope'" in err[0] and "--model" in err[2]


def test_groups_whose_policy_got_no_reply_are_dropped_not_scored() -> None:
    # a model policy (the real OpenAI client) pointed at a closed port: every episode ends endpoint_error
    model = (("base_url", "http://127.0.0.1:9/v1"), ("max_retries", 0), ("model", "m"), ("temperature", 1.0))
    groups = []
    report = collect_groups(
        ["pick_cube"],
        1,
        2,
        PolicySpec("openai", model=model),
        max_attempts=1,
        render=False,
        on_group=groups.append,
    )
    assert report.counts.to_json()["dropped_policy_error"] == 1 and report.attempts_exhausted
    assert [r["end_reason"] for r in groups[0].records] == ["endpoint_error", "endpoint_error"]


def test_groups_with_episodes_in_flight_match_the_sequential_ones() -> None:
    from functools import partial

    from pear_agent.loop.workers import run_local
    from pear_agent.rl.rollouts import arun_rollout

    spec = PolicySpec("scripted", action_noise_cm=1.0)
    kwargs = {"max_attempts": 2, "render": False, "base_seed": 3}
    seq, conc = [], []
    collect_groups(["push_to_target"], 2, 4, spec, on_group=seq.append, **kwargs)
    executor = partial(run_local, workers=1, concurrency=4)
    collect_groups(["push_to_target"], 2, 4, spec, on_group=conc.append, executor=executor,
                   job_fn=arun_rollout, **kwargs)  # fmt: skip
    assert [g.group_id for g in seq] == [g.group_id for g in conc]
    for a, b in zip(seq, conc, strict=True):
        for ra, rb in zip(a.records, b.records, strict=True):
            assert (ra["reward"], ra["turns"], ra["advantage"]) == (
                rb["reward"],
                rb["turns"],
                rb["advantage"],
            )
            assert ra["messages"] == rb["messages"]


def test_rollouts_command_keeps_episodes_in_flight(tmp_path, capsys) -> None:
    out = tmp_path / "ro"
    argv = ["rollouts", "--task", "roadster_kickflip:gale", "--group-size", "4", "--groups", "1",
            "--concurrency", "4", "--no-render", "--out", str(out), "--json", "--keep-dropped"]  # fmt: skip
    assert main(argv) in (0, 1)
    summary = json.loads(capsys.readouterr().out)
    assert summary["concurrency"] == 4 and summary["records"] == 4 * summary["groups"]["sampled"]
    recs = load_trajectories(out)
    assert all(r.task == "roadster_kickflip:gale" and 0.0 <= r.reward <= 1.0 for r in recs)
