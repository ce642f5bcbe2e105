"""Vision-language models in training, on `tiny-idefics3` (a 2-layer Idefics3, SmolVLM's architecture,
random weights
built from a config, SmolLM2's tokenizer: nothing downloaded): the images are in the sequence as the
model's image tokens, token-exact with the processor's one-shot encoding, and out of the loss; the
model loads as image-text-to-text; a GRPO update runs on arm episodes flown with camera images."""

from __future__ import annotations

import math

import numpy as np
import pytest


@pytest.fixture(scope="module")
def vlm():
    from pear_agent.train.model_files import load_model

    return load_model("tiny-idefics3")


def _jpeg(seed: int) -> bytes:
    from pear_agent.robot.images import encode_jpeg

    rng = np.random.default_rng(seed)
    return encode_jpeg(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))


def _convo():
    from pear_agent.protocol.prompts import user_message

    return [
        {"role": "system", "content": "You move a robot arm. Answer with one JSON command."},
        user_message("Turn 1. State: {}", {"agentview": _jpeg(0)}),
        {"role": "assistant", "content": '{"move": [1, 0, 0]}'},
        user_message("Turn 2. State: {}", {"agentview": _jpeg(1), "wrist": _jpeg(2)}),
        {"role": "assistant", "content": '{"gripper": 0}'},
    ]


def test_the_model_loads_as_image_text_to_text_with_its_processor(vlm):
    from transformers import Idefics3ForConditionalGeneration

    from pear_agent.train.vision import is_processor

    model, proc = vlm
    assert isinstance(model, Idefics3ForConditionalGeneration) and is_processor(proc)


def test_image_tokens_are_in_the_sequence_and_out_of_the_loss(vlm):
    from pear_agent.train.chat_template import turn_end_ids
    from pear_agent.train.sequences import episode_tokens
    from pear_agent.train.vision import decode_image, vision_messages

    _, proc = vlm
    tok = proc.tokenizer
    image_id = tok.convert_tokens_to_ids("<image>")
    convo = _convo()
    seq = episode_tokens(proc, convo)
    # three 64x64 images resized to 56x56: 4x4 patches merged 2x2 -> 4 image tokens each
    at = [i for i, t in enumerate(seq.input_ids) if t == image_id]
    assert len(at) == 3 * 4
    assert all(seq.mask[i] == 0 for i in at)  # never in the loss
    assert tuple(seq.vision["pixel_values"].shape) == (1, 3, 3, 56, 56)  # one sequence, three images
    # token-exact: the append-only build equals the processor's one-shot encoding of the episode
    msgs, urls = vision_messages(convo)
    text = proc.apply_chat_template(msgs, tokenize=False)
    whole = proc(text=[text], images=[decode_image(u) for u in urls], add_special_tokens=False)
    assert seq.input_ids == list(whole["input_ids"][0])[: len(seq.input_ids)]
    # the loss covers exactly the two replies and their end-of-turn tokens
    end = turn_end_ids(tok)[0]
    replies = [
        tok(m["content"], add_special_tokens=False)["input_ids"] + [end]
        for m in convo
        if m["role"] == "assistant"
    ]
    assert [t for t, m in zip(seq.input_ids, seq.mask, strict=True) if m] == replies[0] + replies[1]


def test_the_reply_loss_of_a_vision_model_is_finite_and_reaches_the_weights(vlm):
    import torch

    from pear_agent.train.loss import reply_hidden
    from pear_agent.train.sequences import episode_tokens
    from pear_agent.train.sft import reply_loss

    model, proc = vlm
    seq = episode_tokens(proc, _convo())
    ids = torch.tensor([seq.input_ids])
    labels = torch.where(torch.tensor([seq.mask]) > 0, ids, torch.full_like(ids, -100))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels, **seq.vision}
    model.zero_grad()
    model.train()
    loss = reply_loss(model, inputs, chunk=3)
    loss.backward()
    model.eval()
    assert math.isfinite(float(loss)) and float(loss) > 0
    vis = [p.grad for n, p in model.named_parameters() if "vision" in n and p.grad is not None]
    assert vis and any(float(g.abs().sum()) > 0 for g in vis)  # the images reached the loss's gradient
    with torch.no_grad():
        _, targets = reply_hidden(model, {k: v for k, v in inputs.items() if k != "labels"}, labels != -100)
    image_id = proc.tokenizer.convert_tokens_to_ids("<image>")
    assert targets.numel() == seq.reply_tokens and image_id not in targets.tolist()


def test_the_policy_samples_with_images_and_records_its_tokens(vlm):
    from pear_agent.policies.base import TurnContext  # noqa: F401
    from pear_agent.train.local_model import VisionModelPolicy

    model, proc = vlm
    policy = VisionModelPolicy(model, proc, temperature=1.0, max_new_tokens=5, seed=1)
    reply = policy.act(_convo()[:2], None)  # type: ignore[arg-type]
    assert not reply.error and reply.tokens is not None and 1 <= len(reply.tokens.token_ids) <= 5
    assert len(policy.sequence.images) == 1 and policy.sequence.mask[-len(reply.tokens.token_ids) :] == [
        1
    ] * len(reply.tokens.token_ids)
    assert all(lp <= 0 for lp in reply.tokens.logprobs)


def test_a_grpo_update_on_arm_episodes_flown_with_camera_images(tmp_path):
    """Real rollouts of pick_cube with camera images through the one loop, then one update."""
    from pear_agent.train.config import load_recipe
    from pear_agent.train.grpo import GRPOTrainer

    recipe = load_recipe(
        "libero_pear",
        "cpu",
        [
            "model.max_new_tokens=4",
            "grpo.max_turns=2",
            "grpo.stages=[{name: arm, mix: [{task: pick_cube}]}]",  # LIBERO itself: .venv-libero
        ],
    )
    trainer = GRPOTrainer(recipe, tmp_path / "grpo", log=lambda *_: None)
    draws = [trainer.mixes[0].draw()]
    (group,) = trainer.rollouts(draws, step=0, first_group=0)
    assert group.verdict != "policy_error", group.records[0]["end_reason"]
    user = [m for m in group.records[0]["messages"] if m["role"] == "user"]
    assert any(
        isinstance(m["content"], list) and any(c["type"] == "image_url" for c in m["content"]) for m in user
    )
    group.advantages = [1.0, -1.0]  # random weights fail alike: force a signal to exercise the update
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    loss, trained, drift, _ = trainer.update([group])
    assert trained > 0 and math.isfinite(loss) and drift < 1e-3
    changed = [
        n
        for n, p in trainer.model.named_parameters()
        if p.requires_grad and not np.allclose(p.detach(), before[n])
    ]
    assert changed


def test_image_tokens_cannot_be_sampled_and_the_loss_bans_them_alike(vlm):
    """An image token in a reply would break the model's image/token count: the policy gives them
    `BANNED_LOGIT` and so does the loss (the trained distribution is the sampled one)."""
    import torch

    from pear_agent.train.loss import chunked_terms
    from pear_agent.train.vision import image_token_ids

    model, proc = vlm
    tok = proc.tokenizer
    banned = image_token_ids(proc)
    names = ("<image>", "<fake_token_around_image>", "<global-img>")
    assert {tok.convert_tokens_to_ids(t) for t in names} <= set(banned)
    assert tok.convert_tokens_to_ids("<|im_end|>") not in banned
    assert tok.convert_tokens_to_ids("<repo_name>") in banned  # SmolLM2's own special tokens too
    head = model.get_output_embeddings()
    h = torch.randn(5, head.weight.shape[1])
    y = torch.tensor([1, 2, 3, 4, 5])
    _, lp = chunked_terms(head, h, y, banned=torch.tensor(banned))
    z = head(h).float()
    z[:, banned] = -1.0e4
    assert torch.allclose(lp, torch.log_softmax(z, -1).gather(-1, y[:, None])[:, 0], atol=1e-5)
