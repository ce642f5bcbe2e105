"""One warm start on teacher flights through TRL's SFTTrainer: the loss covers exactly the replies,
is finite, and falls on a repeated batch."""

from __future__ import annotations

import math

import pytest

from pear_agent.train.config import load_recipe


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    from pear_agent.train.teacher import collect_teacher

    recipe = load_recipe("roadster_study", "cpu", ["teacher.episodes=2"])
    out = tmp_path_factory.mktemp("teacher")
    summary = collect_teacher(recipe, out)
    assert summary["flown"] == 2
    return out


def test_teacher_collection_is_unjittered_and_unfiltered(teacher_dir):
    from pear_agent.rl.trajectories import load_trajectories

    recs = load_trajectories(teacher_dir)
    assert recs and all(r.success and r.group_kept is None for r in recs)  # single flights, no group verdict
    assert all(r.task == "roadster_ramp_flip:light" and 0 <= r.seed < 10_000 for r in recs)


def _short_episodes(folder):
    """Two short recorded episodes (a trajectory folder) so the step takes seconds."""
    from pear_agent.rl.trajectories import TrajectoryWriter

    with TrajectoryWriter(folder) as w:
        for i in range(2):
            msgs = [{"role": "system", "content": "Fly the car. Answer with one JSON command."}]
            for t in range(3):
                msgs.append({"role": "user", "content": f"telemetry t_s={t * 0.2:.1f} h_m={12 - 2 * t + i}"})
                msgs.append(
                    {"role": "assistant", "content": '{"mode": "land"}' if t else '{"mode": "rotate"}'}
                )
            w.write(
                dict(
                    id=f"e{i}",
                    task="roadster_ramp_flip:light",
                    seed=i,
                    reward=1.0,
                    success=True,
                    end_reason="success",
                    turns=3,
                    messages=msgs,
                )
            )
    return folder


def test_sft_step_masks_only_replies_and_the_loss_falls(tiny_model_dir, tmp_path):
    from pear_agent.train.sft import run_sft

    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [f"model.name={tiny_model_dir}", "sft.epochs=4", "sft.learning_rate=0.01", "model.lora.r=4"],
    )
    data = _short_episodes(tmp_path / "episodes")
    res = run_sft(recipe, tmp_path / "sft", data=[str(data)], max_steps=4, log=lambda *_: None)
    # 2 episodes x 3 replies of {"mode": ...} and their end-of-turn tokens
    assert res.episodes == 2 and res.reply_tokens == 2 * (7 + 7 + 7)
    assert res.episodes >= 1 and 0 < res.reply_tokens < res.tokens
    assert len(res.losses) == 4 and all(math.isfinite(x) for x in res.losses)
    assert res.losses[-1] < res.losses[0]
    assert (res.out / "pear_checkpoint.json").is_file() and (res.out / "adapter_config.json").is_file()


def test_no_successful_episode_is_one_clear_error(tiny_model_dir, tmp_path):
    from pear_agent.train.sft import run_sft

    recipe = load_recipe("roadster_study", "cpu", [f"model.name={tiny_model_dir}", "sft.min_reward=2.0"])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "trajectories.jsonl").write_text("")
    with pytest.raises(ValueError, match="no episode to learn from"):
        run_sft(recipe, tmp_path / "sft", data=[str(empty)])


def test_the_reply_loss_equals_transformers_loss_on_the_same_labels(tiny):
    """The warm start's chunked loss on reply positions is the model's own cross-entropy over the
    labels (the whole sequence's logits), value and gradient, whatever the chunk."""
    import torch

    from pear_agent.train.sequences import episode_tokens
    from pear_agent.train.sft import reply_loss

    model, tok = tiny
    msgs = [{"role": "system", "content": "Fly."}]
    for t in range(3):
        msgs += [{"role": "user", "content": f"t={t}"}, {"role": "assistant", "content": '{"mode": "land"}'}]
    seq = episode_tokens(tok, msgs)
    ids = torch.tensor([seq.input_ids])
    labels = torch.where(torch.tensor([seq.mask]) > 0, ids, torch.full_like(ids, -100))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    model.zero_grad()
    full = model(**inputs).loss
    full.backward()
    want = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    for chunk in (1, 4, 512):
        model.zero_grad()
        loss = reply_loss(model, inputs, chunk=chunk)
        loss.backward()
        got = [p.grad for p in model.parameters() if p.grad is not None]
        assert loss.item() == pytest.approx(full.item(), rel=1e-5)
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, want, strict=True))
    model.zero_grad()


def test_an_interrupted_warm_start_resumed_equals_one_that_was_not(tiny_model_dir, tmp_path):
    """Stopped after 2 of 4 optimizer steps and resumed (`train sft --resume RUN`): the same losses,
    learning rates and adapter weights (optimizer, scheduler, RNG and data order restored)."""
    import torch
    from safetensors.torch import load_file

    from pear_agent.train.sft import run_sft

    recipe = load_recipe(
        "roadster_study",
        "cpu",
        [
            f"model.name={tiny_model_dir}",
            "sft.epochs=2",
            "sft.learning_rate=0.01",
            "sft.lr_scheduler=linear",
            "sft.checkpoint_every=1",
            "model.lora.r=4",
            "logging.report_to=[tensorboard]",
        ],
    )
    data = [str(_short_episodes(tmp_path / "episodes"))]
    quiet = {"log": lambda *_: None}
    full = run_sft(recipe, tmp_path / "full", data=data, max_steps=4, **quiet)
    from transformers import TrainerCallback

    class StopAfterTwo(TrainerCallback):  # the run is stopped after its checkpoint of step 2
        def on_step_end(self, args, state, control, **kw):
            control.should_training_stop = state.global_step >= 2
            return control

    part = run_sft(recipe, tmp_path / "part", data=data, max_steps=4, callbacks=[StopAfterTwo()], **quiet)
    assert len(part.losses) == 2 and (tmp_path / "part" / "trainer" / "checkpoint-2").is_dir()
    resumed = run_sft(recipe, tmp_path / "part", max_steps=4, resume=True, **quiet)
    assert len(full.losses) == len(resumed.losses) == 4
    assert resumed.losses == pytest.approx(full.losses, abs=1e-5)
    a = load_file(str(full.out / "adapter_model.safetensors"))
    b = load_file(str(resumed.out / "adapter_model.safetensors"))
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert list((tmp_path / "part" / "tensorboard").rglob("events.out.tfevents.*"))  # TensorBoard by default
    with pytest.raises(ValueError, match="no sft checkpoint to resume from"):
        run_sft(recipe, tmp_path / "nothing", resume=True, **quiet)
