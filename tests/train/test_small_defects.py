"""Small defects, each checked where it could fail: the TRL pin, the missing --init
note, and a hub model that is not in the cache."""

from __future__ import annotations

import configparser
from pathlib import Path

import pytest

from pear_agent.train.config import load_recipe

ROOT = Path(__file__).resolve().parents[2]


def _train_extra_pin(package: str) -> str:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    for line in cfg["options.extras_require"]["train"].splitlines():
        if line.strip().startswith(f"{package}>="):
            return line.strip().split(">=", 1)[1]
    raise AssertionError(f"setup.cfg's train extra has no {package}>= pin")


def test_setup_cfg_pins_the_trl_the_mask_check_needs():
    import trl
    from packaging.version import Version

    from pear_agent.train.sft import MIN_TRL, check_trl_version

    assert Version(_train_extra_pin("trl")) >= Version(MIN_TRL)
    check_trl_version()  # the installed one passes
    assert Version(trl.__version__) >= Version(MIN_TRL)
    with pytest.raises(ValueError, match=r"trl>=1\.7 \(installed: 1\.0\.0\)"):
        check_trl_version("1.0.0")


def test_grpo_without_init_on_a_recipe_with_a_warm_start_says_so():
    from pear_agent.train.grpo import warm_start_note

    study = load_recipe("roadster_study")
    note = warm_start_note(study, None)
    assert note is not None and "--init" in note and "runs/teacher-roadster" in note
    assert warm_start_note(study, "runs/x/checkpoint-sft") is None
    assert warm_start_note(load_recipe("libero_pear"), None) is None  # PEAR uses no warm start


def test_a_hub_model_not_in_the_cache_is_one_line_with_the_command(monkeypatch, tmp_path):
    from pear_agent.train.model_files import load_model

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError) as err:
        load_model("pear-agent-tests/no-such-model")
    msg = str(err.value)
    assert "\n" not in msg and "hf download pear-agent-tests/no-such-model" in msg


def test_freed_training_memory_goes_back_to_the_system():
    """glibc takes the fixed mmap threshold (what keeps a training step's freed activations from
    staying resident); elsewhere the call says it did nothing."""
    import platform

    from pear_agent.train.models import return_freed_memory

    done = return_freed_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert done is True
    else:
        assert done in (True, False)
