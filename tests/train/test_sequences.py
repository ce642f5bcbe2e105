"""One episode = one sequence in the chat template; the mask covers exactly the replies' tokens."""

from __future__ import annotations

import pytest

from pear_agent.train.chat_template import turn_end_ids
from pear_agent.train.sequences import ChatSequence, TemplateDriftError, episode_tokens

CONVO = [
    {"role": "system", "content": "You fly a car."},
    {"role": "user", "content": "telemetry t_s=0 h_m=12"},
    {"role": "assistant", "content": '{"mode": "rotate", "axis": "roll", "to": 360}'},
    {"role": "user", "content": "telemetry t_s=0.2 h_m=11"},
    {"role": "assistant", "content": '{"mode": "land"}'},
]


def test_text_replies_make_the_template_and_the_mask_covers_them_exactly(tiny):
    _, tok = tiny
    seq = episode_tokens(tok, CONVO)
    # the sequence is exactly the chat template of the whole conversation
    assert tok.decode(seq.input_ids) == tok.apply_chat_template(CONVO, tokenize=False).rstrip("\n")
    end = turn_end_ids(tok)[0]
    replies = [
        tok(m["content"], add_special_tokens=False)["input_ids"] + [end]
        for m in CONVO
        if m["role"] == "assistant"
    ]
    assert seq.reply_tokens == sum(map(len, replies)) == sum(seq.mask)
    masked = [t for t, m in zip(seq.input_ids, seq.mask, strict=True) if m]
    assert masked == replies[0] + replies[1]


def test_sampled_ids_are_kept_as_they_came_not_retokenised(tiny):
    _, tok = tiny
    # " land" spelt with odd pieces: the same text, other ids than the tokenizer would pick
    odd = (
        tok("{", add_special_tokens=False)["input_ids"]
        + tok('"mode": "land"}', add_special_tokens=False)["input_ids"]
    )
    text = tok.decode(odd)
    convo = [*CONVO[:4], {"role": "assistant", "content": text}]
    traces = [
        None,
        {"ids": [*odd, turn_end_ids(tok)[0]], "logprobs": [-0.5] * (len(odd) + 1), "policy_version": 3},
    ]
    seq = episode_tokens(tok, convo, traces)
    n = len(odd) + 1
    assert seq.input_ids[-n:] == traces[1]["ids"] and seq.mask[-n:] == [1] * n
    assert seq.versions[-n:] == [3] * n
    assert seq.old_logprobs is None  # the first reply had no trace: no behaviour log-probs for it


def test_a_template_that_rewrites_history_is_refused(tiny):
    _, tok = tiny
    seq = ChatSequence(tok)
    seq.prompt(CONVO[:2])
    seq.add_reply([1, 2, 3], "abc")
    with pytest.raises(TemplateDriftError, match="changed under the sequence"):
        seq.prompt([CONVO[0], {"role": "user", "content": "another first turn"}, CONVO[2]])


def test_images_are_refused_with_the_fix(tiny):
    _, tok = tiny
    convo = [CONVO[0], {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    with pytest.raises(ValueError, match="--observation state"):
        ChatSequence(tok).prompt(convo)


def test_check_mask_catches_a_mask_shifted_off_the_replies(tiny):
    """The same number of masked tokens in the wrong place (a prompt token in the loss, a reply token
    out of it) fails: the mask is checked position by position against the replies' spans."""
    _, tok = tiny
    seq = ChatSequence(tok)
    seq.prompt(CONVO[:2])
    seq.add_text_reply(CONVO[2]["content"])
    seq.check_mask()  # as built: fine
    start, end = seq.reply_spans[0]
    seq.mask[start - 1], seq.mask[end - 1] = 1, 0  # shifted by one: the count is unchanged
    assert sum(seq.mask) == seq.reply_token_counts[0]
    with pytest.raises(AssertionError, match="first difference at token"):
        seq.check_mask()
    seq.mask[start - 1], seq.mask[end - 1] = 0, 1
    seq.mask.append(0)  # one entry more than there are tokens
    with pytest.raises(AssertionError, match="entries for"):
        seq.check_mask()
