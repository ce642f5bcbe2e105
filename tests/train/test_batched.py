"""Batched generation across episodes: a batch of sequences of different lengths (some with a cached
prefix) decodes exactly what each decodes alone, and its caches continue each sequence correctly."""

from __future__ import annotations

import pytest


def _requests(tok, GenRequest, temperature=0.0):
    texts = ["Hello there", "A much longer prompt that has quite a few more tokens in it than the first", "x"]
    return [
        GenRequest(tok(t)["input_ids"], None, max_new_tokens=5 + i, temperature=temperature, seed=i)
        for i, t in enumerate(texts)
    ]


def test_a_batch_decodes_what_each_sequence_decodes_alone(tiny):
    from pear_agent.train.batched import GenRequest, generate_batch

    model, tok = tiny
    for temperature in (0.0, 1.0):  # greedy, and seeded sampling per row
        alone = [generate_batch(model, [r])[0] for r in _requests(tok, GenRequest, temperature)]
        together = generate_batch(model, _requests(tok, GenRequest, temperature))
        for a, b in zip(alone, together, strict=True):
            assert a.ids == b.ids
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
            assert [k.shape for k, _ in a.kv] == [k.shape for k, _ in b.kv]
    # a second turn on each sequence's own cache (of different lengths), batched: same as alone
    follow = [tok(" and then")["input_ids"], tok(" more")["input_ids"], tok(" z z z")["input_ids"]]

    def second(results):
        return [
            GenRequest([r.ids[-1], *f], r.kv, max_new_tokens=4, temperature=0.0)
            for r, f in zip(results, follow, strict=True)
        ]

    first = generate_batch(model, _requests(tok, GenRequest))
    alone2 = [generate_batch(model, [q])[0] for q in second(first)]
    together2 = generate_batch(model, second(first))
    assert [a.ids for a in alone2] == [b.ids for b in together2]
    # and the cached path equals feeding the whole sequence afresh
    req0 = _requests(tok, GenRequest)[0]
    fresh = GenRequest(req0.feed + first[0].ids + follow[0], None, max_new_tokens=4, temperature=0.0)
    assert generate_batch(model, [fresh])[0].ids == alone2[0].ids


def test_the_generator_gathers_concurrent_requests_into_one_batch(tiny):
    from pear_agent.train.batched import BatchedGenerator, GenRequest, generate_batch

    model, tok = tiny
    gen = BatchedGenerator(model, gather_s=0.2)
    try:
        futures = [gen.submit(r) for r in _requests(tok, GenRequest)]
        results = [f.result(timeout=120) for f in futures]
    finally:
        gen.close()
    assert gen.stats.batches == 1 and gen.stats.rows == 3
    alone = [generate_batch(model, [r])[0].ids for r in _requests(tok, GenRequest)]
    assert [r.ids for r in results] == alone


def test_a_shared_prompt_start_is_prefilled_once_with_the_same_tokens(tiny):
    """A GRPO group's flights share their first prompt: prefilled once, the replies are the same."""
    from pear_agent.train.batched import BatchedGenerator, GenRequest, generate_batch

    model, tok = tiny
    start = tok("A long shared system prompt that every flight of the task starts with, word for word.")[
        "input_ids"
    ]
    tails = [tok(t)["input_ids"] for t in (" light", " storm wind", " gale")]

    def reqs():
        return [GenRequest(start + t, None, 6, 0.0, frozenset(), i) for i, t in enumerate(tails)]

    plain = generate_batch(model, reqs(), shared=False)
    shared = generate_batch(model, reqs(), shared=True)
    assert [r.ids for r in plain] == [r.ids for r in shared]
    assert [r.kv[0][0].shape for r in plain] == [r.kv[0][0].shape for r in shared]
    gen = BatchedGenerator(model, gather_s=0.01)
    try:
        alone = [gen.submit(r).result(timeout=120) for r in reqs()]  # one at a time: the start reused
    finally:
        gen.close()
    assert gen._prefix is not None and gen._prefix[0] == (start + tails[0])[:-1]
    assert [r.ids for r in alone] == [r.ids for r in plain]
