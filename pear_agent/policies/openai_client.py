"""Any OpenAI-compatible chat endpoint as the policy (vLLM, SGLang, llama.cpp, hosted APIs, `serve`).

Completions are streamed: each decision records its time to first token and its total time, and a
decision that runs past `timeout_s` is abandoned by closing the stream (the server sees the client
go away and stops generating) instead of queueing retries behind a generation it keeps running.
Retries are our own loop (the client's `max_retries` is 0) so each attempt, its error and its wait
land in the episode log; `latency_s` is the successful attempt only. Every failure becomes
`PolicyReply(error=...)` (a server's context-length error carries `info["end_reason"] =
"context_budget"`), never an exception. The API key is read from the environment variable named by
`api_key_env` and is scrubbed from every message this module produces.

The client is asynchronous (`aact`, the `openai` package's `AsyncOpenAI`): one client, so one
keep-alive connection pool, per endpoint per event loop, shared by every episode in flight in
that loop; `max_in_flight` caps the requests it has open at once (a server's batch and prefix
cache stay manageable; the wait for a slot is recorded as `queue_s`, not counted against the
timeout). The blocking `act` runs the same coroutine on one background event loop per process.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import re
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Any

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.policies.model_settings import ModelSettings
from pear_agent.policies.openai_wire import (
    DIALECTS,
    BrokenReply,
    PearRequestFields,
    PrivilegedTurn,
    clean_line,
    dropped_prompt_warning,
    error_body_text,
    error_code,
    is_context_error,
    not_json_event,
    output_room,
    probe_context_window,
    response_format,
    wire_messages,
)
from pear_agent.policies.server_logprobs import entries_of, trace_from_logprobs
from pear_agent.protocol.prompts import Message
from pear_agent.records.log import SECRET_PATTERNS

THINK_RE = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
"""Retried: timeouts/conflicts/rate limits and server errors; any other 4xx is final."""
PRIVILEGED_KEY = "pear_privileged"
"""The request field (`PearRequestFields.pear_privileged`) carrying the turn's simulator facts when
`send_privileged` is on (diagnostic)."""
MAX_ADJUSTMENTS = 3
"""Per decision: requests re-sent with a protocol fix (no streaming, smaller max_tokens...)."""
PROBE_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}

KEEPALIVE_CONNECTIONS = 256
"""Idle connections a shared client keeps per endpoint (its pool opens more when more are in flight)."""

_SERVER_FACTS: dict[tuple[str, str, str], Any] = {}
"""Per process: what a (base_url, model) server was found to support: `stream` (False when it refused
streaming), `dialect` (structured output chosen by `auto`), `window` (context tokens), `counted`."""
_WARNED: set[str] = set()


def _warn(text: str) -> None:
    """Console (stderr) once per process per warning text; the log gets it in `info["warnings"]`."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"pear-agent: warning: {text}", file=sys.stderr, flush=True)


class DecisionTimeout(Exception):
    """The decision ran past `timeout_s`; its stream was closed."""


class EmptyStream(ValueError):
    """The stream ended without a choice: llama-cpp-python fails this way (HTTP 200, no data) when
    the request overflows its context; the same request unstreamed gets the server's real error."""


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def strip_images(messages: list[Message], keep_last: int | None) -> list[Message]:
    """The request copy of the conversation (see `openai_wire.wire_messages`)."""
    return wire_messages(messages, keep_last)


def _reasoning_of(obj: Any) -> str:
    extra = getattr(obj, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        val = getattr(obj, key, None) or extra.get(key)
        if isinstance(val, str) and val:
            return val
    return ""


def split_reasoning(message: Any) -> tuple[str, str]:
    """(content, reasoning) from a chat message: `reasoning_content`/`reasoning` fields and
    `<think>` blocks are reasoning; the parser also skips `<think>` blocks in the content."""
    content = getattr(message, "content", None) or ""
    reasoning = _reasoning_of(message)
    thinks = [t.strip() for t in THINK_RE.findall(content)]
    if thinks:
        reasoning = "\n".join([reasoning, *thinks]).strip()
    return content, reasoning


class _Endpoint:
    """One endpoint as seen from one event loop: the shared client (its connection pool) and the
    slots that cap the requests in flight."""

    def __init__(self, client: Any, max_in_flight: int | None) -> None:
        self.client = client
        self.max_in_flight = max_in_flight
        self._slots = asyncio.Semaphore(max_in_flight) if max_in_flight else None
        self.probe_lock = asyncio.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0

    @contextlib.asynccontextmanager
    async def slot(self, info: dict[str, Any]) -> Any:
        """Hold one of the endpoint's request slots; the wait goes into `info["queue_s"]`."""
        q0 = time.perf_counter()
        if self._slots is not None:
            await self._slots.acquire()
        info["queue_s"] = info.get("queue_s", 0.0) + time.perf_counter() - q0
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            yield
        finally:
            self.in_flight -= 1
            if self._slots is not None:
                self._slots.release()


_ENDPOINTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, str], _Endpoint]] = (
    weakref.WeakKeyDictionary()
)


def _http_client(openai: Any, max_in_flight: int | None) -> Any:
    """The SDK's own async HTTP client with a pool sized for many episodes in flight (keep-alive)."""
    try:
        from openai._constants import DEFAULT_CONNECTION_LIMITS  # heavy: openai; the SDK's httpx Limits class

        keep = max(KEEPALIVE_CONNECTIONS, max_in_flight or 0)
        limits = type(DEFAULT_CONNECTION_LIMITS)(
            max_connections=max(DEFAULT_CONNECTION_LIMITS.max_connections or 0, keep),
            max_keepalive_connections=keep,
        )
        return openai.DefaultAsyncHttpxClient(limits=limits)
    except Exception:  # another SDK version: its defaults (keep-alive all the same)
        return None


def endpoint(
    openai: Any, base_url: str | None, key: str, timeout_s: float, max_in_flight: int | None
) -> _Endpoint:
    """The running loop's shared client for (base_url, key), made on first use."""
    loop = asyncio.get_running_loop()
    per_loop = _ENDPOINTS.setdefault(loop, {})
    ep = per_loop.get((base_url or "", key))
    if ep is None:
        client = openai.AsyncOpenAI(
            api_key=key or "not-needed",
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            http_client=_http_client(openai, max_in_flight),
        )
        ep = per_loop[(base_url or "", key)] = _Endpoint(client, max_in_flight)
    return ep


def endpoints() -> list[_Endpoint]:
    """The running loop's endpoints (a benchmark reads their peak requests in flight)."""
    return list(_ENDPOINTS.get(asyncio.get_running_loop(), {}).values())


async def aclose_endpoints() -> None:
    """Close the running loop's clients (their connections); a new use makes new ones."""
    per_loop = _ENDPOINTS.pop(asyncio.get_running_loop(), {})
    for ep in per_loop.values():
        with contextlib.suppress(Exception):  # a dead connection may fail to close: it is gone anyway
            await ep.client.close()


class _LoopThread:
    """One background event loop per process for the blocking `act` (its own clients, keep-alive
    across calls)."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    @classmethod
    def run(cls, coro: Any) -> Any:
        with cls._lock:
            if cls._loop is None or cls._thread is None or not cls._thread.is_alive():
                cls._loop = asyncio.new_event_loop()
                cls._thread = threading.Thread(target=cls._loop.run_forever, daemon=True, name="pear-openai")
                cls._thread.start()
        if threading.current_thread() is cls._thread:
            coro.close()
            raise RuntimeError("OpenAIPolicy.act called from its own event loop: await aact instead")
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result()


@dataclass
class _Answer:
    content: str
    reasoning: str
    usage: dict[str, int] | None
    finish_reason: str | None
    model: str | None
    ttft_s: float | None
    logprobs: list[Any] = field(default_factory=list)


class OpenAIPolicy:
    """One chat completion per turn over the append-only conversation."""

    blocking = True
    """`act` blocks; `Episode.arun` awaits `aact` instead."""

    def __init__(self, settings: ModelSettings) -> None:
        import openai  # heavy: openai

        self.settings = settings
        self.name = f"openai:{settings.model}"
        self._key = ""
        if settings.api_key_env:
            self._key = os.environ.get(settings.api_key_env, "")
            if not self._key:
                raise ValueError(f"environment variable {settings.api_key_env} (--api-key-env) is not set")
        self._openai = openai
        self._facts = _SERVER_FACTS.setdefault((settings.base_url or "", settings.model, self._key), {})
        if settings.structured_output_chosen:
            self._facts.setdefault("dialect", settings.structured_output_chosen)

    # -- what the server supports (asked once per process) ---------------------------------------
    def context_window(self) -> int | None:
        """The server's context window where it reports one (vLLM `max_model_len`, llama.cpp n_ctx)."""
        if "window" not in self._facts:
            base = self.settings.base_url
            self._facts["window"] = (
                probe_context_window(base, self.settings.model, self._key, min(5.0, self.settings.timeout_s))
                if base
                else None
            )
        return self._facts["window"]

    def _endpoint(self) -> _Endpoint:
        s = self.settings
        return endpoint(self._openai, s.base_url, self._key, s.timeout_s, s.max_in_flight)

    def structured_dialect(self) -> tuple[str | None, str]:
        """(dialect or None, how it was chosen) for `--structured-output`; `auto` probes once."""
        if self.settings.structured_output == "auto" and "dialect" not in self._facts:
            return _LoopThread.run(self._astructured_dialect())
        return self._dialect_known()

    def _dialect_known(self) -> tuple[str | None, str]:
        want = self.settings.structured_output
        if want == "off":
            return None, "off"
        if want in DIALECTS:
            return want, want
        chosen = self._facts["dialect"]
        return chosen, f"auto -> {chosen or 'off'}"

    async def _astructured_dialect(self) -> tuple[str | None, str]:
        if self.settings.structured_output == "auto" and "dialect" not in self._facts:
            async with self._endpoint().probe_lock:  # episodes starting together probe once
                if "dialect" not in self._facts:
                    self._facts["dialect"], self._facts["dialect_note"] = await self._probe_dialect()
                    chosen = self._facts["dialect"] or "off"
                    print(
                        f"pear-agent: structured output: auto chose {chosen} ({self._facts['dialect_note']})",
                        file=sys.stderr,
                        flush=True,
                    )
        return self._dialect_known()

    async def _probe_dialect(self) -> tuple[str | None, str]:
        """Ask the server for a tiny constrained reply in each dialect; the first it answers wins.
        Connection errors and 401/403/404 are raised (the decision would fail the same way)."""
        notes = []
        ep = self._endpoint()
        for dialect in DIALECTS:
            try:
                async with ep.slot({}):
                    await ep.client.chat.completions.create(
                        model=self.settings.model,
                        messages=[{"role": "user", "content": 'Answer with the JSON object {"ok": true}.'}],
                        response_format=response_format(dialect, PROBE_SCHEMA),  # type: ignore[arg-type]
                        **{self._facts.get("max_tokens_key", "max_tokens"): 8},
                        timeout=min(30.0, self.settings.timeout_s),
                    )
                return dialect, "; ".join([*notes, f"{dialect}: accepted"])
            except self._openai.APIStatusError as exc:
                if exc.status_code in (401, 403, 404):
                    raise
                notes.append(f"{dialect}: {self._describe(exc)}")
        return None, "; ".join(notes) + "; sending no response_format"

    # -- one request ------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        if self._key:
            text = text.replace(self._key, "[redacted]")
        for pat in SECRET_PATTERNS:
            text = pat.sub("[redacted]", text)
        return text

    def reset(self, seed: int) -> None:
        pass

    async def _request(
        self, messages: list[Message], ctx: TurnContext, info: dict[str, Any]
    ) -> dict[str, Any]:
        s = self.settings
        kw: dict[str, Any] = {"model": s.model, "messages": wire_messages(messages, s.keep_images)}
        if s.temperature is not None:
            kw["temperature"] = s.temperature
        cap = self._facts.get("max_tokens_cap")
        max_tokens = min(s.max_tokens, cap) if s.max_tokens and cap else s.max_tokens
        if max_tokens:
            kw[self._facts.get("max_tokens_key", "max_tokens")] = max_tokens
        if s.reasoning_effort:
            kw["reasoning_effort"] = s.reasoning_effort
        if s.logprobs:  # token-level records (training)
            kw["logprobs"] = True
        body = dict(s.extra_body)
        if s.send_privileged:
            facts = PrivilegedTurn(
                task=ctx.task,
                state=_jsonable(ctx.state),
                facts=_jsonable(ctx.observation.privileged),
                max_chunk=ctx.max_chunk,
            )
            body |= PearRequestFields(pear_privileged=facts).model_dump(mode="json", exclude_none=True)
        dialect, how = await self._astructured_dialect()
        info["structured_output"] = how
        if dialect is not None:
            schema = ctx.response_schema
            if schema is None:
                info.setdefault("warnings", []).append(
                    "structured output asked for but this environment gives no action schema"
                )
            else:
                kw["response_format"] = response_format(dialect, schema)
        if body:
            kw["extra_body"] = body
        return kw

    async def _stream(self, ep: _Endpoint, kw: dict[str, Any], deadline: float, a0: float) -> _Answer:
        stream_kw = kw | {"stream": True, "stream_options": {"include_usage": True}}
        content: list[str] = []
        reasoning: list[str] = []
        logprobs: list[Any] = []
        got: dict[str, Any] = {"usage": None, "finish": None, "model": None, "ttft": None, "stream": None}

        async def consume() -> None:
            stream = got["stream"] = await ep.client.chat.completions.create(
                **stream_kw, timeout=max(0.01, deadline - time.perf_counter())
            )
            chunks = stream.__aiter__()
            while True:
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except json.JSONDecodeError as exc:  # `data: {not json`: the transport, not the model
                    raise not_json_event(exc) from None
                except (self._openai.APIConnectionError, *self._transport_errors()) as exc:
                    if isinstance(exc, self._openai.APITimeoutError):
                        raise
                    # the connection broke mid-stream (the server was reached: it answered)
                    cause = exc.__cause__ or exc
                    raise BrokenReply(
                        f"the stream was cut before its end ({type(cause).__name__}: {cause})"
                    ) from None
                if isinstance(chunk, str):
                    raise BrokenReply(f"the server sent a stream event that is not a chunk: {chunk[:120]!r}")
                got["model"] = getattr(chunk, "model", None) or got["model"]
                if getattr(chunk, "usage", None) is not None:
                    got["usage"] = chunk.usage
                for choice in getattr(chunk, "choices", None) or []:
                    delta = choice.delta
                    piece = (getattr(delta, "content", None) or "") if delta is not None else ""
                    think = _reasoning_of(delta) if delta is not None else ""
                    if (piece or think) and got["ttft"] is None:
                        got["ttft"] = time.perf_counter() - a0
                    content.append(piece)
                    reasoning.append(think)
                    logprobs.extend(entries_of(getattr(choice, "logprobs", None)))
                    got["finish"] = choice.finish_reason or got["finish"]
            if got["finish"] is None and not "".join(content) and not "".join(reasoning):
                raise EmptyStream("malformed response: the stream ended without a choice")

        try:
            # past the deadline the read is cancelled and the stream closed below: the connection is
            # dropped (not handed back half-read), so the server sees the client leave and stops
            await asyncio.wait_for(consume(), timeout=max(0.0, deadline - time.perf_counter()))
        except TimeoutError:
            raise DecisionTimeout() from None
        finally:
            if got["stream"] is not None:  # a finished stream hands its connection back (keep-alive)
                with contextlib.suppress(Exception):
                    await got["stream"].close()
        text = "".join(content)
        thinks = [t.strip() for t in THINK_RE.findall(text)]
        think_text = "\n".join(["".join(reasoning), *thinks]).strip()
        return _Answer(
            text, think_text, self._usage(got["usage"]), got["finish"], got["model"], got["ttft"], logprobs
        )

    async def _once(self, ep: _Endpoint, kw: dict[str, Any], deadline: float) -> _Answer:
        left = max(0.01, deadline - time.perf_counter())
        try:
            resp = await asyncio.wait_for(ep.client.chat.completions.create(**kw, timeout=left), timeout=left)
        except TimeoutError:
            raise DecisionTimeout() from None
        except json.JSONDecodeError as exc:
            raise BrokenReply(f"the server sent a reply that is not JSON: {exc.doc[:120]!r}") from None
        if isinstance(resp, str) or not getattr(resp, "choices", None):
            raise ValueError(f"malformed response: {str(resp)[:200]!r}")
        content, reasoning = split_reasoning(resp.choices[0].message)
        return _Answer(
            content,
            reasoning,
            self._usage(resp.usage),
            resp.choices[0].finish_reason,
            resp.model,
            None,
            entries_of(getattr(resp.choices[0], "logprobs", None)),
        )

    @staticmethod
    def _usage(u: Any) -> dict[str, int] | None:
        if u is None:
            return None
        return {
            "prompt_tokens": int(getattr(u, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(u, "completion_tokens", 0) or 0),
            "total_tokens": int(getattr(u, "total_tokens", 0) or 0),
        }

    # -- errors -------------------------------------------------------------------------------------
    def _status_text(self, exc: Exception) -> tuple[int | None, str, str]:
        o = self._openai
        if not isinstance(exc, o.APIStatusError):
            return None, "", ""
        raw = ""
        with contextlib.suppress(Exception):  # a streamed body may be unreadable
            raw = exc.response.text
        body = exc.body
        if body is None and raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw
        return exc.status_code, error_body_text(body, raw), error_code(body)

    def _adjustment(self, exc: Exception, kw: dict[str, Any]) -> str | None:
        """A request change the server's 4xx asks for: no streaming, a smaller max_tokens, or
        max_completion_tokens instead of max_tokens. Applies it to `kw` and returns a note."""
        if isinstance(exc, EmptyStream):
            kw["_unstreamed_once"] = True
            return "the stream ended empty: asking once more unstreamed to learn the server's error"
        status, text, _code = self._status_text(exc)
        if status not in (400, 422):
            return None
        low = text.lower()
        key = "max_completion_tokens" if "max_completion_tokens" in kw else "max_tokens"
        if "stream" in low and self._facts.get("stream", True) and self.settings.stream:
            self._facts["stream"] = False
            return "the server does not stream: sending whole replies"
        room = output_room(text)
        m = re.search(r"at most (\d+) completion tokens", text)
        if m:
            room = int(m.group(1))
        if room is not None and key in kw and 16 <= room < kw[key]:
            self._facts["max_tokens_cap"] = room
            kw[key] = room
            return f"max tokens lowered to {room} (the server's limit)"
        if "unsupported parameter" in low and "max_completion_tokens" in low and "max_tokens" in kw:
            kw["max_completion_tokens"] = kw.pop("max_tokens")
            self._facts["max_tokens_key"] = "max_completion_tokens"
            return "sending max_completion_tokens instead of max_tokens"
        return None

    @staticmethod
    def _transport_errors() -> tuple[type[BaseException], ...]:
        """What the openai client's HTTP library (httpx, httpx2 in openai 3) raises when a stream
        breaks mid-read: the client wraps only errors of the request itself into APIConnectionError."""
        found = []
        for name in ("httpx2", "httpx"):
            with contextlib.suppress(ImportError):
                found.append(importlib.import_module(name).TransportError)
        return tuple(found)

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, DecisionTimeout | o.APITimeoutError):
            return self.settings.retry_timeouts
        if isinstance(exc, o.APIConnectionError | BrokenReply):
            return True
        return isinstance(exc, o.APIStatusError) and exc.status_code in RETRY_STATUS

    def _describe(self, exc: Exception) -> str:
        o = self._openai
        if isinstance(exc, DecisionTimeout | o.APITimeoutError):
            msg = f"no answer within {self.settings.timeout_s:g} s (timeout; stream closed)"
        elif isinstance(exc, BrokenReply):
            msg = str(exc)
        elif isinstance(exc, o.APIConnectionError):
            msg = f"cannot reach {self.settings.base_url or 'the API'}: {exc.__cause__ or exc}"
        elif isinstance(exc, o.APIStatusError):
            status, text, _code = self._status_text(exc)
            msg = f"HTTP {status}: {clean_line(text) or exc.message}"
        else:
            msg = f"{type(exc).__name__}: {exc}"
        return self.redact(clean_line(self.redact(str(msg)), 500))

    # -- one decision -------------------------------------------------------------------------------
    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The decision, blocking (on this process's background event loop)."""
        return _LoopThread.run(self.aact(messages, ctx))

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        """The decision, awaited on the running loop (its shared client for this endpoint)."""
        s = self.settings
        t0 = time.perf_counter()
        attempts: list[dict[str, Any]] = []
        info: dict[str, Any] = {"attempts": attempts}

        def failed(error: str, **extra: Any) -> PolicyReply:
            info["decision_s"] = time.perf_counter() - t0
            info.update(extra)
            return PolicyReply("", 0.0, error=error, info=info)

        try:
            ep = self._endpoint()
            kw = await self._request(messages, ctx, info)
        except Exception as exc:  # e.g. unserialisable extra body, a dead server at the probe
            if self._retryable(exc):  # the endpoint failed, not the model
                return failed(self._describe(exc), end_reason="endpoint_error")
            return failed(self._describe(exc))
        attempt = adjustments = 0
        unstreamed = False  # for the rest of this decision, after an empty stream
        while True:
            unstreamed = unstreamed or bool(kw.pop("_unstreamed_once", False))
            streamed = s.stream and self._facts.get("stream", True) and not unstreamed
            a0 = time.perf_counter()
            try:
                async with ep.slot(info):
                    a0 = time.perf_counter()  # the attempt starts when a slot is ours
                    deadline = a0 + s.timeout_s
                    if streamed:
                        ans = await self._stream(ep, kw, deadline, a0)
                    else:
                        ans = await self._once(ep, kw, deadline)
            except Exception as exc:  # any failure is reported, never raised
                err = self._describe(exc)
                rec: dict[str, Any] = {
                    "attempt": len(attempts) + 1,
                    "error": err,
                    "seconds": time.perf_counter() - a0,
                }
                status, text, code = self._status_text(exc)
                if status is not None:
                    rec["status"] = status
                note = self._adjustment(exc, kw) if adjustments < MAX_ADJUSTMENTS else None
                if note is not None:  # not a retry: the request changed as the server asked
                    adjustments += 1
                    info.setdefault("adjustments", []).append(rec | {"adjusted": note})
                    continue
                if is_context_error(status, text, code):
                    attempts.append(rec | {"wait_s": 0.0})
                    return failed(f"the server's context is full: {err}", end_reason="context_budget")
                retry = self._retryable(exc) and attempt < s.max_retries
                wait = min(s.backoff_max_s, s.backoff_s * 2**attempt) if retry else 0.0
                attempts.append(rec | {"wait_s": wait})
                if not retry:
                    tries = f" after {len(attempts)} attempts" if len(attempts) > 1 else ""
                    if self._retryable(exc):  # retries ran out on a transport fault: not the model's
                        return failed(f"{err}{tries}", end_reason="endpoint_error")
                    return failed(f"{err}{tries}")
                attempt += 1
                await asyncio.sleep(wait)
                continue
            latency = time.perf_counter() - a0
            attempts.append({"attempt": len(attempts) + 1, "seconds": latency, "ttft_s": ans.ttft_s})
            break
        info.update(
            retries=len(attempts) - 1,
            finish_reason=ans.finish_reason,
            model=ans.model,
            ttft_s=ans.ttft_s,
            streamed=streamed,
            decision_s=time.perf_counter() - t0,
        )
        content = ans.content
        if ans.reasoning:
            info["reasoning"] = self.redact(ans.reasoning)
        if not content.strip() and ans.reasoning:
            # some servers put everything in the reasoning field when the budget runs out
            content = ans.reasoning
        usage = ans.usage
        if usage is None and not self._facts.get("counted"):
            usage_probe = await self._count_prompt(ep, kw)
            if usage_probe is not None:
                info["prompt_tokens_counted"] = usage_probe
        prompt_tokens = usage["prompt_tokens"] if usage else info.get("prompt_tokens_counted")
        if prompt_tokens is not None:
            warning = dropped_prompt_warning(prompt_tokens, kw["messages"])
            if warning:
                info.setdefault("warnings", []).append(warning)
                _warn(warning)
        for w in info.get("warnings", []):
            _warn(w)
        trace = trace_from_logprobs(ans.logprobs) if s.logprobs else None
        return PolicyReply(content, latency, usage=usage, info=info, tokens=trace)

    async def _count_prompt(self, ep: _Endpoint, kw: dict[str, Any]) -> int | None:
        """A server that streams without usage (llama-cpp-python): once per process, the same
        prompt with 1 output token, unstreamed, to learn how many prompt tokens it saw."""
        self._facts["counted"] = True
        key = "max_completion_tokens" if "max_completion_tokens" in kw else "max_tokens"
        probe = {
            k: v for k, v in kw.items() if k not in ("response_format", "max_tokens", "max_completion_tokens")
        }
        try:
            async with ep.slot({}):
                resp = await ep.client.chat.completions.create(
                    **probe, **{key: 1}, timeout=min(30.0, self.settings.timeout_s)
                )
            return int(resp.usage.prompt_tokens) if getattr(resp, "usage", None) else None
        except Exception:  # a count is a nicety; the decision already succeeded
            return None
