"""Local HTTP servers for tests: `pear-agent serve` in a thread, and a misbehaving endpoint.

The misbehaving endpoint reproduces what the real llama-cpp-python server (tests/llm_server) cannot
be made to show on demand: vLLM's and llama.cpp's context-length errors, word for word; a
generation that only stops when the client goes away; a 500 whose message carries traceback paths.
Each behaviour answers what its real counterpart answers, streaming (server-sent events, as the
OpenAI API streams) when asked to.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class InFlight:
    """ASGI middleware counting what a server sees: chat requests open at once (peak), requests in
    all, and the client connections they came on (distinct peer addresses)."""

    def __init__(self, app: Any) -> None:
        self.app, self.now, self.peak, self.requests = app, 0, 0, 0
        self.peers: set[tuple[str, int]] = set()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        self.now += 1
        self.requests += 1
        self.peak = max(self.peak, self.now)
        self.peers.add(tuple(scope.get("client") or ("?", 0)))
        try:
            await self.app(scope, receive, send)
        finally:
            self.now -= 1


@contextmanager
def serve_app(app: Any, start_timeout_s: float = 20.0) -> Iterator[str]:
    """Any ASGI app under uvicorn in a thread on a free port; yields the base URL (`.../v1`)."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def serve_in_thread(
    latency_s: float = 0.0, reasoning_field: bool = False, counter: InFlight | None = None
) -> Iterator[str]:
    """`pear-agent serve`'s app under uvicorn on a free port; yields the base URL. With `counter`
    (an `InFlight` whose app is None), requests pass through it and it counts them."""
    from pear_agent.loop.expert_server import create_app

    app = create_app(latency_s, reasoning_field=reasoning_field)
    if counter is not None:
        counter.app, app = app, counter
    with serve_app(app) as url:
        yield url


def post_json(url: str, body: dict, timeout_s: float) -> tuple[int, dict]:
    """POST `body` as JSON; (HTTP status, the JSON answered), error statuses included."""
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


GOOD_REPLY = 'I open the gripper.\n```json\n{"action": {"arm": {"gripper": 1.0}}}\n```'
SLOW_TOKEN_S = 0.05
SLOW_TOKENS = 400
"""`slow`: 400 tokens at 20 per second (20 s) unless the client goes away."""

# Error bodies as the real servers send them (HTTP 400):
VLLM_CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 4096 tokens. However, your request has 5120 input "
        "tokens. Please reduce the length of the input messages. None",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
}
"""vLLM (`serving_engine._validate_input`) when the prompt alone overflows."""
LLAMACPP_CONTEXT = {
    "error": {
        "code": 400,
        "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 4476,
        "n_ctx": 4096,
    }
}
"""llama.cpp's llama-server (`ERROR_TYPE_EXCEED_CONTEXT_SIZE`)."""
LLAMAPY_CONTEXT = {
    "error": {
        "message": "This model's maximum context length is 512 tokens. However, you requested 1304 "
        "tokens (1240 in the messages, 64 in the completion). Please reduce the length of the messages "
        "or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
"""llama-cpp-python's server, unstreamed; streamed it sends HTTP 200 and no event at all."""


def vllm_max_tokens_error(max_tokens: int, window: int, prompt: int) -> dict[str, Any]:
    """vLLM when the prompt fits but prompt + max_tokens does not."""
    return {
        "error": {
            "message": f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {window} tokens and your request has {prompt} input tokens "
            f"({max_tokens} > {window} - {prompt}). None",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }


def _prompt_tokens(body: dict[str, Any], drop_lists: bool) -> int:
    """4 characters a token; `drop_lists` counts as a string-only template does (llama-cpp-python's
    `gemma` format): the system message and list-form content vanish."""
    n = 0
    for m in body.get("messages", []):
        c = m.get("content")
        if isinstance(c, str):
            if not (drop_lists and m.get("role") == "system"):
                n += len(c) // 4
        elif isinstance(c, list) and not drop_lists:
            n += sum(len(p.get("text", "")) // 4 for p in c if isinstance(p, dict))
    return n + 3


class BadHandler(BaseHTTPRequestHandler):
    """Behaviour chosen by the first path segment, e.g. /500/v1:

    500, 429, garbage, badjson, hang (5 s, then 500), flaky (two 503s, then a valid reply), trace500
    (a 500 whose message holds traceback paths), 401 (FastAPI's {"detail"} body, as llama-cpp-python
    sends it), ctx-vllm / ctx-llamacpp / ctx-llamapy (the servers' context errors; llama-cpp-python
    streams nothing), vllm (GET /models reports
    max_model_len 4096; a max_tokens above what fits gets vLLM's 400), llamacpp (GET /props reports
    n_ctx), stall (one streamed token, then 10 s of silence), nostream (400 for stream=true, as
    older or minimal servers answer), slow (streams a token every
    50 ms until done or the client leaves; unstreamed, it generates everything first), listdrop
    (counts prompt tokens as a string-only template does), llamaschema (json_schema -> 500,
    json_object+schema accepted, like llama-cpp-python), vllmschema (json_schema accepted), slowish
    (each reply after 0.3 s).
    Anything else answers GOOD_REPLY. Error bodies echo the Authorization header, as a careless
    proxy might, so redaction is tested for real.
    """

    calls: ClassVar[dict[str, int]] = {}
    requests: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    generations: ClassVar[list[dict[str, Any]]] = []
    """`slow`: one entry per generation: tokens sent, whether the client left, when it ended."""
    lock = threading.Lock()

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if status == 429:
            self.send_header("Retry-After", "0")
        try:
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): fine
            pass

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def do_GET(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        if mode == "vllm" and self.path.endswith("/models"):
            self._json(
                200, {"object": "list", "data": [{"id": "m", "object": "model", "max_model_len": 4096}]}
            )
        elif mode == "llamacpp" and self.path.endswith("/props"):
            self._json(200, {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1})
        elif self.path.endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "me"}]})
        else:
            self._json(404, {"detail": "Not Found"})

    def _completion(self, body: dict[str, Any], text: str, prompt_tokens: int | None = None) -> None:
        usage = {"prompt_tokens": prompt_tokens or 10, "completion_tokens": 5}
        usage["total_tokens"] = usage["prompt_tokens"] + 5
        if not body.get("stream"):
            self._json(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "created": 0,
                    "model": "m",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )
            return
        self._sse_start()
        pieces = [text[i : i + 8] for i in range(0, len(text), 8)]
        for i, piece in enumerate(pieces):
            last = i == len(pieces) - 1
            self._sse(self._chunk(piece, "stop" if last else None))
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse(
                {
                    "id": "x",
                    "object": "chat.completion.chunk",
                    "created": 0,
                    "model": "m",
                    "choices": [],
                    "usage": usage,
                }
            )
        self._sse_done()

    @staticmethod
    def _chunk(piece: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": "x",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": finish}],
        }

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.close_connection = True

    def _sse(self, obj: Any) -> None:
        self.wfile.write(f"data: {json.dumps(obj)}\n\n".encode())
        self.wfile.flush()

    def _sse_done(self) -> None:
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _slow(self, body: dict[str, Any]) -> None:
        gen = {"tokens": 0, "client_left": False, "started": time.monotonic(), "ended": None}
        with BadHandler.lock:
            BadHandler.generations.append(gen)
        try:
            if not body.get("stream"):
                for _ in range(SLOW_TOKENS):  # a non-streamed generation runs to its end, client or not
                    time.sleep(SLOW_TOKEN_S)
                    gen["tokens"] += 1
                self._completion(body, GOOD_REPLY)
                return
            self._sse_start()
            for _ in range(SLOW_TOKENS):
                time.sleep(SLOW_TOKEN_S)
                self._sse(self._chunk("x", None))
                gen["tokens"] += 1
            self._sse(self._chunk("", "length"))
            self._sse_done()
        except (BrokenPipeError, ConnectionResetError):
            gen["client_left"] = True  # the server stops generating, as vLLM and llama.cpp do
        finally:
            gen["ended"] = time.monotonic()

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.strip("/").split("/")[0]
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        with BadHandler.lock:
            BadHandler.calls[mode] = BadHandler.calls.get(mode, 0) + 1
            BadHandler.requests.append((mode, body))
        auth = self.headers.get("Authorization", "")
        err = json.dumps({"error": {"message": f"server exploded; you sent {auth}", "type": "x"}}).encode()
        fmt = body.get("response_format") or {}
        if mode == "500":
            self._send(500, err)
        elif mode == "429":
            self._send(429, err)
        elif mode == "trace500":
            msg = (
                "Traceback (most recent call last):\n"
                '  File "/srv/venv/lib/python3.11/site-packages/llama_cpp/server/app.py", line 481, '
                "in create_chat_completion\n    raise ValueError\nValueError: "
                f"grammar failed {auth}"
            )
            self._json(500, {"error": {"message": msg, "type": "internal_server_error"}})
        elif mode == "401":
            self._json(401, {"detail": "Invalid API key"})
        elif mode == "garbage":
            self._send(200, b"<html>this is not JSON " + auth.encode() + b"</html>", "text/html")
        elif mode == "badjson":
            self._send(200, b'{"unexpected": true}')
        elif mode == "hang":
            time.sleep(5)
            self._send(500, err)
        elif mode == "flaky" and BadHandler.calls[mode] % 3 != 0:
            self._send(503, err)
        elif mode == "ctx-vllm":
            self._json(400, VLLM_CONTEXT)
        elif mode == "ctx-llamacpp":
            self._json(400, LLAMACPP_CONTEXT)
        elif mode == "ctx-llamapy" and body.get("stream"):
            self._sse_start()  # llama-cpp-python: the error is raised inside the stream; nothing is sent
        elif mode == "ctx-llamapy":
            self._json(400, LLAMAPY_CONTEXT)
        elif mode == "vllm" and (body.get("max_tokens") or 0) > 4096 - _prompt_tokens(body, False):
            self._json(400, vllm_max_tokens_error(body["max_tokens"], 4096, _prompt_tokens(body, False)))
        elif mode == "nostream" and body.get("stream"):
            self._json(400, {"error": {"message": "streaming is not supported by this server"}})
        elif mode == "slow":
            self._slow(body)
        elif mode == "slowish":  # a server that takes 0.3 s per reply
            time.sleep(0.3)
            self._completion(body, GOOD_REPLY)
        elif mode == "stall":  # one token, then silence (a long prompt evaluation, a stuck server)
            self._sse_start()
            self._sse(self._chunk("x", None))
            time.sleep(10)
        elif mode == "listdrop":
            self._completion(body, GOOD_REPLY, _prompt_tokens(body, True))
        elif mode == "llamaschema" and fmt.get("type") == "json_schema":
            self._json(500, {"error": {"message": "'NoneType' object has no attribute 'get'", "type": "x"}})
        elif mode == "vllmschema" and fmt.get("type") == "json_object" and "schema" in fmt:
            self._json(400, {"error": {"message": "unexpected schema in json_object", "type": "x"}})
        else:
            self._completion(body, GOOD_REPLY)


@contextmanager
def bad_server() -> Iterator[str]:
    """Yields the server root URL, e.g. http://127.0.0.1:PORT (append /500/v1 etc.)."""
    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), BadHandler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
