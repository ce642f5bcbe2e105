"""What the OpenAI-compatible client sends and how it reads what servers answer.

Servers differ: vLLM, SGLang and OpenAI take `response_format={"type": "json_schema", ...}`;
llama.cpp (and llama-cpp-python) take `{"type": "json_object", "schema": ...}` and the latter answers
`json_schema` with HTTP 500. Context overflow is HTTP 400 with a server-specific sentence. Some chat
templates (llama-cpp-python's `--chat_format gemma`) drop list-form content. These helpers keep
those differences in one place; `openai_client` uses them.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, Any]


class PrivilegedTurn(BaseModel):
    """One turn's simulator facts for a served scripted policy (`pear-agent serve`): sent only with
    `--send-privileged` (a diagnostic; a model never sees them)."""

    model_config = ConfigDict(extra="forbid")

    task: str
    state: dict[str, Any]
    """The state JSON the model is shown (part -> quantity -> value)."""
    facts: dict[str, Any]
    """The simulator's privileged facts (object poses...)."""
    max_chunk: int = Field(1, ge=1)
    """The most steps (arm) or commands (roadster plan) one reply may carry, as the prompt says."""


class PearRequestFields(BaseModel):
    """The request fields of pear-agent's own, beyond OpenAI's chat-completion body (sent in the
    client's `extra_body`): declared and typed here, built by the client (`OpenAIPolicy`) and
    validated by `pear-agent serve` from the same model. Other keys (the OpenAI body, a user's
    `--extra-body`) pass through untouched."""

    model_config = ConfigDict(extra="allow")

    pear_privileged: PrivilegedTurn | None = None


DIALECTS = ("json_schema", "json_object")
"""Structured-output dialects, in the order `auto` probes them."""

CONTEXT_ERROR_RE = re.compile(
    r"maximum context length"  # OpenAI, vLLM, llama-cpp-python
    r"|context_length_exceeded"  # OpenAI / llama-cpp-python error code
    r"|exceeds? the available context size"  # llama.cpp server (exceed_context_size_error)
    r"|exceed_context_size"
    r"|longer than the model's context length"  # SGLang
    r"|exceeds? (?:the )?context window"
    r"|context window of \d+",
    re.IGNORECASE,
)
TOO_MANY_OUTPUT_RE = re.compile(
    r"max_(?:completion_)?tokens.{0,40}too large.*?maximum context length is (\d+) tokens"
    r".*?request has (\d+) input tokens",
    re.IGNORECASE | re.DOTALL,
)
"""vLLM's answer when the prompt fits but prompt + max_tokens does not (then a smaller max_tokens works)."""
_TRACE_RE = re.compile(r'File "[^"]*", line \d+(?:, in \S+)?|(?:/[\w.+-]+){2,}\.py(?::\d+)?|Traceback[^:]*:')


class BrokenReply(ConnectionError):
    """The transport broke mid-reply, not the model: a stream event that is not JSON, a stream cut
    before its end, a body that is not a reply. Retried like a dropped connection; its message says
    what the server did in plain words (never a bare JSONDecodeError)."""


def not_json_event(exc: json.JSONDecodeError) -> BrokenReply:
    """The BrokenReply for a stream event the server sent that json cannot read."""
    doc = getattr(exc, "doc", "") or ""
    return BrokenReply(f"the server sent a stream event that is not JSON: {clean_line(doc, 120)!r}")


def clean_line(text: str, limit: int = 300) -> str:
    """One line without traceback frames or file paths, at most `limit` characters."""
    text = _TRACE_RE.sub("", str(text))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_body_text(body: Any, raw: str = "") -> str:
    """The human part of a server's error body: OpenAI's {"error": {"message"}}, FastAPI's
    {"detail"}, a bare {"message"}, or the raw text."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(err.get(key), str) and err[key]:
                    return err[key]
            if "detail" in body:
                return json.dumps(body["detail"]) if not isinstance(body["detail"], str) else body["detail"]
        elif isinstance(err, str) and err:
            return err
        return json.dumps(body)[:1000]
    if isinstance(body, str) and body:
        return body
    return raw


def error_code(body: Any) -> str:
    """`code`/`type` of an OpenAI-style error body (e.g. context_length_exceeded), or ''."""
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return ""
    return " ".join(str(err.get(k) or "") for k in ("code", "type")).strip()


def is_context_error(status: int | None, text: str, code: str = "") -> bool:
    return status in (400, 413, 422, None) and bool(CONTEXT_ERROR_RE.search(f"{text} {code}"))


def output_room(text: str) -> int | None:
    """Tokens left for the completion when the server said only max_tokens was too large (vLLM)."""
    m = TOO_MANY_OUTPUT_RE.search(text)
    return int(m.group(1)) - int(m.group(2)) if m else None


def response_format(dialect: str, schema: dict[str, Any]) -> dict[str, Any]:
    if dialect == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "robot_action", "schema": schema}}
    if dialect == "json_object":
        return {"type": "json_object", "schema": schema}
    raise ValueError(
        f"unknown structured-output dialect {dialect!r}; use one of: off, auto, {', '.join(DIALECTS)}"
    )


def wire_messages(messages: list[Message], keep_last: int | None) -> list[Message]:
    """Request copy of the conversation: private keys dropped, images beyond the last K user turns
    replaced by a short placeholder, and every message without an image part sent as ONE string
    (string-only chat templates drop list content).

    Replacing an image changes an earlier message, so a server's prefix cache is reused only up to
    the first replaced image (once per turn the window slides); with keep_last=None the history is
    sent byte-for-byte append-only.
    """
    user_idx = [i for i, m in enumerate(messages) if m["role"] == "user"]
    keep_from = user_idx[-keep_last] if keep_last and len(user_idx) >= keep_last else 0
    if keep_last == 0:
        keep_from = len(messages)
    out: list[Message] = []
    for i, m in enumerate(messages):
        content = m["content"]
        if isinstance(content, str):
            out.append({"role": m["role"], "content": content})
            continue
        parts = []
        for c in content:
            if c.get("type") == "image_url" and keep_last is not None and i < keep_from:
                parts.append({"type": "text", "text": "[image omitted to save context]"})
            else:
                parts.append({k: v for k, v in c.items() if not k.startswith("_")})
        if all(p.get("type") == "text" for p in parts):
            out.append({"role": m["role"], "content": "\n".join(p.get("text", "") for p in parts)})
        else:
            out.append({"role": m["role"], "content": parts})
    return out


def text_tokens(messages: list[Message]) -> int:
    """A lower-bound-ish token count of the text a request carries (4 characters a token; JSON and
    numbers tokenize denser, so a real count is rarely below this)."""
    n = 0
    for m in messages:
        content = m["content"]
        if isinstance(content, str):
            n += len(content) // 4
        else:
            n += sum(len(c.get("text", "")) // 4 for c in content if c.get("type") == "text")
    return n


def dropped_prompt_warning(prompt_tokens: int, messages: list[Message]) -> str | None:
    """A warning when the server counted far fewer prompt tokens than the request's text holds."""
    expected = text_tokens(messages)
    if expected < 100 or prompt_tokens >= expected // 2:
        return None
    lists = any(isinstance(m["content"], list) for m in messages)
    system = any(m["role"] == "system" for m in messages)
    cause, fix = [], []
    if lists:
        cause.append("list-form content (images)")
        fix.append("--observation state sends plain strings")
    if system:
        cause.append("the system message")
        fix.append("a chat template that keeps system messages (e.g. llama-cpp-python --chat_format chatml)")
    dropped = " or ".join(cause) or "part of the prompt"
    return (
        f"the server counted {prompt_tokens} prompt tokens for a request of ~{expected} text tokens: "
        f"its chat template probably dropped {dropped}; {'; or '.join(fix) or 'check the template'}"
    )


def window_from_models(payload: Any, model: str) -> int | None:
    """`max_model_len` (vLLM, SGLang) of `model` in a /v1/models answer."""
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    entries = [d for d in data if isinstance(d, dict)]
    match = [d for d in entries if d.get("id") == model] or (entries if len(entries) == 1 else [])
    for d in match:
        for key in ("max_model_len", "context_length", "max_context_length"):
            if isinstance(d.get(key), int) and d[key] > 0:
                return d[key]
    return None


def window_from_props(payload: Any) -> int | None:
    """llama.cpp server's /props: `default_generation_settings.n_ctx` (or a top-level n_ctx)."""
    if not isinstance(payload, dict):
        return None
    gen = payload.get("default_generation_settings")
    for src in (gen, payload):
        if isinstance(src, dict) and isinstance(src.get("n_ctx"), int) and src["n_ctx"] > 0:
            return src["n_ctx"]
    return None


def probe_context_window(base_url: str, model: str, key: str = "", timeout_s: float = 5.0) -> int | None:
    """The server's context window where it reports one (vLLM/SGLang /v1/models, llama.cpp /props);
    None when it reports none or cannot be asked."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    root = base_url.rstrip("/")
    server_root = root[:-3] if root.endswith("/v1") else root

    def get(url: str) -> Any:
        req = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            return json.loads(r.read(1_000_000))

    for url, read in (
        (f"{root}/models", lambda p: window_from_models(p, model)),
        (f"{server_root}/props", window_from_props),
    ):
        try:
            found = read(get(url))
        except (OSError, ValueError, urllib.error.URLError):
            continue
        if found:
            return found
    return None
