"""Weight sync with a vLLM server during GRPO on GPUs: each new policy version is a LoRA adapter
folder the server loads at run time, and rollouts ask for it by name.

vLLM's documented runtime LoRA API (server started with `--enable-lora` and the environment
variable `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`): `POST /v1/load_lora_adapter` with
`{"lora_name", "lora_path"}` and `POST /v1/unload_lora_adapter` with `{"lora_name"}`; a request
then names the adapter as its `model`. The adapter folder must be readable by the server (a shared
volume). Rollouts through `OpenAIPolicy(ModelSettings(model=name, logprobs=True,
extra_body={"return_tokens_as_token_ids": True}))` record each reply's ids and log-probabilities
with the version that sampled them. Untested against a real vLLM here (no GPU): the requests
follow the documented API; the test checks them against a stand-in that answers as documented.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class WeightSyncError(ValueError):
    """The server refused or could not be reached: one line naming the cause."""


class VLLMAdapterSync:
    """Loads each policy version's adapter into a running vLLM server; unloads versions too old to
    sample from (`keep` newest stay loaded, so rollouts in flight keep their weights)."""

    def __init__(
        self, base_url: str, prefix: str = "pear-policy", keep: int = 3, timeout_s: float = 60.0
    ) -> None:
        self.base = base_url.rstrip("/")
        self.prefix, self.keep, self.timeout_s = prefix, keep, timeout_s
        self.loaded: list[str] = []

    def name(self, version: int) -> str:
        return f"{self.prefix}-v{version}"

    def _post(self, path: str, body: dict[str, Any]) -> None:
        import json
        import urllib.error
        import urllib.request

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
