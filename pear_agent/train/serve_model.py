"""`pear-agent train serve CHECKPOINT`: a trained checkpoint (or any local model) behind an
OpenAI-compatible `/v1/chat/completions`, so `run`, `bench` and `compare` fly it like any model:

    pear-agent train serve runs/train-grpo/checkpoint-0003 --port 8000 &
    pear-agent bench --task roadster_ramp_flip:light --base-url http://127.0.0.1:8000/v1 --model pilot

One request at a time (a CPU holds one generation). A request that extends the previous
conversation reuses its token sequence and cache. `logprobs: true` returns each sampled token's
log-probability (OpenAI's `choices[].logprobs.content`), with `token_id` beside each token as
vLLM does with `return_tokens_as_token_ids`. On a GPU, serve a merged checkpoint with vLLM
instead (`vllm serve CHECKPOINT`); an adapter with `--enable-lora --lora-modules`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


def create_app(model_name: str, max_new_tokens: int = 64) -> Any:
    from pear_agent.policies.local_model import LocalModelPolicy, load_model
    from pear_agent.train.sequences import text_messages

    model, tok = load_model(model_name)
    policy = LocalModelPolicy(model, tok, temperature=0.0, max_new_tokens=max_new_tokens, name=model_name)
    lock = asyncio.Lock()
    app = FastAPI()

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse(
            {"error": {"message": message, "type": "invalid_request_error", "code": status}}, status
        )

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "pear-agent"}]}

    def generate(body: dict[str, Any]) -> tuple[str, Any, dict[str, int]]:
        msgs = text_messages(body["messages"])
        temp = body.get("temperature")
        policy.temperature = float(temp) if temp is not None else 0.0
        policy.max_new_tokens = int(
            body.get("max_tokens") or body.get("max_completion_tokens") or max_new_tokens
        )
        policy.max_new_tokens = min(policy.max_new_tokens, max_new_tokens)
        known = policy.sequence.messages
        if msgs[: len(known)] != known or len(msgs) <= len(known):
            policy.reset(int(body.get("seed") or 0))
        if msgs and msgs[-1]["role"] == "assistant":
            raise ValueError("the last message must not be an assistant message")
        reply = policy.act(msgs, None)  # type: ignore[arg-type]
        if reply.error:
            raise ValueError(reply.error)
        return reply.text, reply.tokens, reply.usage or {}

    def logprobs_json(trace: Any) -> dict[str, Any]:
        return {
            "content": [
                {"token": tok.decode([i]), "token_id": i, "logprob": lp, "bytes": None, "top_logprobs": []}
                for i, lp in zip(trace.token_ids, trace.logprobs or [], strict=False)
            ]
        }

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        try:
            body = await request.json()
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return error(400, "the request needs a messages list")
            async with lock:
                text, trace, usage = await asyncio.to_thread(generate, body)
        except ValueError as exc:
            return error(400, str(exc))
        rid, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())
        lp = logprobs_json(trace) if body.get("logprobs") else None
        if not body.get("stream"):
            return {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                        "logprobs": lp,
                    }
                ],
                "usage": usage,
            }

        async def events() -> Any:
            base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model_name}
            first = {
                "index": 0,
                "delta": {"role": "assistant", "content": text},
                "finish_reason": None,
                "logprobs": lp,
            }
            yield f"data: {json.dumps(base | {'choices': [first]})}\n\n"
            last = {"index": 0, "delta": {}, "finish_reason": "stop"}
            yield f"data: {json.dumps(base | {'choices': [last], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


def serve_checkpoint(
    model_name: str, host: str = "127.0.0.1", port: int = 8000, max_new_tokens: int = 64
) -> None:
    import uvicorn

    uvicorn.run(create_app(model_name, max_new_tokens), host=host, port=port, log_level="warning")
