"""One GRPO step through the ONE loop: advantages by the formula, all-equal groups dropped and
resampled, the update on exactly the sampled tokens, the loss falling on a repeated batch."""

from __future__ import annotations

import math

import pytest

from pear_agent.rl.advantages import group_advantages
from pear_agent.train.config import load_recipe
from pear_agent.train.episodes import run_episodes


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


# -- the trainer's defects, resume, logging, objective, kept episodes ---------------------


class Alternating:
    """The real loop; every group alternates success/failure (every group kept); remembers what it
    flew (task, initial-state seed, sampling seed) per call."""

    def __init__(self) -> None:
        self.flown: list[list[tuple[str, int, int]]] = []

    def __call__(self, jobs, make_policy, opts, on_record=None, **kw):
        recs = run_episodes(jobs, make_policy, opts, on_record, **kw)
        for r in recs:
            r["success"] = r["index_in_group"] % 2 == 0
        self.flown.append([(j.task, j.seed, j.policy_seed) for j in jobs])
        return recs


def test_a_lagged_update_without_gradient_checkpointing_trains(tiny_model_dir, tmp_path):
    """Tokens a version behind, gradient checkpointing off: the snapshot's weights were copied into
    the live model after its graph was built and backward failed ("modified by an inplace
    operation"); the sampling policy's pass now comes before the graph."""
    from pear_agent.train.grpo import GRPOTrainer

    rec = _recipe(tiny_model_dir, "model.gradient_checkpointing=false", "grpo.keep_episodes=0")
    trainer = GRPOTrainer(rec, tmp_path / "grpo", log=lambda *_: None, run_fn=Alternating())
    kept, _ = trainer.collect(0)
    trainer.update(kept)
    loss, tokens, drift, compared = trainer.update(kept)  # every token one version behind
    assert math.isfinite(loss) and tokens > 0 and compared == tokens and drift < 1e-3


def _snap(trainer):
    from pear_agent.train.models import snapshot

    return snapshot(trainer.accelerator.unwrap_model(trainer.model))


def test_an_interrupted_run_resumed_equals_one_that_was_not(tiny_model_dir, tmp_path):
    """Stopped after step 1 of 3 and resumed: the same draws and sampling seeds, the same metrics,
    the same learning rates (a cosine schedule), the same weights (optimizer state restored)."""
    import json

    import torch

    from pear_agent.train.grpo import GRPOTrainer

    sets = ["grpo.steps=3", "grpo.checkpoint_every=1", "grpo.lr_scheduler=cosine", "grpo.keep_episodes=0"]
    rec = _recipe(tiny_model_dir, *sets)
    quiet = {"log": lambda *_: None}
    full_runs = Alternating()
    full = GRPOTrainer(rec, tmp_path / "full", run_fn=full_runs, **quiet)
    full.train()
    first_runs = Alternating()
    GRPOTrainer(rec, tmp_path / "part", run_fn=first_runs, **quiet).train(steps=1)  # the interruption
    resumed_runs = Alternating()
    resumed = GRPOTrainer(rec, tmp_path / "part", run_fn=resumed_runs, resume=True, **quiet)
    assert resumed.start_step == 1 and resumed.version == 1
    resumed.train()
    assert first_runs.flown + resumed_runs.flown == full_runs.flown  # no seed redrawn
    lines = {
        k: [json.loads(x) for x in (tmp_path / k / "metrics.jsonl").read_text().splitlines()]
        for k in ("full", "part")
    }
    assert [m["step"] for m in lines["part"]] == [0, 1, 2]  # no step twice
    for a, b in zip(lines["full"], lines["part"], strict=True):
        assert a["generated_tokens"] == b["generated_tokens"] and a["mean_reward"] == b["mean_reward"]
        assert a["learning_rate"] == pytest.approx(b["learning_rate"], rel=1e-9)
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    rates = [m["learning_rate"] for m in lines["full"]]
    assert rates[0] > rates[1] > rates[2]  # the cosine schedule, restored on resume
    w_full, w_res = _snap(full), _snap(resumed)
    assert all(torch.allclose(w_full[k], w_res[k], atol=1e-6) for k in w_full)
    assert any(not torch.equal(w_full[k], full.initial[k]) for k in w_full)  # it did train


def test_every_step_is_logged_to_tensorboard_and_its_episodes_kept(tiny_model_dir, tmp_path):
    """The event file holds the step's numbers (read back as TensorBoard does); the kept episodes
    open with the viewer's reader; eval_every flies the validation seeds in flight."""
    import json

    from pear_agent.records.log import read_log
    from pear_agent.train.grpo import GRPOTrainer
    from pear_agent.train.metrics_log import read_events

    rec = _recipe(
        tiny_model_dir,
        "grpo.steps=2",
        "grpo.keep_episodes=2",
        "grpo.eval_every=2",
        "grpo.eval_episodes=2",
        "grpo.kl_coef=0.01",
    )
    out = tmp_path / "grpo"
    reports = GRPOTrainer(rec, out, log=lambda *_: None, run_fn=Alternating()).train()
    events = read_events(out / "tensorboard")
    for tag in ("grad_norm", "learning_rate", "entropy", "kl", "reply_tokens_mean", "tokens_per_s", "loss"):
        assert [s for s, _ in events[tag]] == [1, 2], tag
    assert [v for _, v in events["grad_norm"]] == pytest.approx([r.grad_norm for r in reports], rel=1e-5)
    assert events["kl"][0][1] == 0.0 and events["kl"][1][1] > 0  # 0 at the initial policy, then away
    assert all(r.entropy > 0 and r.grad_norm > 0 for r in reports)
    assert "task_success/roadster_ramp_flip:light" in events
    # validation after step 2: the recipe's val task, every flight in flight
    assert reports[0].val_success is None and set(reports[1].val_success) == {"roadster_ramp_flip:light"}
    assert "val_success/roadster_ramp_flip:light" in events
    val = (out / "validation" / "step-0002.jsonl").read_text().splitlines()
    assert len(val) == 2
    # kept episodes: two per step, with their rewards, readable by `pear-agent view`'s reader
    folder = out / "episodes" / "step-0001"
    assert reports[0].episodes == str(folder)
    index = [json.loads(x) for x in (folder / "index.jsonl").read_text().splitlines()]
    assert len(index) == 2 and {x["reward"] for x in index} == {0.0, 1.0}
    turns = list(read_log(folder / index[0]["episode"] / "episode.jsonl"))
    assert turns and any("action" in t or "reply" in t or "turn" in t for t in turns)


def test_resume_of_a_folder_that_is_not_a_run_is_one_line(tmp_path):
    import argparse

    from pear_agent.cli.train import _resumed_recipe
    from pear_agent.train.grpo import GRPOTrainer

    with pytest.raises(ValueError, match=r"no recipe\.json there \(not a pear-agent training run\)"):
        _resumed_recipe(argparse.Namespace(resume=str(tmp_path), set=[]))
    (tmp_path / "recipe.json").write_text("{}")
    with pytest.raises(ValueError, match=r"recipe\.json: name: Field required"):
        _resumed_recipe(argparse.Namespace(resume=str(tmp_path), set=[]))
    with pytest.raises(ValueError, match=r"has no checkpoint with a trainer_state\.pt to resume from"):
        GRPOTrainer(load_recipe("roadster_study", "cpu"), tmp_path, resume=True)
