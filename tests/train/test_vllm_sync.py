"""The vLLM weight-sync client against a stand-in that answers as vLLM's runtime LoRA API is
documented to (duplicate names refused, unknown names not found). No real vLLM runs here."""

from __future__ import annotations

import pytest

from tests.servers import serve_app

pytestmark = pytest.mark.wallclock


@pytest.fixture()
def vllm_standin():
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, PlainTextResponse

    app = FastAPI()
    loaded: dict[str, str] = {}

    @app.post("/v1/load_lora_adapter")
    async def load(body: dict) -> object:
        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            return JSONResponse({"error": "Both 'lora_name' and 'lora_path' must be provided."}, 400)
        if name in loaded:
            return JSONResponse({"error": f"The lora adapter '{name}' has already been loaded."}, 400)
        loaded[name] = path
        return PlainTextResponse(f"Success: LoRA adapter '{name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload(body: dict) -> object:
        name = body.get("lora_name")
        if name not in loaded:
            return JSONResponse({"error": f"The lora adapter '{name}' cannot be found."}, 404)
        del loaded[name]
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")

    with serve_app(app) as url:
        yield url, loaded


def test_each_version_is_loaded_and_the_oldest_unloaded(vllm_standin, tmp_path):
    from pear_agent.train.vllm_sync import VLLMAdapterSync, WeightSyncError

    url, loaded = vllm_standin
    sync = VLLMAdapterSync(url, keep=2)
    for v in range(4):
        assert sync.publish(v, tmp_path / f"checkpoint-{v}") == f"{sync.prefix}-v{v}"
    assert sorted(loaded) == [f"{sync.prefix}-v2", f"{sync.prefix}-v3"]
    assert loaded[f"{sync.prefix}-v3"] == str((tmp_path / "checkpoint-3").resolve())
    with pytest.raises(WeightSyncError, match=r"HTTP 400.*already been loaded"):
        sync.publish(3, tmp_path / "checkpoint-3")


def test_a_dead_server_is_one_clear_line(tmp_path):
    from pear_agent.train.vllm_sync import VLLMAdapterSync, WeightSyncError

    with pytest.raises(WeightSyncError, match=r"cannot reach vLLM at http://127\.0\.0\.1:9/v1"):
        VLLMAdapterSync("http://127.0.0.1:9/v1", timeout_s=2).publish(0, tmp_path)
