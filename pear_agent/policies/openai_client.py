"""Any OpenAI-compatible chat endpoint as the policy (vLLM, SGLang, a hosted API, `pear-agent serve`).

Retries are our own loop (the client's `max_retries` is 0) so each attempt, its error and its wait
land in the episode log. Every failure becomes `PolicyReply(error=...)`: the episode ends with
"policy_error" instead of hanging or raising. The API key is read from the environment variable
named by `api_key_env` and is scrubbed from every message this module produces.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message
from pear_agent.records import SECRET_PATTERNS

THINK_RE = re.compile(r"<think>(.*?)(?:</think>|$)", re.DOTALL)
RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
PRIVILEGED_KEY = "pear_privileged"
"""`extra_body` key carrying the turn's simulator facts when `send_privileged` is on (diagnostic)."""


@dataclass
class ModelSettings:
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the key; None for a local server that needs none."""
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 20.0
    keep_images: int | None = None
    """Keep only the last K user turns' images; older ones become a short text placeholder."""
    send_privileged: bool = False
    """Diagnostic: attach privileged simulator facts (for `pear-agent serve`'s scripted expert)."""


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def strip_images(messages: list[Message], keep_last: int | None) -> list[Message]:
    """Request copy of the conversation: private keys dropped, images beyond the last K turns replaced.

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
        out.append({"role": m["role"], "content": parts})
    return out


def split_reasoning(message: Any) -> tuple[str, str]:
    """(content, reasoning) from a chat message: `reasoning_content`/`reasoning` fields and
    `<think>` blocks are reasoning; the parser also skips `<think>` blocks in the content."""
    content = getattr(message, "content", None) or ""
    extra = getattr(message, "model_extra", None) or {}
    reasoning = ""
    for key in ("reasoning_content", "reasoning"):
        val = getattr(message, key, None) or extra.get(key)
        if isinstance(val, str) and val:
            reasoning = val
            break
    thinks = [t.strip() for t in THINK_RE.findall(content)]
    if thinks:
        reasoning = "\n".join([reasoning, *thinks]).strip()
    return content, reasoning


class OpenAIPolicy:
    """One chat completion per turn over the append-only conversation."""

    def __init__(self, settings: ModelSettings) -> None:
        import openai

        self.settings = settings
        self.name = f"openai:{settings.model}"
        self._key = ""
        if settings.api_key_env:
            self._key = os.environ.get(settings.api_key_env, "")
            if not self._key:
                raise ValueError(f"environment variable {settings.api_key_env} (--api-key-env) is not set")
        self._openai = openai
        self.client = openai.OpenAI(
            api_key=self._key or "not-needed",
            base_url=settings.base_url,
            timeout=settings.timeout_s,
            max_retries=0,
        )

    def redact(self, text: str) -> str:
        if self._key:
            text = text.replace(self._key, "[redacted]")
        for pat in SECRET_PATTERNS:
            text = pat.sub("[redacted]", text)
        return text

    def reset(self, seed: int) -> None:
        pass

    def _request(self, messages: list[Message], ctx: TurnContext) -> dict[str, Any]:
        s = self.settings
        kw: dict[str, Any] = {"model": s.model, "messages": strip_images(messages, s.keep_images)}
        if s.temperature is not None:
            kw["temperature"] = s.temperature
        if s.max_tokens is not None:
            kw["max_tokens"] = s.max_tokens
        if s.reasoning_effort:
            kw["reasoning_effort"] = s.reasoning_effort
        body = dict(s.extra_body)
        if s.send_privileged:
            body[PRIVILEGED_KEY] = _jsonable(
                {"task": ctx.task, "state": ctx.state, "facts": ctx.observation.privileged}
            )
        if body:
            kw["extra_body"] = body
        kw["timeout"] = s.timeout_s
        return kw

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, o.APIConnectionError | o.APITimeoutError):  # timeout subclasses connection
            return True
        return isinstance(exc, o.APIStatusError) and exc.status_code in RETRY_STATUS

    def _describe(self, exc: Exception) -> str:
        o = self._openai
        if isinstance(exc, o.APITimeoutError):
            msg = f"no answer within {self.settings.timeout_s:g} s (timeout)"
        elif isinstance(exc, o.APIConnectionError):
            msg = f"cannot reach {self.settings.base_url or 'the API'}: {exc.__cause__ or exc}"
        elif isinstance(exc, o.APIStatusError):
            msg = f"HTTP {exc.status_code}: {exc.message}"
        else:
            msg = f"{type(exc).__name__}: {exc}"
        return self.redact(" ".join(str(msg).split())[:500])

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        s = self.settings
        t0 = time.perf_counter()
        attempts: list[dict[str, Any]] = []
        info: dict[str, Any] = {"attempts": attempts}
        try:
            kw = self._request(messages, ctx)
        except Exception as exc:  # e.g. unserialisable extra body: end cleanly
            return PolicyReply("", time.perf_counter() - t0, error=self._describe(exc), info=info)
        for attempt in range(s.max_retries + 1):
            a0 = time.perf_counter()
            try:
                resp = self.client.chat.completions.create(**kw)
                if isinstance(resp, str) or not getattr(resp, "choices", None):
                    raise ValueError(f"malformed response: {str(resp)[:200]!r}")
                content, reasoning = split_reasoning(resp.choices[0].message)
            except Exception as exc:  # any failure is reported, never raised
                err = self._describe(exc)
                retry = self._retryable(exc) and attempt < s.max_retries
                wait = min(s.backoff_max_s, s.backoff_s * 2**attempt) if retry else 0.0
                attempts.append(
                    {
                        "attempt": attempt + 1,
                        "error": err,
                        "seconds": time.perf_counter() - a0,
                        "wait_s": wait,
                    }
                )
                if not retry:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    return PolicyReply("", time.perf_counter() - t0, error=f"{err}{tries}", info=info)
                time.sleep(wait)
                continue
            attempts.append({"attempt": attempt + 1, "seconds": time.perf_counter() - a0})
            usage = None
            if getattr(resp, "usage", None) is not None:
                u = resp.usage
                usage = {
                    "prompt_tokens": int(u.prompt_tokens or 0),
                    "completion_tokens": int(u.completion_tokens or 0),
                    "total_tokens": int(u.total_tokens or 0),
                }
            info.update(retries=attempt, finish_reason=resp.choices[0].finish_reason, model=resp.model)
            if reasoning:
                info["reasoning"] = self.redact(reasoning)
            if not content.strip() and reasoning:
                # some servers put everything in the reasoning field when the budget runs out
                content = reasoning
            return PolicyReply(content, time.perf_counter() - t0, usage=usage, info=info)
        raise AssertionError("unreachable")


# -- command-line options shared by `run` and `bench` ---------------------------------------------
def add_model_args(p: Any) -> None:
    """Model and clock options (argparse): `--model` switches the policy to the OpenAI client."""
    g = p.add_argument_group("model (any OpenAI-compatible endpoint)")
    g.add_argument("--model", default=None, help="model name; selects the OpenAI-compatible client")
    g.add_argument("--base-url", default=None, help="e.g. http://localhost:8000/v1 (default: OpenAI's)")
    g.add_argument("--api-key-env", default=None, help="NAME of the environment variable holding the key")
    g.add_argument("--temperature", type=float, default=None)
    g.add_argument("--max-tokens", type=int, default=None)
    g.add_argument("--reasoning-effort", default=None, help="passed through (e.g. low, medium, high)")
    g.add_argument("--extra-body", default=None, help="JSON object merged into the request body")
    g.add_argument("--timeout-s", type=float, default=120.0, help="per-call timeout (default 120)")
    g.add_argument("--max-retries", type=int, default=3, help="retries on 429/5xx/connection errors")
    g.add_argument(
        "--keep-images", type=int, default=None, metavar="K", help="send only the last K turns' images"
    )
    g.add_argument(
        "--send-privileged",
        action="store_true",
        help="diagnostic: send simulator facts so `pear-agent serve`'s scripted expert can answer",
    )
    c = p.add_argument_group("clock and context")
    c.add_argument("--realtime", action="store_true", help="the world keeps moving while the model thinks")
    c.add_argument(
        "--latency", type=float, default=None, metavar="S", help="realtime: inject S s per decision"
    )
    c.add_argument("--max-context-tokens", type=int, default=64000, help="context token budget")


def settings_from_args(args: Any) -> ModelSettings | None:
    if not getattr(args, "model", None):
        for opt in ("base_url", "api_key_env", "extra_body", "reasoning_effort"):
            if getattr(args, opt, None):
                raise ValueError(f"--{opt.replace('_', '-')} needs --model")
        return None
    extra: dict[str, Any] = {}
    if args.extra_body:
        try:
            extra = json.loads(args.extra_body)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--extra-body is not valid JSON: {exc}") from None
        if not isinstance(extra, dict):
            raise ValueError("--extra-body must be a JSON object")
    if args.timeout_s <= 0 or args.max_retries < 0:
        raise ValueError("--timeout-s must be > 0 and --max-retries >= 0")
    if args.keep_images is not None and args.keep_images < 0:
        raise ValueError("--keep-images must be >= 0")
    return ModelSettings(
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        reasoning_effort=args.reasoning_effort,
        extra_body=extra,
        timeout_s=args.timeout_s,
        max_retries=args.max_retries,
        keep_images=args.keep_images,
        send_privileged=args.send_privileged,
    )


def clock_from_args(args: Any) -> dict[str, Any]:
    """EpisodeConfig keyword arguments for the clock and the context budget."""
    if args.latency is not None and not args.realtime:
        raise ValueError("--latency needs --realtime (an injected latency only matters when the world moves)")
    if args.latency is not None and args.latency < 0:
        raise ValueError("--latency must be >= 0")
    return {
        "mode": "realtime" if args.realtime else "paused",
        "latency_s": args.latency,
        "max_context_tokens": args.max_context_tokens,
    }


def secrets_from_args(args: Any) -> list[str]:
    """The key's value, for the run writer's redaction (never written anywhere)."""
    env = getattr(args, "api_key_env", None)
    return [os.environ[env]] if env and os.environ.get(env) else []
