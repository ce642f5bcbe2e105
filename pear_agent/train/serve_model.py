"""`pear-agent train serve CHECKPOINT`: a trained checkpoint (or any local model) behind an
OpenAI-compatible `/v1/chat/completions`, so `run`, `bench` and `compare` fly it like any model:

    pear-agent train serve runs/train-grpo/checkpoint-0003 --port 8000 &
    pear-agent bench --task roadster_ramp_flip:light --base-url http://127.0.0.1:8000/v1 --model pilot

One request at a time (a CPU holds one generation).

Token-in, token-out as vLLM answers it (what the GRPO trainer's server generator speaks,
`pear_agent.train.token_server`): `POST /v1/completions` takes `prompt` as token ids and, with
`logprobs` and `return_tokens_as_token_ids`, returns each sampled token as `token_id:<id>` with its
log-probability (`return_token_ids` adds `choices[].token_ids` and `prompt_token_ids`). LoRA
adapters load at run time as on vLLM (`POST /v1/load_lora_adapter` {lora_name, lora_path},
`/v1/unload_lora_adapter`; a name already loaded is refused; an adapter of a rank above
`--max-lora-rank`, default 16 as vLLM's, is refused naming the setting); a request names the
adapter as its `model`. A request that extends the previous
conversation reuses its token sequence and cache. `logprobs: true` returns each sampled token's
log-probability (OpenAI's `choices[].logprobs.content`), with `token_id` beside each token as
vLLM does with `return_tokens_as_token_ids`. On a GPU, serve a merged checkpoint with vLLM
instead (`vllm serve CHECKPOINT`); an adapter with `--enable-lora --lora-modules`.

A vision-language checkpoint (Idefics3 / SmolVLM, Qwen-VL; `tiny-idefics3`) is served with its
processor: `/v1/chat/completions` takes the images in the messages (`image_url` parts, as the loop
sends them) and builds the sequence as `VisionModelPolicy` does in process (the processor's chat
template, each image expanded into its tokens, the pixels in the turn's first forward pass), so a
served reply is the one the trainer would sample and rebuild. `/v1/completions` (token ids in)
refuses a vision-language model: token ids carry no pixels.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse

from pear_agent.train.batched import GenRequest, generate_batch
from pear_agent.train.local_model import make_local_policy
from pear_agent.train.model_files import load_model
from pear_agent.train.sequences import text_messages
from pear_agent.train.vision import is_processor, text_tokenizer


def create_app(
    model_name: str,
    max_new_tokens: int = 64,
    max_lora_rank: int = 16,
    logprobs_mode: str = "processed_logprobs",
) -> Any:
    """`logprobs_mode` as vLLM's `--logprobs-mode`: `processed_logprobs` (this server's default) returns
    the log-probabilities of the distribution sampled (temperature, logit bias); `raw_logprobs`
    (vLLM's default) those of the raw logits, so the tests can stand in for a vLLM started without it."""
    if logprobs_mode not in ("processed_logprobs", "raw_logprobs"):
        raise ValueError(f"logprobs_mode must be processed_logprobs or raw_logprobs, not {logprobs_mode!r}")
    model, loaded = load_model(model_name)
    vision = is_processor(loaded)
    """A vision-language model: `loaded` is its processor; the chat path keeps the messages' images."""
    tok = text_tokenizer(loaded)
    base = model
    adapters: dict[str, str] = {}
    state: dict[str, Any] = {"model": model, "prefix": None}
    """The served model (the base, or PEFT with the loaded adapters) and the last request's cache."""
    policy = make_local_policy(model, loaded, temperature=0.0, max_new_tokens=max_new_tokens, name=model_name)
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
        # a vision-language model keeps the images (its sequence encodes them); a text model their text
        msgs = [dict(m) for m in body["messages"]] if vision else text_messages(body["messages"])
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

    def use(name: str | None) -> Any:
        """The model for a request's `model` field: an adapter by name, else the base."""
        m = state["model"]
        if name in adapters:
            m.set_adapter(name)
            return m
        if name not in (None, "", model_name):
            raise ValueError(
                f"the model {name!r} does not exist (served: {model_name}, {', '.join(adapters)})"
            )
        return m

    def complete(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], list):
            prompt = prompt[0]
        if not (isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt)):
            raise ValueError("prompt must be a list of token ids (this server answers token-in, token-out)")
        if vision:
            raise ValueError(
                f"{model_name} is a vision-language model: token ids carry no pixels, so /v1/completions "
                "cannot serve it; send the images in the messages to /v1/chat/completions"
            )
        name = body.get("model")
        m = use(name)
        temp = float(body["temperature"]) if body.get("temperature") is not None else 1.0
        n_new = min(int(body.get("max_tokens") or max_new_tokens), max_new_tokens)
        stops = frozenset(int(t) for t in body.get("stop_token_ids") or []) | {tok.eos_token_id}
        prefix = state["prefix"]
        kv, feed = None, list(prompt)
        n_known = len(prefix[1]) if prefix is not None else 0
        if (
            prefix is not None
            and prefix[0] == name
            and len(prompt) > n_known
            and prompt[:n_known] == prefix[1]
        ):
            kv, feed = prefix[2], list(prompt[n_known:])
        # as vLLM: what a reply may hold is the request's `logit_bias` (clamped to [-100, 100]); the
        # trainer's requests bias every special token but the reply's end by -100
        bias = []
        for k, v in (body.get("logit_bias") or {}).items():
            if not str(k).lstrip("-").isdigit() or not 0 <= int(k) < len(tok):
                raise ValueError(f"logit_bias: token id {k} out of vocabulary")
            bias.append((int(k), min(100.0, max(-100.0, float(v)))))
        req = GenRequest(
            feed, kv, n_new, temp, stops, int(body.get("seed") or 0),
            bias=tuple(bias), raw_logprobs=logprobs_mode == "raw_logprobs",
        )  # fmt: skip
        ctx = m.disable_adapter() if name not in adapters and adapters else contextlib.nullcontext()
        with ctx:
            res = generate_batch(m, [req], tok.pad_token_id or 0)[0]
        state["prefix"] = (name, list(prompt) + res.ids[:-1], res.kv)
        choice: dict[str, Any] = {
            "index": 0,
            "text": tok.decode(res.ids, skip_special_tokens=bool(body.get("skip_special_tokens", True))),
            "finish_reason": "stop" if res.ids and res.ids[-1] in stops else "length",
            "logprobs": None,
        }
        if body.get("logprobs") is not None:
            as_ids = bool(body.get("return_tokens_as_token_ids"))
            choice["logprobs"] = {
                "tokens": [f"token_id:{i}" if as_ids else tok.decode([i]) for i in res.ids],
                "token_logprobs": res.logprobs,
                "top_logprobs": None,
                "text_offset": None,
            }
        if body.get("return_token_ids"):
            choice["token_ids"] = res.ids
            choice["prompt_token_ids"] = list(prompt)
        usage = {"prompt_tokens": len(prompt), "completion_tokens": len(res.ids)}
        return {"choices": [choice], "usage": usage | {"total_tokens": len(prompt) + len(res.ids)}}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Any:
        try:
            body = await request.json()
            if not isinstance(body, dict):
                return error(400, "the request must be a JSON object")
            async with lock:
                out = await asyncio.to_thread(complete, body)
        except ValueError as exc:
            return error(400, str(exc))
        rid = f"cmpl-{uuid.uuid4().hex[:12]}"
        return {
            "id": rid,
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model"),
        } | out

    def load_adapter(body: dict[str, Any]) -> str:
        from peft import PeftConfig, PeftModel  # optional: peft

        name, path = body.get("lora_name"), body.get("lora_path")
        if not name or not path:
            raise ValueError("Both 'lora_name' and 'lora_path' must be provided.")
        if name in adapters:
            raise ValueError(f"The lora adapter '{name}' has already been loaded.")
        rank = int(PeftConfig.from_pretrained(path).r)
        if rank > max_lora_rank:
            raise ValueError(
                f"LoRA rank {rank} is greater than max_lora_rank {max_lora_rank} (start the server with "
                f"--max-lora-rank {rank} or more)"
            )
        if not isinstance(state["model"], PeftModel):  # (transformers' own adapter mixin needs newer PEFT)
            state["model"] = PeftModel.from_pretrained(base, path, adapter_name=name)
        else:
            state["model"].load_adapter(path, adapter_name=name)
        state["model"].eval()
        adapters[name] = path
        state["prefix"] = None
        return f"Success: LoRA adapter '{name}' added successfully."

    @app.post("/v1/load_lora_adapter")
    async def load_lora(request: Request) -> Any:
        try:
            body = await request.json()
            async with lock:
                msg = await asyncio.to_thread(load_adapter, body)
        except ValueError as exc:
            return error(400, str(exc))
        return PlainTextResponse(msg)

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(request: Request) -> Any:
        body = await request.json()
        name = body.get("lora_name")
        async with lock:
            if name not in adapters:
                return error(404, f"The lora adapter '{name}' cannot be found.")
            state["model"].delete_adapter(name)
            del adapters[name]
            state["prefix"] = None
        return PlainTextResponse(f"Success: LoRA adapter '{name}' removed successfully.")

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
    model_name: str,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_new_tokens: int = 64,
    max_lora_rank: int = 16,
) -> None:
    import uvicorn  # heavy: uvicorn

    app = create_app(model_name, max_new_tokens, max_lora_rank)
    uvicorn.run(app, host=host, port=port, log_level="warning")
