"""The in-process generator through the ONE loop: token traces recorded, the cache exact, a trained
checkpoint saved, loaded and answering."""

from __future__ import annotations

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.records.log import RunWriter
from sim_adapters.roadster.environment import RoadsterEnvironment


def _policy(tiny, **kw):
    from pear_agent.train.local_model import LocalModelPolicy

    model, tok = tiny
    return LocalModelPolicy(model, tok, max_new_tokens=kw.pop("max_new_tokens", 6), **kw)


def test_the_loop_records_each_replys_sampled_ids_and_logprobs(tiny, tmp_path):
    import torch

    from pear_agent.train.sequences import episode_tokens

    policy = _policy(tiny, temperature=1.0, policy_version=7)
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    writer = RunWriter(tmp_path / "run", video_fps=None)
    episode = Episode(env, policy, EpisodeConfig(max_invalid=2), writer=writer)
    result = episode.run(20000)
    assert result.turns >= 1
    turns = [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]
    traces = [t["tokens"] for t in turns if t.get("kind") == "turn" and "tokens" in t]
    assert len(traces) == result.turns
    assert all(t["policy_version"] == 7 and len(t["ids"]) == len(t["logprobs"]) >= 1 for t in traces)
    # the trainer rebuilds exactly the generator's sequence from the record
    seq = episode_tokens(tiny[1], episode.messages, traces)
    assert seq.input_ids == policy.sequence.ids and seq.mask == policy.sequence.mask
    # and the recorded log-probabilities are the model's own at those positions (special tokens but
    # the turn's end banned, as the sampler and the loss do)
    from pear_agent.train.loss import BANNED_LOGIT
    from pear_agent.train.vision import reply_banned_ids

    model = tiny[0]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq.input_ids])).logits[0, :-1]
    logits = logits.index_fill(-1, torch.tensor(reply_banned_ids(tiny[1])), BANNED_LOGIT)
    lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(seq.input_ids[1:])[:, None])[:, 0]
    mine = [x for x, m in zip(lp.tolist(), seq.mask[1:], strict=True) if m]
    recorded = [x for x, m in zip(seq.old_logprobs[1:], seq.mask[1:], strict=True) if m]
    assert mine == pytest.approx(recorded, abs=1e-4)


def test_prefix_cache_gives_the_same_replies_as_no_cache(tiny):
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    runs = []
    for reuse in (True, False):
        policy = _policy(tiny, temperature=0.0, reuse_cache=reuse)
        episode = Episode(env, policy, EpisodeConfig(max_invalid=3, max_turns=3))
        episode.run(20001)
        runs.append(policy.sequence.ids)
    assert runs[0] == runs[1]


def test_a_checkpoint_saves_loads_and_answers_through_the_loop(tiny_model_dir, tmp_path):
    from pear_agent.train.config import ModelConfig
    from pear_agent.train.local_model import LocalModelPolicy
    from pear_agent.train.model_files import CHECKPOINT_META, load_model
    from pear_agent.train.models import save_checkpoint, trainable_model

    cfg = ModelConfig(name=tiny_model_dir, lora={"r": 4, "alpha": 8})
    model, tok, base = trainable_model(cfg)
    for merge in (False, True):
        ckpt = save_checkpoint(model, tok, tmp_path / f"ckpt-{merge}", base, step=1, merge=merge)
        meta = json.loads((ckpt / CHECKPOINT_META).read_text())
        assert meta["adapter"] is (not merge) and meta["base_model"] == tiny_model_dir
        loaded, tok2 = load_model(str(ckpt))
        policy = LocalModelPolicy(loaded, tok2, temperature=0.0, max_new_tokens=4)
        env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
        result = Episode(env, policy, EpisodeConfig(max_invalid=1)).run(20002)
        assert result.turns == 1 and result.policy_failures == 0
        assert policy.sequence.reply_token_counts[0] >= 1


def test_an_unknown_wheel_model_is_one_clear_line():
    from pear_agent.train.model_files import load_model

    with pytest.raises(ValueError, match="cannot load model 'no/such-model'"):
        load_model("no/such-model")


def test_a_missing_checkpoint_folder_is_named_as_such():
    from pear_agent.train.model_files import load_model

    with pytest.raises(ValueError, match="no model or checkpoint folder at tests/no-such-checkpoint"):
        load_model("tests/no-such-checkpoint")
