"""`pear-agent serve`: an OpenAI-compatible `/v1/chat/completions` endpoint answered by the scripted
expert, to check a model set-up end to end and to test the real HTTP path.

The expert needs simulator facts a model never sees. The client sends them only when asked to
(`pear-agent run --send-privileged`, a diagnostic), as the request's `pear_privileged` field: a
declared, typed part of the request (`openai_wire.PearRequestFields`, the model the client builds
it from).
A request without them gets HTTP 400 with a message saying so: this server is not a model.
`"stream": true` is answered with server-sent `chat.completion.chunk` events, as vLLM does.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import ValidationError

from pear_agent.loop.registry import text_expert_reply
from pear_agent.loop.task_experts import EXPERTS, find_expert
from pear_agent.policies.chunking import expert_chunk
from pear_agent.policies.experts import Expert, reply_history, unstick
from pear_agent.policies.openai_client import PRIVILEGED_KEY
from pear_agent.policies.openai_wire import PearRequestFields
from pear_agent.protocol.actions import reply_text, wire_chunk

NO_PRIVILEGED = (
    "pear-agent serve answers with the scripted expert, which needs the simulator's privileged facts: "
    "run the client with --send-privileged (request field 'pear_privileged')"
)


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": status}}, status_code=status)


def _prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Rough count (4 characters a token, 256 per image): enough for the client's budget logic."""
    n = 0
    for m in messages:
        content = m.get("content") or ""
        if isinstance(content, str):
            n += len(content) // 4 + 4
        else:
            for c in content:
                n += len(c.get("text", "")) // 4 + 1 if c.get("type") == "text" else 256
    return n


def expert_reply(body: dict[str, Any]) -> tuple[str, str]:
    """(reasoning, reply text) for one request; raises ValueError with a user-facing message."""
    try:
        priv = PearRequestFields.model_validate(body).pear_privileged
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ValueError(f"malformed {where}: {err['msg']}") from None
    if priv is None:
        # a text world (the roadster) needs no privileged facts: a family's scripted policy may answer
        # from the messages alone (the registry asks each family)

        answer = text_expert_reply(body["messages"])
        if answer is None:
            raise ValueError(NO_PRIVILEGED)
        return answer
    task = priv.task.partition("~")[0]  # a perturbed task (`pick_cube~camera`): its base task's expert
    expert = _expert(task)
    if expert is None:
        raise ValueError(f"no scripted expert for task {task!r}; experts exist for {sorted(EXPERTS)}")
    try:
        reasoning, steps, done = expert_chunk(expert, priv.state, priv.facts, priv.max_chunk)
        if not done:  # the in-process expert's rule, from the same conversation
            history = reply_history(body.get("messages") or [])
            reasoning, steps = unstick(reasoning, steps, history, priv.state, priv.facts)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed {PRIVILEGED_KEY}: {type(exc).__name__}: {exc}") from None
    return reasoning, reply_text(reasoning, wire_chunk(steps, done=done))


def _expert(task: Any) -> Expert | None:
    """The task's scripted expert, from its family (LIBERO names its own)."""
    return find_expert(task)


STREAM_PIECE_CHARS = 16


async def _stream_chunks(
    model: str, message: dict[str, Any], usage: dict[str, int] | None
) -> AsyncIterator[str]:
    """The reply as OpenAI `chat.completion.chunk` server-sent events: the role, the reasoning and
    content in small pieces, the finish reason, the usage when asked (`stream_options`), [DONE]."""
    cid, created = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time())

    def event(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choices = [{"index": 0, "delta": delta, "finish_reason": finish}]
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        return f"data: {json.dumps(chunk | {'choices': choices} | extra)}\n\n"

    yield event({"role": "assistant", "content": ""})
    for key in ("reasoning_content", "content"):
        text = message.get(key) or ""
        for i in range(0, len(text), STREAM_PIECE_CHARS):
            yield event({key: text[i : i + STREAM_PIECE_CHARS]})
            await asyncio.sleep(0)
    yield event({}, "stop")
    if usage is not None:
        chunk = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
        yield f"data: {json.dumps(chunk | {'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


def create_app(latency_s: float = 0.0, model: str = "pear-scripted-expert", reasoning_field: bool = False):  # noqa: ANN201
    """The FastAPI app. `reasoning_field` puts the reasoning in `reasoning_content` (as vLLM does
    for reasoning models) instead of the content, to exercise clients."""
    app = FastAPI(title="pear-agent serve")

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "pear-agent"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "request needs a 'messages' list")
        try:
            reasoning, text = expert_reply(body)
        except ValueError as exc:
            return _error(400, str(exc))
        if latency_s > 0:
            await asyncio.sleep(latency_s)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if reasoning_field:
            message = {"role": "assistant", "content": text.split("\n", 1)[1], "reasoning_content": reasoning}
        prompt = _prompt_tokens(body["messages"])
        completion = len(text) // 4 + 1
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _stream_chunks(body.get("model") or model, message, usage if include_usage else None)
            return StreamingResponse(chunks, media_type="text/event-stream")
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage,
        }

    return app


def serve(
    host: str = "127.0.0.1", port: int = 8000, latency_s: float = 0.0, reasoning_field: bool = False
) -> None:
    import uvicorn  # heavy: uvicorn

    print(
        f"pear-agent serve: scripted expert at http://{host}:{port}/v1 (latency {latency_s:g} s); "
        f"clients need --send-privileged",
        flush=True,
    )
    uvicorn.run(
        create_app(latency_s, reasoning_field=reasoning_field), host=host, port=port, log_level="warning"
    )
