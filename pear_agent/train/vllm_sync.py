"""Weight sync with a vLLM server during GRPO on GPUs: each new policy version is a LoRA adapter
folder the server loads at run time, and rollouts ask for it by name.

vLLM's documented runtime LoRA API (server started with `--enable-lora` and the environment
variable `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`): `POST /v1/load_lora_adapter` with
`{"lora_name", "lora_path"}` and `POST /v1/unload_lora_adapter` with `{"lora_name"}`; a request
then names the adapter as its `model`. The adapter folder must be readable by the server (a shared
volume). Rollouts through `OpenAIPolicy(ModelSettings(model=name, logprobs=True,
extra_body={"return_tokens_as_token_ids": True}))` record each reply's ids and log-probabilities
with the version that sampled them; the trainer's server generator asks token-in, token-out
(`pear_agent.train.token_server`). `pear-agent train serve` answers the same API (its test runs
GRPO steps against it in its own process); `bash scripts/gpu_check.sh` runs it against vLLM.

Adapter names are fresh per trainer run (`pear-<run id>-v<version>`): vLLM refuses a name already
loaded, so a restarted trainer reusing `...-v0` against a server still holding it would fail. The
server's LoRA rank limit (`--max-lora-rank`, vLLM's default 16) is checked at start: the first
adapter is published before any rollout, and a refusal names the setting.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any


class WeightSyncError(ValueError):
    """The server refused or could not be reached: one line naming the cause."""


class VLLMAdapterSync:
    """Loads each policy version's adapter into a running vLLM server; unloads versions too old to
    sample from (`keep` newest stay loaded, so rollouts in flight keep their weights)."""

    def __init__(
        self, base_url: str, prefix: str | None = None, keep: int = 3, timeout_s: float = 60.0
    ) -> None:
        self.base = base_url.rstrip("/")
        # a fresh name per run: a server still holding another run's `...-v0` refuses the name
        self.prefix = prefix or f"pear-{os.getpid():x}{uuid.uuid4().hex[:6]}"
        self.keep, self.timeout_s = keep, timeout_s
        self.loaded: list[str] = []
        self.lora_rank: int | None = None
        """The recipe's LoRA rank (`model.lora.r`), once `check_server` is told it."""

    def check_server(self, lora_rank: int) -> list[str]:
        """The server answers and lists its models (before any adapter): their ids. The rank limit is
        checked by the first `publish` (vLLM exposes no endpoint for it)."""
        self.lora_rank = lora_rank
        try:
            with urllib.request.urlopen(f"{self.base}/models", timeout=self.timeout_s) as r:
                body = json.loads(r.read().decode())
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WeightSyncError(f"cannot reach vLLM at {self.base}: {reason}") from None
        return [m.get("id") for m in body.get("data") or []]

    def name(self, version: int) -> str:
        return f"{self.prefix}-v{version}"

    def _post(self, path: str, body: dict[str, Any]) -> None:
        req = urllib.request.Request(
            f"{self.base}/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s):
                return
        except urllib.error.HTTPError as exc:
            text = " ".join(exc.read().decode(errors="replace").split())[:300]
            if "max_lora_rank" in text or "max-lora-rank" in text:
                raise WeightSyncError(
                    f"vLLM refused the adapter (HTTP {exc.code}): {text}; start vLLM with --max-lora-rank "
                    f"{self.lora_rank or 64} or more (its default is 16), or lower model.lora.r"
                ) from None
            if exc.code in (404, 405) and path.endswith("lora_adapter"):
                raise WeightSyncError(
                    f"vLLM at {self.base} has no runtime LoRA API (HTTP {exc.code} on {path}): start it with "
                    "--enable-lora and the environment variable VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
                ) from None
            raise WeightSyncError(f"vLLM refused {path} (HTTP {exc.code}): {text}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise WeightSyncError(f"cannot reach vLLM at {self.base}: {reason}") from None

    def publish(self, version: int, adapter_dir: Path) -> str:
        """Load the adapter of `version` (its folder) and unload the oldest beyond `keep`; its name."""
        name = self.name(version)
        self._post("load_lora_adapter", {"lora_name": name, "lora_path": str(Path(adapter_dir).resolve())})
        self.loaded.append(name)
        while len(self.loaded) > self.keep:
            self._post("unload_lora_adapter", {"lora_name": self.loaded.pop(0)})
        return name


def serve_command(recipe: Any, port: int = 8000, max_model_len: int = 8192) -> list[str]:
    """`vllm serve` for a recipe's GRPO on one GPU shared with the trainer: the base model, runtime
    LoRA at the recipe's rank, prefix caching (an episode's turns share their prefix), the recipe's
    memory split. Run it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in the environment."""
    g, lora = recipe.grpo, recipe.model.lora
    cmd = ["vllm", "serve", recipe.model.name, "--port", str(port), "--dtype", recipe.model.dtype]
    cmd += ["--gpu-memory-utilization", str(g.vllm_gpu_memory_utilization), "--enable-prefix-caching"]
    cmd += ["--max-model-len", str(max_model_len)]
    # the log-probabilities of the distribution sampled (temperature, logit bias), not the raw logits'
    # (vLLM's default): they are log mu in the loss (`token_server.check_processed_logprobs` probes it)
    cmd += ["--logprobs-mode", "processed_logprobs"]
    if lora is not None:
        cmd += [
            "--enable-lora",
            "--max-lora-rank",
            str(lora.r),
            "--max-loras",
            str(g.rollout_lag + g.max_staleness + 1),
        ]
    return cmd


def cap_trainer_memory(recipe: Any) -> float | None:
    """On a CUDA GPU shared with vLLM, cap this process's allocations at the rest of the split (minus
    a 5% margin for the CUDA context); the fraction set, or None without CUDA."""
    import torch  # optional: torch

    if not torch.cuda.is_available():
        return None
    fraction = max(0.05, 1.0 - recipe.grpo.vllm_gpu_memory_utilization - 0.05)
    torch.cuda.set_per_process_memory_fraction(fraction)
    return fraction
