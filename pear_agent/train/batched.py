"""Generation batched across the episodes in flight, in this process (transformers, CPU or GPU).

A GRPO step flies all its episodes at once (`pear_agent.loop.runner`); each episode's
`LocalModelPolicy` hands its turn to a `BatchedGenerator`, whose one worker thread gathers the
requests that arrive together and decodes them as ONE batch: one forward pass per generated token
for every sequence in the batch, instead of one per sequence. At batch 1 a small model's forward
pass costs about the same as at batch 8 on a CPU (weights and Python overhead dominate), so the
tokens per second grow with the batch.

Each sequence keeps its own key/value cache between turns (the whole episode so far: a server's
prefix cache, in process). A batch left-pads the caches and the new tokens to common widths, masks
the padding, and passes each row's own positions, so every row attends to exactly its own tokens
at its own positions; afterwards each row's cache is cut back out (padding dropped). Sampling is
per row with a seeded generator, from the full distribution at the request's temperature; the
log-probabilities recorded are those of the batched forward pass, which differ from a batch-1 pass
only by float rounding (the trainer's drift check measures it).

`generate_batch` is also the batch-1 path (`LocalModelPolicy` without a generator), so there is one
decoding code path.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pear_agent.train.loss import BANNED_LOGIT

KV = list[tuple[Any, Any]]
"""A sequence's cache: per layer (keys, values), each [1, kv_heads, tokens, head_dim]."""


@dataclass
class GenRequest:
    feed: list[int]
    """Token ids not yet in the cache (at least one): the prompt's new part."""
    kv: KV | None = None
    """The cache of everything before `feed` (None: nothing cached)."""
    max_new_tokens: int = 64
    temperature: float = 1.0
    stop_ids: frozenset[int] = frozenset()
    seed: int = 0
    banned: frozenset[int] = frozenset()
    """Ids never sampled (`vision.reply_banned_ids`): their logit is `loss.BANNED_LOGIT`, as in the loss."""
    bias: tuple[tuple[int, float], ...] = ()
    """(id, added logit) before the temperature: an OpenAI/vLLM `logit_bias` (`train serve`)."""
    raw_logprobs: bool = False
    """Return log-probabilities of the raw logits (temperature 1, no bias, no ban), as vLLM does
    unless started with `--logprobs-mode processed_logprobs`; False: of the sampled distribution."""


@dataclass
class GenResult:
    ids: list[int]
    logprobs: list[float]
    kv: KV
    """The cache of the request's prefix, `feed` and every new token but the last (never fed)."""


@dataclass
class BatchStats:
    """What the generator did: batches, rows, generated tokens and seconds, per batch size."""

    batches: int = 0
    rows: int = 0
    tokens: int = 0
    seconds: float = 0.0
    by_size: dict[int, list[float]] = field(default_factory=dict)
    """batch size -> [batches, tokens, seconds]."""
    prefill_tokens: int = 0
    """Prompt tokens fed (the shared starts and each row's new part): the work batching cannot share."""
    prefill_s: float = 0.0
    decode_s: float = 0.0
    decode_steps: int = 0
    """Forward passes after the prefill (one per generated token of the longest row)."""

    def timed(self, timing: dict[str, float]) -> None:
        """Add a batch's `generate_batch` timing (prefill and decode seconds, tokens, steps)."""
        self.prefill_tokens += int(timing.get("prefill_tokens", 0))
        self.prefill_s += timing.get("prefill_s", 0.0)
        self.decode_s += timing.get("decode_s", 0.0)
        self.decode_steps += int(timing.get("decode_steps", 0))

    def add(self, size: int, tokens: int, seconds: float) -> None:
        self.batches += 1
        self.rows += size
        self.tokens += tokens
        self.seconds += seconds
        row = self.by_size.setdefault(size, [0, 0, 0.0])
        row[0] += 1
        row[1] += tokens
        row[2] += seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "batches": self.batches,
            "mean_batch": round(self.rows / self.batches, 3) if self.batches else 0.0,
            "generated_tokens": self.tokens,
            "generate_s": round(self.seconds, 3),
            "tokens_per_s": round(self.tokens / self.seconds, 2) if self.seconds > 0 else 0.0,
            "prefill_tokens": self.prefill_tokens,
            "prefill_s": round(self.prefill_s, 3),
            "decode_s": round(self.decode_s, 3),
            "decode_steps": self.decode_steps,
            "by_batch_size": {
                str(k): {
                    "batches": v[0],
                    "tokens": v[1],
                    "tokens_per_s": round(v[1] / v[2], 2) if v[2] else 0.0,
                }
                for k, v in sorted(self.by_size.items())
            },
        }


def _cache_kwarg(model: Any) -> str:
    """The forward argument that takes a cache: `cache` in transformers 5, `past_key_values` before
    (a PEFT wrapper's forward takes **kwargs: ask the model inside)."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    params = inspect.signature(inner.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _layers(cache: Any) -> KV:
    """(keys, values) per layer of a transformers cache (v5 `layers`, or the older lists)."""
    if hasattr(cache, "layers"):
        return [(layer.keys, layer.values) for layer in cache.layers]
    return list(zip(cache.key_cache, cache.value_cache, strict=True))


MIN_SHARED_PREFIX = 16
"""Fresh requests sharing at least this many leading tokens prefill them once."""


def _common_prefix(seqs: list[list[int]]) -> int:
    n = min(len(x) for x in seqs)
    for i in range(n):
        t = seqs[0][i]
        if any(x[i] != t for x in seqs[1:]):
            return i
    return n


def prefill(model: Any, ids: list[int], before: KV | None = None) -> KV:
    """The cache of `ids` (one sequence, one forward pass), after `before` (the cache of what comes
    first; None: nothing)."""
    import torch  # optional: torch
    from transformers import DynamicCache  # optional: transformers

    device = next(model.parameters()).device
    cache = DynamicCache(ddp_cache_data=list(before)) if before else DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.tensor([ids], device=device), use_cache=True, logits_to_keep=1,
              **{_cache_kwarg(model): cache})  # fmt: skip
    return [(k, v) for k, v in _layers(cache)]


Prefix = tuple[list[int], KV]

MAX_KNOWN_PREFIXES = 8
"""Prompt starts a `BatchedGenerator` keeps for later batches (a GRPO step's groups' first prompts)."""


def _cut(kv: KV, n: int) -> KV:
    return [(k[:, :, :n], v[:, :, :n]) for k, v in kv]


def share_prefix(
    model: Any,
    requests: list[GenRequest],
    known: list[Prefix] | None = None,
    timing: dict[str, float] | None = None,
) -> list[Prefix]:
    """Requests without a cache whose prompts start alike get the common part's cache, computed
    once, and feed only the rest. The shared starts nest: every flight of a task shares the system
    prompt, and a GRPO group's flights their whole first prompt, so a batch of two groups prefills
    the system prompt once and each group's own part once (not once per flight). `known` (earlier
    batches' prefixes) serves the longest part of one that a prompt starts with; a lone fresh prompt
    is prefilled but for its last token, kept for the requests to come (the next flight of its
    group, one at a time). Returns the prefixes computed here (`timing` counts their tokens)."""
    fresh = [r for r in requests if r.kv is None]
    if not fresh:
        return []
    computed: list[Prefix] = []
    fed = [0]
    bases: dict[tuple[int, int], list[GenRequest]] = {}
    for r in fresh:
        best = (-1, 0)
        for i, (ids, _) in enumerate(known or []):
            n = min(_common_prefix([ids, r.feed]), len(r.feed) - 1)
            if n >= MIN_SHARED_PREFIX and n > best[1]:
                best = (i, n)
        bases.setdefault(best, []).append(r)
    for (i, n), reqs in bases.items():
        before: Prefix = ([], None) if i < 0 else (known[i][0][:n], _cut(known[i][1], n))  # type: ignore[index,assignment]
        for r in reqs:
            r.feed = r.feed[n:]
        _share_tree(model, reqs, before, computed, fed, alone=len(fresh) == 1)
    if timing is not None:
        timing["prefill_tokens"] = timing.get("prefill_tokens", 0) + fed[0]
    return computed


def _share_tree(
    model: Any, reqs: list[GenRequest], before: Prefix, computed: list[Prefix], fed: list[int], alone: bool
) -> None:
    """`reqs` all follow `before` (their feeds hold only what comes after it): the start they
    share is prefilled once, then each branch where they part shares its own start likewise."""
    ids0, kv0 = before
    for r in reqs:
        r.kv = kv0
    if len(reqs) == 1:
        feed = reqs[0].feed
        if alone and len(feed) > 1 and len(ids0) + len(feed) - 1 >= MIN_SHARED_PREFIX:
            kv = prefill(model, feed[:-1], kv0)
            fed[0] += len(feed) - 1
            reqs[0].kv, reqs[0].feed = kv, feed[-1:]
            computed.append((ids0 + feed[:-1], kv))
        return
    n = _common_prefix([r.feed for r in reqs])
    take = min(n, min(len(r.feed) for r in reqs) - 1)  # every request keeps a token to feed
    if take >= MIN_SHARED_PREFIX:
        head = reqs[0].feed[:take]
        kv0, ids0 = prefill(model, head, kv0), ids0 + head
        fed[0] += take
        for r in reqs:
            r.kv, r.feed = kv0, r.feed[take:]
        computed.append((ids0, kv0))
        n -= take
    branches: dict[int, list[GenRequest]] = {}
    for r in reqs:
        branches.setdefault(r.feed[n] if len(r.feed) > n else -1, []).append(r)
    if len(branches) > 1:
        for branch in branches.values():
            if len(branch) > 1:
                _share_tree(model, branch, (ids0, kv0), computed, fed, alone=False)


def draw(logp: Any, gens: list[Any]) -> Any:
    """One token per row of `logp` [rows, vocab] (log-probabilities), drawn by inverse CDF with one
    uniform from the row's own generator: the row's draw depends on its own distribution and
    generator only, never on the other rows."""
    import torch  # optional: torch

    cdf = logp.exp().double().cumsum(dim=-1)  # exp in float32, sums in float64: the cheapest here
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in gens]) * cdf[:, -1]
    return torch.searchsorted(cdf, u[:, None], right=True).squeeze(1).clamp(max=cdf.shape[1] - 1)


def generate_batch(
    model: Any,
    requests: list[GenRequest],
    pad_id: int = 0,
    shared: bool = True,
    timing: dict[str, float] | None = None,
) -> list[GenResult]:
    """Decode every request together, one forward pass per token for the whole batch (the prompts'
    common start prefilled once when `shared`). `timing`, when given, receives the seconds and
    tokens of the prefill (the first forward pass, and the shared start) and of the decoding."""
    import torch  # optional: torch
    from transformers import DynamicCache  # optional: transformers

    from pear_agent.train.growing_cache import GrowingLayer  # optional: transformers

    timing = {} if timing is None else timing
    t_start = time.perf_counter()

    device = next(model.parameters()).device
    n = len(requests)
    if n == 0:
        return []
    bans = [(b, torch.tensor(sorted(r.banned), dtype=torch.long)) for b, r in enumerate(requests) if r.banned]
    if any(not r.feed for r in requests):
        raise ValueError("every request needs at least one new token to feed")
    if shared:
        share_prefix(model, requests, timing=timing)
    clen = [0 if r.kv is None else int(r.kv[0][0].shape[2]) for r in requests]
    dlen = [len(r.feed) for r in requests]
    cmax, dmax = max(clen), max(dlen)
    room = dmax + max(r.max_new_tokens for r in requests) + 1
    cache = DynamicCache()
    cache.layer_class_to_replicate = lambda: GrowingLayer(reserve=room)  # type: ignore[assignment]
    if cmax:  # each row's cache left-padded (zeros, masked) into one buffer with room to grow
        proto = next(r.kv for r in requests if r.kv is not None)
        layers = []
        for layer, (k0, v0) in enumerate(proto):
            k = k0.new_empty((n, k0.shape[1], cmax + room, k0.shape[3]))
            v = v0.new_empty((n, v0.shape[1], cmax + room, v0.shape[3]))
            for b, (r, c) in enumerate(zip(requests, clen, strict=True)):
                k[b, :, : cmax - c], v[b, :, : cmax - c] = 0.0, 0.0  # masked, but never NaN
                if c:
                    k[b, :, cmax - c : cmax] = r.kv[layer][0][0]  # type: ignore[index]
                    v[b, :, cmax - c : cmax] = r.kv[layer][1][0]  # type: ignore[index]
            layers.append(GrowingLayer(k, v, cmax, room))
        cache.layers, cache.layer_class_to_replicate = layers, None  # type: ignore[assignment]
    mask = torch.zeros((n, cmax + dmax), dtype=torch.long, device=device)
    ids = torch.full((n, dmax), pad_id, dtype=torch.long, device=device)
    pos = torch.zeros((n, dmax), dtype=torch.long, device=device)
    for b, (r, c, d) in enumerate(zip(requests, clen, dlen, strict=True)):
        mask[b, cmax - c : cmax] = 1
        mask[b, cmax + dmax - d :] = 1
        ids[b, dmax - d :] = torch.tensor(r.feed, device=device)
        pos[b, dmax - d :] = torch.arange(c, c + d, device=device)
    gens = [torch.Generator().manual_seed(r.seed % (2**63)) for r in requests]
    new: list[list[int]] = [[] for _ in requests]
    logps: list[list[float]] = [[] for _ in requests]
    done = [False] * n
    next_pos = [c + d for c, d in zip(clen, dlen, strict=True)]
    key = _cache_kwarg(model)
    timing["prefill_tokens"] = timing.get("prefill_tokens", 0) + sum(dlen)
    first = True
    with torch.no_grad():
        while True:
            out = model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=pos,
                use_cache=True,
                logits_to_keep=1,
                **{key: cache},
            )
            if first:  # the prompts' forward pass: what batching cannot share
                t_decode = time.perf_counter()
                timing["prefill_s"] = timing.get("prefill_s", 0.0) + t_decode - t_start
                first = False
            else:
                timing["decode_steps"] = timing.get("decode_steps", 0) + 1
            logits = out.logits[:, -1].float().cpu()
            # one softmax for every row, then an inverse-CDF draw per row with one uniform from the
            # row's own seeded generator, so a row samples the same token alone or in any batch (a
            # torch.multinomial per row costs ~1 ms each over a 49k vocabulary: the batch's cost)
            temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in requests])
            raw = torch.log_softmax(logits, dim=-1) if any(r.raw_logprobs for r in requests) else None
            for b, r in enumerate(requests):
                for i, add in r.bias:
                    logits[b, i] += add
            for b, idx in bans:  # BANNED_LOGIT after the division by the temperature, as the loss
                logits[b, idx] = BANNED_LOGIT * float(temps[b])
            logp = torch.log_softmax(logits / temps[:, None], dim=-1)
            greedy = [r.temperature <= 0 for r in requests]
            if all(greedy):
                toks_t = logits.argmax(dim=-1)
            elif not any(greedy):
                toks_t = draw(logp, gens)
            else:
                toks_t = torch.where(torch.tensor(greedy), logits.argmax(dim=-1), draw(logp, gens))
            lps = logp.gather(1, toks_t[:, None]).squeeze(1).tolist()
            if raw is not None:
                raw_lps = raw.gather(1, toks_t[:, None]).squeeze(1).tolist()
                lps = [raw_lps[b] if r.raw_logprobs else lps[b] for b, r in enumerate(requests)]
            toks = toks_t.tolist()
            feed = []
            for b, r in enumerate(requests):
                if done[b]:
                    feed.append(pad_id)
                    continue
                tok = int(toks[b])
                new[b].append(tok)
                logps[b].append(float(lps[b]))
                feed.append(tok)
                if tok in r.stop_ids or len(new[b]) >= r.max_new_tokens:
                    done[b] = True
            if all(done):
                break
            live = torch.tensor([0 if d else 1 for d in done], dtype=torch.long, device=device)
            # a row that finished feeds nothing more (its last token is never fed): mask 0
            ids = torch.tensor([[t if not done[b] else pad_id] for b, t in enumerate(feed)], device=device)
            mask = torch.cat([mask, live[:, None]], dim=1)
            pos = torch.tensor([[p] for p in next_pos], dtype=torch.long, device=device)
            next_pos = [p + (0 if done[b] else 1) for b, p in enumerate(next_pos)]
    timing["decode_s"] = timing.get("decode_s", 0.0) + time.perf_counter() - t_decode
    layers = _layers(cache)
    results = []
    for b, (c, d) in enumerate(zip(clen, dlen, strict=True)):
        # the row's tokens are two runs: its cache (left of cmax) and its feed with every new token
        # fed (all but the last); copied as slices (an index_select is ~10x slower on a CPU)
        fed = slice(cmax + dmax - d, cmax + dmax + len(new[b]) - 1)
        kv = [
            (torch.cat([k[b : b + 1, :, cmax - c : cmax], k[b : b + 1, :, fed]], dim=2),
             torch.cat([v[b : b + 1, :, cmax - c : cmax], v[b : b + 1, :, fed]], dim=2))
            for k, v in layers
        ]  # fmt: skip
        results.append(GenResult(new[b], logps[b], kv))
    return results


_WAKE = object()
"""Put on the queue to make the worker look again at how many requests it expects."""


class BatchedGenerator:
    """One worker thread that runs `generate_batch` on whatever requests arrived together.

    `submit` returns a future; requests arriving while a batch runs wait for the next one. When the
    caller says how many sequences are live (`expect`: the episodes in flight, each of which submits
    its next turn after its environment step), a batch starts as soon as every one of them is
    waiting (lockstep: every batch full, and no wait at all for one episode alone), or after
    `max_wait_s` (a safety net, should a live episode never submit). Without a count, the worker
    gathers until no new request came for `gather_s` (or `max_batch` are waiting)."""

    def __init__(
        self,
        model: Any,
        pad_id: int = 0,
        max_batch: int = 64,
        gather_s: float = 0.1,
        max_wait_s: float = 10.0,
    ) -> None:
        self.model, self.pad_id = model, pad_id
        self.max_batch, self.gather_s, self.max_wait_s = max_batch, gather_s, max_wait_s
        self.stats = BatchStats()
        self._expected: int | None = None
        self._prefixes: list[Prefix] = []
        """Prompt starts prefilled for earlier batches (the newest last): later fresh requests
        starting alike reuse them (a step's first turns can arrive in more than one batch)."""
        self._q: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="pear-batched-generator", daemon=True)
        self._thread.start()

    def new_weights(self) -> None:
        """The model's weights changed (a GRPO update): the prompt starts prefilled with the old ones
        are dropped, or the next flights would sample from a stale prefix (log mu of other weights
        than the trainer's log pi: a drift of 0.06 measured after one update of SmolLM2-135M).
        Called between steps, when no batch is in flight."""
        self._prefixes = []

    def submit(self, request: GenRequest) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._q.put((request, fut))
        return fut

    def expect(self, live: int | None) -> None:
        """`live` sequences will each submit before the next batch (None: unknown, gather by quiet)."""
        self._expected = live
        self._q.put(_WAKE)

    def _gather(self, first: Any) -> tuple[list[Any], bool]:
        """The batch that starts with `first`, and whether close was asked meanwhile."""
        batch = [first]
        deadline = time.monotonic() + self.max_wait_s
        while len(batch) < self.max_batch:
            expected = self._expected
            if expected is not None and len(batch) >= expected:
                break
            timeout = self.gather_s if expected is None else deadline - time.monotonic()
            if timeout <= 0:
                break
            try:
                item = self._q.get(timeout=timeout)
            except queue.Empty:
                break
            if item is None:
                return batch, True
            if item is not _WAKE:
                batch.append(item)
        return batch, False

    def _work(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            if first is _WAKE:
                continue
            batch, stop = self._gather(first)
            t0 = time.perf_counter()
            try:
                reqs = [r for r, _ in batch]
                timing: dict[str, float] = {}
                computed = share_prefix(self.model, reqs, self._prefixes, timing)
                self._prefixes = (self._prefixes + computed)[-MAX_KNOWN_PREFIXES:]
                results = generate_batch(self.model, reqs, self.pad_id, shared=False, timing=timing)
                # the shared start counts as prefill too (and the caches cut out after decoding)
                timing["prefill_s"] = time.perf_counter() - t0 - timing["decode_s"]
                self.stats.timed(timing)
            except Exception as exc:  # every waiting episode gets the error, the worker lives on
                for _, fut in batch:
                    fut.set_exception(exc)
            else:
                self.stats.add(len(batch), sum(len(r.ids) for r in results), time.perf_counter() - t0)
                for (_, fut), res in zip(batch, results, strict=True):
                    fut.set_result(res)
            if stop:
                return

    def close(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=30)
