"""A text policy's reply holds no special token but its end: a model that favours special tokens
(here a random one whose head is pushed towards them) still replies in plain tokens, the reply stops
at its first turn end, and the trainer rebuilds exactly the sampled ids with the same log-probs."""

from __future__ import annotations

import json

import pytest

from pear_agent.loop.episode import Episode, EpisodeConfig
from pear_agent.records.log import RunWriter
from sim_adapters.roadster.environment import RoadsterEnvironment


@pytest.fixture
def special_loving(tiny):
    """The tiny model with +30 on every banned special token's logit (<|im_start|>, <repo_name>...)
    and +9 on the turn's end: unbanned, nearly every sampled token would be a special one."""
    from pear_agent.train.chat_template import turn_end_ids
    from pear_agent.train.vision import reply_banned_ids

    model, tok = tiny
    banned = reply_banned_ids(tok)
    ends = turn_end_ids(tok)
    assert tok.convert_tokens_to_ids("<|im_start|>") in banned and ends[0] not in banned

    def push(_module, _inputs, logits):
        logits = logits.clone()
        logits[..., banned] += 30.0
        logits[..., ends[0]] += 9.0
        return logits

    handle = model.lm_head.register_forward_hook(push)
    try:
        yield model, tok, banned, ends
    finally:
        handle.remove()


def test_a_reply_holds_no_special_token_but_its_end_and_round_trips(special_loving, tmp_path):
    import torch

    from pear_agent.train.local_model import LocalModelPolicy
    from pear_agent.train.loss import BANNED_LOGIT
    from pear_agent.train.sequences import episode_tokens

    model, tok, banned, ends = special_loving
    policy = LocalModelPolicy(model, tok, temperature=1.0, max_new_tokens=12)
    env = RoadsterEnvironment("roadster_ramp_flip", "light", render=False)
    writer = RunWriter(tmp_path / "run", video_fps=None)
    episode = Episode(env, policy, EpisodeConfig(max_invalid=4, max_turns=4), writer=writer)
    result = episode.run(20000)
    turns = [json.loads(x) for x in (tmp_path / "run" / "episode.jsonl").read_text().splitlines()]
    traces = [t["tokens"] for t in turns if t.get("kind") == "turn" and "tokens" in t]
    assert len(traces) == result.turns >= 2
    special = set(banned) | set(ends)
    for trace in traces:
        ids = trace["ids"]
        assert not special & set(ids[:-1]), f"a special token mid-reply: {tok.convert_ids_to_tokens(ids)}"
        assert ids[-1] not in set(banned)
    assert any(t["ids"][-1] in ends for t in traces)  # some replies ended at the turn's end
    # the trainer rebuilds exactly the sampled ids from the record
    seq = episode_tokens(tok, episode.messages, traces)
    assert seq.input_ids == policy.sequence.ids and seq.mask == policy.sequence.mask
    # and log mu is the banned distribution's, as the loss computes log pi (loss.BANNED_LOGIT)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([seq.input_ids])).logits[0, :-1]
    logits = logits.index_fill(-1, torch.tensor(banned), BANNED_LOGIT)
    lp = torch.log_softmax(logits, -1).gather(-1, torch.tensor(seq.input_ids[1:])[:, None])[:, 0]
    mine = [x for x, m in zip(lp.tolist(), seq.mask[1:], strict=True) if m]
    recorded = [x for x, m in zip(seq.old_logprobs[1:], seq.mask[1:], strict=True) if m]
    assert mine == pytest.approx(recorded, abs=1e-3)


def test_the_batched_sampler_bans_per_request(special_loving):
    """Two requests in one batch: the one with a ban never samples a banned id, the other (no ban)
    samples them: the ban is the request's, not the batch's."""
    from pear_agent.train.batched import GenRequest, generate_batch

    model, tok, banned, _ = special_loving
    feed = tok("hello there", add_special_tokens=False)["input_ids"]
    reqs = [
        GenRequest(list(feed), max_new_tokens=8, temperature=1.0, seed=1, banned=frozenset(banned)),
        GenRequest(list(feed), max_new_tokens=8, temperature=1.0, seed=1),
    ]
    kept, free = generate_batch(model, reqs, tok.pad_token_id or 0)
    assert not set(banned) & set(kept.ids)
    assert set(banned) & set(free.ids)


def test_text_tokenizer_bans_every_special_token_but_the_turns_end(tiny):
    from pear_agent.train.chat_template import turn_end_ids
    from pear_agent.train.vision import reply_banned_ids

    tok = tiny[1]
    banned = set(reply_banned_ids(tok))
    assert not banned & set(turn_end_ids(tok))
    assert set(tok.all_special_ids) - set(turn_end_ids(tok)) <= banned
    assert tok.convert_tokens_to_ids("<repo_name>") in banned
