"""One GRPO step through the ONE loop: advantages by the formula, all-equal groups dropped and
resampled, the update on exactly the sampled tokens, the loss falling on a repeated batch."""

from __future__ import annotations

import math

import pytest

from pear_agent.rl.advantages import group_advantages
from pear_agent.train.config import load_recipe
from pear_agent.train.rollout import run_episodes


def _recipe(tiny_model_dir, *sets):
    return load_recipe(
        "roadster_study",
        "cpu",
        [
            f"model.name={tiny_model_dir}",
            "model.lora.r=4",
            "model.max_new_tokens=4",
            "grpo.groups_per_step=1",
            "grpo.group_size=2",
            "grpo.max_turns=2",
            "grpo.learning_rate=0.01",
            "grpo.curriculum=false",
            "grpo.reward=binary",
            *sets,
        ],
    )


class ScoredRuns:
    """The real loop (real episodes, real token traces); only the verdict is set by hand: the first
    group all fail, later groups alternate success/failure so they carry a learning signal."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, jobs, make_policy, opts, on_record=None, **kw):
        recs = run_episodes(jobs, make_policy, opts, on_record, **kw)
        for r in recs:
            r["success"] = self.calls > 0 and r["index_in_group"] % 2 == 0
        self.calls += 1
        return recs


def test_all_equal_groups_are_dropped_and_resampled_then_one_update(tiny_model_dir, tmp_path):
    from pear_agent.train.grpo import GRPOTrainer

    runs = ScoredRuns()
    trainer = GRPOTrainer(_recipe(tiny_model_dir), tmp_path / "grpo", log=lambda *_: None, run_fn=runs)
    kept, sampled = trainer.collect(0)
    assert [g.verdict for g in sampled] == ["all_failure", "kept"]
    assert sampled[0].draw.seed != sampled[1].draw.seed  # a new initial state in its place
    # lockstep: each round of turns went as ONE batch of every episode still flying
    replies = [[len(r["turn_tokens"]) for r in g.records] for g in sampled]
    assert trainer.generator.stats.batches == sum(max(n) for n in replies)
    assert trainer.generator.stats.rows == sum(sum(n) for n in replies)
    grp = kept[0]
    assert grp.rewards == [1.0, 0.0]
    assert grp.advantages == pytest.approx(list(group_advantages([1.0, 0.0])), abs=1e-12)
    assert all(
        r["turn_tokens"] and all(t["policy_version"] == 0 for t in r["turn_tokens"]) for r in grp.records
    )
    losses, drifts = [], []
    for _ in range(3):  # the same batch again: the surrogate falls; tokens go 1, 2 versions stale
        loss, tokens, drift, compared = trainer.update(kept)
        losses.append(loss)
        drifts.append(drift)
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    generated = sum(len(t["ids"]) for r in grp.records for t in r["turn_tokens"])
    assert tokens == generated
    assert drifts[0] < 1e-3  # the trainer saw exactly the tokens and distribution that sampled them
    # stale tokens are compared too (against the snapshot that sampled them), never a bare 0.0
    assert all(d is not None and d < 1e-3 for d in drifts) and compared == tokens
    assert trainer.version == 3 and set(trainer.snapshots) == {1, 2, 3}
    with pytest.raises(ValueError, match=r"sampled by policy version 0 are more than grpo\.max_staleness=2"):
        trainer.update(kept)  # three versions behind: refused, never trained on silently


def test_a_step_writes_metrics_and_a_checkpoint(tiny_model_dir, tmp_path):
    from pear_agent.train.grpo import GRPOTrainer

    trainer = GRPOTrainer(
        _recipe(tiny_model_dir, "grpo.rollout_lag=1"),
        tmp_path / "grpo",
        log=lambda *_: None,
        run_fn=ScoredRuns(),
    )
    reports = trainer.train(steps=2)
    assert [r.groups_kept for r in reports] == [1, 1]
    assert (
        reports[1].checkpoint and (tmp_path / "grpo" / "checkpoint-0002" / "pear_checkpoint.json").is_file()
    )
    assert (tmp_path / "grpo" / "metrics.jsonl").read_text().count("\n") == 2
    assert reports[0].generated_tokens > 0 and reports[0].peak_rss_mb > 0
    # rollout_lag 1 truly overlaps: step 1 flew with version 0 while the update to version 1 ran
    assert [r.sampler_version for r in reports] == [0, 0] and reports[1].overlapped_s > 0
    assert reports[1].drift_tokens > 0 and reports[1].logprob_drift < 1e-3  # stale tokens compared


def test_the_second_step_samples_with_the_updated_weights_only(tiny_model_dir, tmp_path):
    """After an update the generator's remembered prompt starts (prefilled with the old weights) are
    dropped: the next step's tokens are sampled from the weights the trainer computes log pi with."""
    from pear_agent.train.grpo import GRPOTrainer

    runs = ScoredRuns()
    runs.calls = 1  # every group alternates success/failure: one kept per step
    rec = _recipe(tiny_model_dir, "grpo.learning_rate=0.05", "grpo.rollout_lag=0")
    trainer = GRPOTrainer(rec, tmp_path / "grpo", log=lambda *_: None, run_fn=runs)
    reports = trainer.train(steps=2)
    assert [r.groups_kept for r in reports] == [1, 1] and trainer.version == 2
    assert all(r.drift_tokens > 0 and r.logprob_drift is not None for r in reports)
    assert reports[1].logprob_drift < 1e-3, reports[1].logprob_drift
