"""The model under training: load (with a LoRA adapter through PEFT, or fully trainable), snapshot
the trainable weights of a policy version, and save checkpoints that `run`/`bench` can fly."""

from __future__ import annotations

import copy
import ctypes
import ctypes.util
import json
from pathlib import Path
from typing import Any

from pear_agent.train.config import ModelConfig
from pear_agent.train.model_files import CHECKPOINT_META, load_model

MMAP_THRESHOLD_BYTES = 1 << 20


def return_freed_memory() -> bool:
    """Blocks of 1 MB and more are mmapped and go back to the system when freed (glibc's mallopt
    M_MMAP_THRESHOLD). glibc raises that threshold each time a large block is freed, after which
    the activations a training step frees stay in the heap: a 4,300-token step of SmolLM2-135M kept
    5.9 GB resident with it and 1.7 GB without (benchmarks/train_memory.py). False where there is
    no glibc (nothing to do)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(-3, MMAP_THRESHOLD_BYTES))  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        return False


def trainable_model(cfg: ModelConfig, init: str | None = None) -> tuple[Any, Any, str]:
    """(model, tokenizer, base model name). `init` continues from a checkpoint (its adapter stays
    trainable); else the base gets a fresh LoRA adapter (or is fully trainable without `lora`)."""
    return_freed_memory()
    if init is not None:
        meta_path = Path(init) / CHECKPOINT_META
        if not meta_path.is_file():
            raise ValueError(f"{init} is not a pear-agent checkpoint (no {CHECKPOINT_META})")
        meta = json.loads(meta_path.read_text())
        if meta.get("adapter"):
            from peft import PeftModel  # optional: peft

            base, tok = load_model(meta["base_model"], dtype=cfg.dtype)
            model = PeftModel.from_pretrained(base, init, is_trainable=True)
            return model, tok, meta["base_model"]
        model, tok = load_model(init, dtype=cfg.dtype)
        model.train()
        return model, tok, meta["base_model"]
    model, tok = load_model(cfg.name, dtype=cfg.dtype)
    if cfg.lora is not None:
        from peft import LoraConfig, get_peft_model  # optional: peft

        lora = LoraConfig(
            r=cfg.lora.r,
            lora_alpha=cfg.lora.alpha,
            lora_dropout=cfg.lora.dropout,
            target_modules=cfg.lora.target_modules,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    model.train()
    return model, tok, cfg.name


def snapshot(model: Any) -> dict[str, Any]:
    """A copy of the trainable weights (a LoRA adapter: a few MB): one policy version."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_snapshot(model: Any, snap: dict[str, Any]) -> dict[str, Any]:
    """Put `snap`'s weights in place; returns the weights it replaced (to swap back)."""
    import torch  # optional: torch

    current = snapshot(model)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n in snap:
                p.copy_(snap[n])
    return current


def save_checkpoint(
    model: Any, tokenizer: Any, folder: Path, base_model: str, step: int, merge: bool = False, **info: Any
) -> Path:
    """An adapter (or a merged model with `merge`) plus the tokenizer and `pear_checkpoint.json`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    is_peft = hasattr(model, "peft_config")
    if is_peft and merge:
        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(folder)
    else:
        model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    meta = {"base_model": base_model, "adapter": bool(is_peft and not merge), "step": step, **info}
    (folder / CHECKPOINT_META).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder
