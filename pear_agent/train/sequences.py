"""One episode as ONE token sequence in the model's own chat template, grown turn by turn.

The in-process generator and the trainer share this builder, so the model is trained on exactly
the tokens it was prompted with and sampled: each prompt is the text the chat template adds after
what is already in the sequence (append-only, like a server's prefix cache), and each reply is the
sampled token ids as they came (never the text re-tokenised). A reply's tokens are what the model
generates for it: its text's tokens and the end-of-turn token (recorded replies without token ids
are tokenised so, for supervised warm start). The loss mask covers exactly the replies' tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pear_agent.protocol.history import window
from pear_agent.train.chat_template import turn_end_ids
from pear_agent.train.vision import decode_image, is_processor, vision_messages


class TemplateDriftError(ValueError):
    """The chat template rewrote what was already in the sequence (not append-only)."""


def message_text(message: dict[str, Any]) -> str:
    """A message's text; image parts are refused (the local trainer reads text: --observation state)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for c in content or []:
        if c.get("type") == "text":
            parts.append(c["text"])
        else:
            raise ValueError(
                "this episode has camera images; the text-model trainer reads text only "
                "(record arm episodes with --observation state)"
            )
    return "\n".join(parts)


def text_messages(messages: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": message_text(m)} for m in messages]


@dataclass
class ChatSequence:
    """The episode's tokens so far, their loss mask (1 on reply tokens), and the rendered text."""

    tokenizer: Any
    ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    reply_token_counts: list[int] = field(default_factory=list)
    """Tokens of each reply (its text and its end-of-turn token, as generated)."""
    reply_spans: list[tuple[int, int]] = field(default_factory=list)
    """[start, end) of each reply in `ids`: where the loss must be, recorded independently of `mask`."""
    _messages: list[dict[str, Any]] = field(default_factory=list)
    _text: str = ""
    _raw: list[dict[str, Any]] = field(default_factory=list)
    processor: Any = None
    """A vision-language model's processor (`pear_agent.train.vision`): images enter the sequence as
    the model's image tokens (never in the loss); None for a text model."""
    images: list[str] = field(default_factory=list)
    """The image URLs in the sequence, in order."""
    vision: list[dict[str, Any]] = field(default_factory=list)
    """The processor's pixel inputs for each prompt that added images (pixel_values, image_grid_thw)."""

    def __post_init__(self) -> None:
        if is_processor(self.tokenizer):  # a processor given where a tokenizer goes
            self.processor, self.tokenizer = self.tokenizer, self.tokenizer.tokenizer

    def _converted(self, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
        if self.processor is not None:
            return vision_messages(messages)
        return text_messages(messages), []

    def extends(self, messages: list[dict[str, Any]]) -> bool:
        """Do `messages` start with everything already in the sequence (append-only)? False once a
        history window (`--history K`) has slid: the turn starts a new sequence."""
        n = len(self._messages)
        return self._converted(messages)[0][:n] == self._messages

    def prompt(self, messages: list[dict[str, Any]]) -> list[int]:
        """Append the messages not yet in the sequence and the generation prompt; the ids to generate
        from (the whole sequence). An empty sequence takes earlier replies as context (a history
        window's view: their template tokens, never in the loss); later, replies enter only through
        `add_reply`."""
        msgs, urls = self._converted(messages)
        n = len(self._messages)
        if msgs[:n] != self._messages:
            raise TemplateDriftError("the conversation changed under the sequence (an earlier turn differs)")
        if n and any(m["role"] == "assistant" for m in msgs[n:]):
            raise ValueError("replies enter the sequence through add_reply, not as prompt messages")
        templater = self.processor if self.processor is not None else self.tokenizer
        text = templater.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        if not text.startswith(self._text):
            at = next(
                (i for i, (a, b) in enumerate(zip(self._text, text, strict=False)) if a != b),
                min(len(self._text), len(text)),
            )
            raise TemplateDriftError(
                "the chat template is not append-only here (it rewrites earlier turns); pear-agent trains "
                f"a whole episode as one sequence (at character {at}: the sequence has "
                f"{self._text[at : at + 40]!r}, the template {text[at : at + 40]!r})"
            )
        delta = text[len(self._text) :]
        if urls[: len(self.images)] != self.images:
            raise TemplateDriftError("the conversation's earlier images changed under the sequence")
        fresh = urls[len(self.images) :]
        if fresh:
            new = self._encode_images(delta, fresh)
        else:
            new = self.tokenizer(delta, add_special_tokens=False)["input_ids"] if delta else []
        self.ids += new
        self.mask += [0] * len(new)
        self._messages = msgs
        self._raw = [dict(m) for m in messages]
        self._text = text
        return list(self.ids)

    def _encode_images(self, delta: str, urls: list[str]) -> list[int]:
        """The new text's ids with each image placeholder expanded into its image's tokens."""
        enc = self.processor(
            text=[delta],
            images=[decode_image(u) for u in urls],
            add_special_tokens=False,
            return_tensors="pt",
        )
        self.images += urls
        self.vision.append({k: v for k, v in enc.items() if k not in ("input_ids", "attention_mask")})
        return enc["input_ids"][0].tolist()

    def vision_inputs(self) -> dict[str, Any]:
        """The pixel inputs of every image in the sequence, concatenated in order ({} without images)."""
        import torch  # optional: torch

        if not self.vision:
            return {}
        out = {}
        for k in self.vision[0]:
            parts = [v[k] for v in self.vision]
            # batched per-image tensors [1, images, ...] (Idefics3, SmolVLM) join along the images;
            # flat ones (Qwen-VL's patches and grids) along the first axis
            dim = 1 if parts[0].dim() >= 4 and parts[0].shape[0] == 1 else 0
            out[k] = torch.cat(parts, dim=dim)
        return out

    def add_reply(self, token_ids: list[int], text: str) -> None:
        """The reply's tokens as sampled (ending with the end-of-turn token when it stopped there)."""
        start = len(self.ids)
        self.ids += list(token_ids)
        self.mask += [1] * len(token_ids)
        self.reply_token_counts.append(len(token_ids))
        self.reply_spans.append((start, len(self.ids)))
        content: Any = text if self.processor is None else [{"type": "text", "text": text}]
        self._messages = [*self._messages, {"role": "assistant", "content": content}]
        self._raw = [*self._raw, {"role": "assistant", "content": text}]
        self._text += self.tokenizer.decode(token_ids, skip_special_tokens=False)

    def add_text_reply(self, text: str) -> None:
        """A recorded reply without token ids (a teacher's): its text's tokens and the turn's end."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + turn_end_ids(self.tokenizer)[:1]
        self.add_reply(ids, text)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation in the sequence as it was given (images included), replies included."""
        return list(self._raw)

    @property
    def masked_tokens(self) -> int:
        return sum(self.mask)

    def check_mask(self) -> None:
        """The loss covers exactly the replies' tokens (and nothing else): the mask is compared
        position by position with the replies' spans, which are recorded apart from it."""
        if len(self.mask) != len(self.ids):
            raise AssertionError(f"loss mask has {len(self.mask)} entries for {len(self.ids)} tokens")
        want = [0] * len(self.ids)
        for start, end in self.reply_spans:
            want[start:end] = [1] * (end - start)
        if self.mask != want:
            bad = next(i for i, (a, b) in enumerate(zip(self.mask, want, strict=True)) if a != b)
            raise AssertionError(
                f"loss mask covers {self.masked_tokens} tokens, the replies hold {sum(want)}; "
                f"first difference at token {bad} (mask {self.mask[bad]}, reply {want[bad]})"
            )


@dataclass
class EpisodeTokens:
    """A training sequence: ids, loss mask, and per-token sampling facts for the RL loss."""

    input_ids: list[int]
    mask: list[int]
    reply_tokens: int
    old_logprobs: list[float] | None = None
    """log mu(token) of the sampling policy on masked positions (0 elsewhere); None when unknown."""
    versions: list[int] | None = None
    """Policy version that sampled each masked token (-1 elsewhere)."""
    vision: dict[str, Any] = field(default_factory=dict)
    """A vision-language model's pixel inputs for the sequence's images (pixel_values, image_grid_thw)."""


def _trace(traces: list[dict[str, Any] | None] | None, k: int) -> dict[str, Any] | None:
    """The k-th assistant message's sampling trace, or None."""
    return traces[k] if traces is not None and k < len(traces) else None


def _add_reply(
    seq: ChatSequence,
    message: dict[str, Any],
    trace: dict[str, Any] | None,
    old: list[float],
    versions: list[int],
    *,
    unknown: float,
) -> bool:
    """Pad `old` and `versions` over the prompt tokens `seq` grew by, then add the reply (the
    sampled ids where `trace` has them) with its sampling log-probabilities (`unknown` where none
    were logged) and policy version (-1 where it was not sampled). True when its log-probabilities
    are known."""
    grow = len(seq.ids) - len(old)
    old += [0.0] * grow
    versions += [-1] * grow
    text = message_text(message)
    if trace and trace.get("ids"):
        ids = list(trace["ids"])
        seq.add_reply(ids, text)
        lp = trace.get("logprobs")
        ok = lp is not None and len(lp) == len(ids)
        old += list(lp) if ok else [unknown] * len(ids)
        versions += [int(trace.get("policy_version") or 0)] * len(ids)
        return ok
    seq.add_text_reply(text)
    n = seq.reply_token_counts[-1]
    old += [unknown] * n
    versions += [-1] * n
    return False


def episode_tokens(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    traces: list[dict[str, Any] | None] | None = None,
    max_tokens: int | None = None,
) -> EpisodeTokens:
    """Build one episode's sequence from its messages; replies with a trace use the sampled ids.

    `traces[k]` belongs to the k-th assistant message ({"ids", "logprobs", "policy_version"}).
    """
    seq = ChatSequence(tokenizer)
    pending: list[dict[str, Any]] = []
    old: list[float] = []
    versions: list[int] = []
    k = 0
    for m in messages:
        if m["role"] != "assistant":
            pending.append(m)
            continue
        if pending:
            seq.prompt(seq.messages + pending)
        pending = []
        _add_reply(seq, m, _trace(traces, k), old, versions, unknown=float("nan"))
        k += 1
    seq.check_mask()
    ids, mask = seq.ids, seq.mask
    if max_tokens is not None and len(ids) > max_tokens:
        raise ValueError(f"episode of {len(ids)} tokens exceeds the {max_tokens}-token training limit")
    has_old = traces is not None and not any(v != v for v, b in zip(old, mask, strict=True) if b)
    return EpisodeTokens(
        ids,
        mask,
        seq.masked_tokens,
        old_logprobs=old if has_old else None,
        versions=versions,
        vision=seq.vision_inputs(),
    )


def episode_sequences(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    traces: list[dict[str, Any] | None] | None = None,
    history: int | None = None,
    history_older: str = "line",
    max_tokens: int | None = None,
) -> list[EpisodeTokens]:
    """The training sequences of one episode as the model saw it: without a history window
    (`history` None) the one append-only sequence of `episode_tokens`; with `--history K`, each
    turn's prompt is the window the model was sent (`pear_agent.protocol.history.window`), and a
    new sequence starts wherever the window slid (the in-process and token-server samplers start
    one there too), each reply trained once, in the sequence that sampled it."""
    if history is None:
        return [episode_tokens(tokenizer, messages, traces, max_tokens)]

    out: list[EpisodeTokens] = []
    seq: ChatSequence | None = None
    old: list[float] = []
    versions: list[int] = []
    known = True

    def close() -> None:
        if seq is None:
            return
        seq.check_mask()
        if max_tokens is not None and len(seq.ids) > max_tokens:
            raise ValueError(
                f"sequence of {len(seq.ids)} tokens exceeds the {max_tokens}-token training limit"
            )
        out.append(
            EpisodeTokens(
                seq.ids,
                seq.mask,
                seq.masked_tokens,
                old_logprobs=old if known and traces is not None else None,
                versions=versions,
                vision=seq.vision_inputs(),
            )
        )

    k = 0
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        view = window(messages[:i], history, history_older)
        if seq is None or not seq.extends(view):
            close()
            seq, old, versions, known = ChatSequence(tokenizer), [], [], True
        if len(view) > len(seq.messages):
            seq.prompt(view)
        known = _add_reply(seq, m, _trace(traces, k), old, versions, unknown=0.0) and known
        k += 1
    close()
    return out
