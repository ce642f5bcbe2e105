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
    assert gen._prefixes[0][0] == (start + tails[0])[:-1]
    assert [r.ids for r in alone] == [r.ids for r in plain]


def test_each_row_draws_from_its_own_distribution():
    """The inverse-CDF draw: frequencies follow the probabilities, a zero-probability token never
    comes, and a row's draws do not depend on the rows beside it."""
    import torch

    from pear_agent.train.batched import draw

    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3], [0.0, 0.0, 0.0, 1.0]])
    logp = probs.log()
    gens = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    counts = torch.zeros(4)
    n = 20000
    for _ in range(n):
        row = draw(logp, gens)
        counts[row[0]] += 1
        assert row[1] == 3
    assert counts[1] == 0
    assert (counts / n).tolist() == pytest.approx([0.1, 0.0, 0.6, 0.3], abs=0.015)
    for seed in range(20):
        alone = draw(logp[:1], [torch.Generator().manual_seed(seed)])[0]
        pair = [torch.Generator().manual_seed(seed + 100), torch.Generator().manual_seed(seed)]
        assert draw(torch.stack([logp[1], logp[0]]), pair)[1] == alone


def test_a_cached_turn_has_the_logprobs_of_a_full_recompute(tiny):
    """Turn 2 on turn 1's cache (only the new tokens fed) samples what feeding the whole sequence
    afresh samples, with the same log-probabilities (the trainer recomputes them in one pass)."""
    from pear_agent.train.batched import GenRequest, generate_batch

    model, tok = tiny
    prompt = tok("The flight so far, a long observation of the ramp and the wind")["input_ids"]
    first = generate_batch(model, [GenRequest(prompt, None, 6, 1.0, frozenset(), 3)])[0]
    follow = tok(" then the next observation")["input_ids"]
    cached = generate_batch(model, [GenRequest([first.ids[-1], *follow], first.kv, 6, 1.0, frozenset(), 4)])[
        0
    ]
    full = generate_batch(model, [GenRequest(prompt + first.ids + follow, None, 6, 1.0, frozenset(), 4)])[0]
    assert cached.ids == full.ids
    assert cached.logprobs == pytest.approx(full.logprobs, abs=1e-4)


def test_nested_prompt_starts_are_prefilled_once_each(tiny):
    """Two GRPO groups in one batch: the system prompt is prefilled once, each group's first prompt
    once (not once per flight), and every flight decodes what it decodes alone."""
    from pear_agent.train.batched import GenRequest, generate_batch

    model, tok = tiny
    system = tok("You fly the roadster; reply with one JSON action per turn, nothing else at all.")[
        "input_ids"
    ]
    texts = (
        " Light wind from the west, the ramp ahead at 40 m, the car at rest on the grass.",
        " A gale from the north, a ramp 55 m away, the roadster rolling at 3 m/s on gravel.",
    )
    groups = [tok(t)["input_ids"] for t in texts]
    assert groups[0][0] != groups[1][0] and min(map(len, groups)) > 16  # two branches, each shareable

    def reqs():
        return [GenRequest(system + g + [13], None, 4, 1.0, frozenset(), 10 * j + i)
                for j, g in enumerate(groups) for i in range(3)]  # fmt: skip

    plain_t: dict[str, float] = {}
    shared_t: dict[str, float] = {}
    plain = generate_batch(model, reqs(), shared=False, timing=plain_t)
    shared = generate_batch(model, reqs(), shared=True, timing=shared_t)
    assert [r.ids for r in shared] == [r.ids for r in plain]
    for a, b in zip(plain, shared, strict=True):
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
        assert a.kv[0][0].shape == b.kv[0][0].shape
    assert plain_t["prefill_tokens"] == sum(3 * (len(system) + len(g) + 1) for g in groups)
    # once the system prompt, once each group's part, then each flight's last token
    want = len(system) + len(groups[0]) + len(groups[1]) + 6
    assert shared_t["prefill_tokens"] == want


def test_lockstep_waits_for_every_live_sequence_then_goes_at_once(tiny):
    """With the episodes in flight counted (`expect`), requests that arrive far apart (an
    environment step between them) still make one batch, and one live sequence never waits."""
    import time

    from pear_agent.train.batched import BatchedGenerator, GenRequest

    model, tok = tiny
    gen = BatchedGenerator(model, gather_s=0.01, max_wait_s=120)
    try:
        gen.expect(3)
        futures = []
        for r in _requests(tok, GenRequest):
            futures.append(gen.submit(r))
            time.sleep(0.3)  # far longer than gather_s
        [f.result(timeout=120) for f in futures]
        assert gen.stats.batches == 1 and gen.stats.rows == 3
        gen.expect(2)  # one episode ended: two live, both waiting -> one batch of two
        futures = [gen.submit(r) for r in _requests(tok, GenRequest)[:2]]
        [f.result(timeout=120) for f in futures]
        assert gen.stats.batches == 2 and gen.stats.rows == 5
        gen.expect(3)
        first = gen.submit(_requests(tok, GenRequest)[0])
        time.sleep(0.5)
        assert not first.done()  # two more are live: it waits for them
        gen.expect(1)  # they ended: it goes
        first.result(timeout=120)
    finally:
        gen.close()
    slow = BatchedGenerator(model, gather_s=60, max_wait_s=60)
    try:
        slow.expect(1)
        t0 = time.monotonic()
        slow.submit(_requests(tok, GenRequest)[2]).result(timeout=120)
        assert time.monotonic() - t0 < 30  # not the 60 s quiet window
    finally:
        slow.close()


def test_the_growing_cache_layer_holds_what_concatenation_holds():
    """Written in place with room to spare, regrown when full: the same keys and values as
    transformers' concatenating layer, token for token."""
    import torch
    from transformers.cache_utils import DynamicLayer

    from pear_agent.train.growing_cache import GrowingLayer

    grow, cat = GrowingLayer(reserve=2), DynamicLayer()
    for n in (3, 1, 1, 4, 1):  # a prefill, decode steps, a longer feed past the room left
        k, v = torch.randn(2, 3, n, 4), torch.randn(2, 3, n, 4)
        gk, gv = grow.update(k, v)
        ck, cv = cat.update(k, v)
        assert torch.equal(gk, ck) and torch.equal(gv, cv)
        assert grow.get_seq_length() == cat.get_seq_length()
