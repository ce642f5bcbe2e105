"""Generation batched across the episodes in flight, in this process (transformers, CPU or GPU).

A GRPO step flies all its episodes at once (`pear_agent.episodes`); each episode's
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


def prefill(model: Any, ids: list[int]) -> KV:
    """The cache of `ids` (one sequence, one forward pass)."""
    import torch
    from transformers import DynamicCache

    device = next(model.parameters()).device
    cache = DynamicCache()
    with torch.no_grad():
        model(input_ids=torch.tensor([ids], device=device), use_cache=True, logits_to_keep=1,
              **{_cache_kwarg(model): cache})  # fmt: skip
    return [(k, v) for k, v in _layers(cache)]


Prefix = tuple[list[int], KV]


def share_prefix(model: Any, requests: list[GenRequest], known: Prefix | None = None) -> Prefix | None:
    """Requests without a cache whose prompts start alike (a GRPO group's flights share their whole
    first prompt; every flight of a task shares the system prompt) get the common part's cache,
    computed once, and feed only the rest; `known` (an earlier batch's prefix) serves the part of
    it a prompt starts with. Returns the prefix computed here, or None."""
    fresh = [r for r in requests if r.kv is None]
    if known is not None:
        ids, kv = known
        for r in fresh:
            n = min(_common_prefix([ids, r.feed]), len(r.feed) - 1)
            if n >= MIN_SHARED_PREFIX:
                r.kv, r.feed = [(k[:, :, :n], v[:, :, :n]) for k, v in kv], r.feed[n:]
        fresh = [r for r in fresh if r.kv is None]
    if not fresh:
        return None
    if len(fresh) == 1:  # alone: its prompt but the last token, kept for the requests to come
        n = len(fresh[0].feed) - 1
    else:
        n = min(_common_prefix([r.feed for r in fresh]), min(len(r.feed) for r in fresh) - 1)
    if n < MIN_SHARED_PREFIX:
        return None
    ids = list(fresh[0].feed[:n])
    kv = prefill(model, ids)
    for r in fresh:
        r.kv, r.feed = kv, r.feed[n:]
    return ids, kv


def generate_batch(
    model: Any, requests: list[GenRequest], pad_id: int = 0, shared: bool = True
) -> list[GenResult]:
    """Decode every request together, one forward pass per token for the whole batch (the prompts'
    common start prefilled once when `shared`)."""
    import torch
    from transformers import DynamicCache

    from pear_agent.train.loss import BANNED_LOGIT

    device = next(model.parameters()).device
    n = len(requests)
    if n == 0:
        return []
    bans = [(b, torch.tensor(sorted(r.banned), dtype=torch.long)) for b, r in enumerate(requests) if r.banned]
    if any(not r.feed for r in requests):
        raise ValueError("every request needs at least one new token to feed")
    if shared:
        share_prefix(model, requests)
    clen = [0 if r.kv is None else int(r.kv[0][0].shape[2]) for r in requests]
    dlen = [len(r.feed) for r in requests]
    cmax, dmax = max(clen), max(dlen)
    cache = DynamicCache()
    if cmax:
        proto = next(r.kv for r in requests if r.kv is not None)
        data = []
        for layer, (k0, v0) in enumerate(proto):
            ks, vs = [], []
            for r, c in zip(requests, clen, strict=True):
                k = torch.zeros((1, k0.shape[1], cmax, k0.shape[3]), dtype=k0.dtype, device=k0.device)
                v = torch.zeros((1, v0.shape[1], cmax, v0.shape[3]), dtype=v0.dtype, device=v0.device)
                if c:
                    k[:, :, cmax - c :] = r.kv[layer][0]  # type: ignore[index]
                    v[:, :, cmax - c :] = r.kv[layer][1]  # type: ignore[index]
                ks.append(k)
                vs.append(v)
            data.append((torch.cat(ks), torch.cat(vs)))
        cache = DynamicCache(ddp_cache_data=data)
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
            logits = out.logits[:, -1].float().cpu()
            # one softmax for every row; each row drawn with its own seeded generator, so a row
            # samples the same token alone or in any batch
            temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in requests])
            for b, idx in bans:  # BANNED_LOGIT after the division by the temperature, as the loss
                logits[b, idx] = BANNED_LOGIT * float(temps[b])
            logp = torch.log_softmax(logits / temps[:, None], dim=-1)
            probs = logp.exp()
            sampled = torch.tensor(
                [
                    int(torch.multinomial(probs[b], 1, generator=gens[b]).item())
                    if r.temperature > 0 and not done[b]
                    else 0
                    for b, r in enumerate(requests)
                ]
            )
            greedy = torch.tensor([r.temperature <= 0 for r in requests])
            toks_t = torch.where(greedy, logits.argmax(dim=-1), sampled)
            lps = logp.gather(1, toks_t[:, None]).squeeze(1).tolist()
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
    layers = _layers(cache)
    results = []
    for b in range(n):
        keep = torch.nonzero(mask[b]).squeeze(-1).to(layers[0][0].device)
        kv = [(k[b : b + 1].index_select(2, keep), v[b : b + 1].index_select(2, keep)) for k, v in layers]
        results.append(GenResult(new[b], logps[b], kv))
    return results


class BatchedGenerator:
    """One worker thread that runs `generate_batch` on whatever requests arrived together.

    `submit` returns a future; requests arriving while a batch runs wait for the next one. The
    worker gathers until no new request came for `gather_s` (or `max_batch` are waiting), so the
    episodes of a step that ask at about the same time share a batch."""

    def __init__(self, model: Any, pad_id: int = 0, max_batch: int = 64, gather_s: float = 0.1) -> None:
        self.model, self.pad_id = model, pad_id
        self.max_batch, self.gather_s = max_batch, gather_s
        self.stats = BatchStats()
        self._prefix: tuple[list[int], KV] | None = None
        """The last prompt start prefilled for a batch: later fresh requests starting alike reuse it
        (a step's first turns can arrive in more than one batch)."""
        self._q: queue.Queue[tuple[GenRequest, concurrent.futures.Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._work, name="pear-batched-generator", daemon=True)
        self._thread.start()

    def submit(self, request: GenRequest) -> concurrent.futures.Future:
        fut: concurrent.futures.Future = concurrent.futures.Future()
        self._q.put((request, fut))
        return fut

    def _work(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch = [first]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    item = self._q.get(timeout=self.gather_s)
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            t0 = time.perf_counter()
            try:
                reqs = [r for r, _ in batch]
                computed = share_prefix(self.model, reqs, self._prefix)
                self._prefix = computed or self._prefix
                results = generate_batch(self.model, reqs, self.pad_id, shared=False)
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
