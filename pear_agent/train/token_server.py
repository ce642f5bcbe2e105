"""Token-in, token-out against an inference server: the trainer's generator on GPUs.

The chat-completions path sends text, and the server tokenises it again: the context the sampler
saw can then differ from the sequence the trainer rebuilds (a reply sampled as `J`,`SON` comes
back as text and re-tokenises as `JSON`). Here the episode is kept as ONE token sequence in the
model's chat template (`pear_agent.train.sequences.ChatSequence`, the same builder the in-process
generator and the trainer use); each turn sends the whole sequence's token ids as the prompt of
`POST /v1/completions` and appends the ids the server sampled, exactly as sampled. The server
must return them:

- vLLM: the request sets `return_tokens_as_token_ids` (each logprob token is `token_id:<id>`) and
  `logprobs: 1` (the sampled token's log-probability is always among them); `return_token_ids`
  (newer vLLM) adds `choices[].token_ids`. vLLM accepts a token-id list as `prompt`.
- `pear-agent train serve` answers the same (vLLM's fields).

A server that returns no ids (llama-cpp-python's server: its prompt is text, its logprob tokens
are text) is refused with a `TokenServerError` naming the setting, never trained on as text.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any, NamedTuple

from pear_agent.policies.base import PolicyReply, TurnContext
from pear_agent.protocol.prompts import Message
from pear_agent.train.chat_template import turn_end_ids
from pear_agent.train.local_model import open_turn, sampled_reply
from pear_agent.train.sequences import ChatSequence
from pear_agent.train.vision import reply_banned_ids

TOKEN_ID_RE = re.compile(r"^token_id:(\d+)$")
LOGIT_BIAS_FLOOR = -100.0
"""The lowest logit bias OpenAI's API and vLLM accept (vLLM clamps to [-100, 100])."""


def _http() -> Any:
    """The HTTP client the openai SDK brings (httpx2; httpx with older SDKs)."""
    try:
        import httpx2 as httpx  # optional: httpx2
    except ImportError:  # pragma: no cover - older openai SDKs
        import httpx  # type: ignore[no-redef]  # heavy: httpx
    return httpx


class TokenServerError(ValueError):
    """The server did not answer token-in, token-out (one line naming the setting)."""


def parse_completion(body: dict[str, Any], base_url: str) -> tuple[list[int], list[float], str, str]:
    """(sampled ids, their log-probabilities, text, finish reason) of a `/v1/completions` answer."""
    choices = body.get("choices") or []
    if not choices:
        raise TokenServerError(f"{base_url}/completions answered without choices: {str(body)[:200]}")
    choice = choices[0]
    lp = choice.get("logprobs") or {}
    tokens = lp.get("tokens") or []
    lps = lp.get("token_logprobs") or []
    ids: list[int] | None = None
    if isinstance(choice.get("token_ids"), list):
        ids = [int(t) for t in choice["token_ids"]]
    elif tokens and all(isinstance(t, str) and TOKEN_ID_RE.match(t) for t in tokens):
        ids = [int(TOKEN_ID_RE.match(t).group(1)) for t in tokens]  # type: ignore[union-attr]
    if ids is None:
        raise TokenServerError(
            f"the server at {base_url} returned no token ids for its completion (logprob tokens "
            f"{tokens[:3]!r}...): token-in, token-out needs them. Serve with vLLM (the request sets "
            "return_tokens_as_token_ids=true and logprobs=1) or `pear-agent train serve`; "
            "llama-cpp-python's server returns text tokens only"
        )
    if len(lps) != len(ids) or any(x is None or not math.isfinite(x) for x in lps):
        raise TokenServerError(
            f"the server at {base_url} returned {len(ids)} token ids but {len(lps)} log-probabilities: "
            "the request sets logprobs=1; a server that drops them cannot be trained on"
        )
    return ids, [float(x) for x in lps], str(choice.get("text") or ""), str(choice.get("finish_reason") or "")


class _Request(NamedTuple):
    t0: float
    """When the turn started (perf_counter)."""
    ids: list[int]
    """The prompt's token ids (the episode so far)."""
    call: dict[str, Any]
    """The POST's url, JSON body and headers."""


class TokenServerPolicy:
    """One reply per turn from a `/v1/completions` server, prompt and reply as token ids."""

    def __init__(
        self,
        base_url: str,
        model: str,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        max_new_tokens: int = 64,
        seed: int = 0,
        policy_version: int | None = None,
        stop_ids: list[int] | None = None,
        api_key: str | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        self.base_url, self.model, self.tokenizer = base_url.rstrip("/"), model, tokenizer
        self.temperature, self.max_new_tokens, self.seed = temperature, max_new_tokens, seed
        self.policy_version = policy_version
        self.stop_ids = list(stop_ids) if stop_ids is not None else turn_end_ids(tokenizer)
        self.banned = sorted(set(reply_banned_ids(tokenizer)) - set(self.stop_ids))
        """Special tokens no reply may hold: sent as `logit_bias` -100 (vLLM clamps biases to
        [-100, 100]; e^-100 is below float32's resolution next to any real token), as the loss and
        the in-process samplers ban them, so the server samples the distribution the loss trains."""
        self.api_key, self.timeout_s = api_key, timeout_s
        self.name = f"server:{model}"
        self.reset(seed)

    def reset(self, seed: int) -> None:
        self._episode_seed = seed
        self._turn = 0
        self.sequence = ChatSequence(self.tokenizer)

    def request_body(self, ids: list[int]) -> dict[str, Any]:
        return {
            "model": self.model,
            "prompt": ids,
            "max_tokens": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": 1.0,
            "top_k": -1,
            "seed": hash((self.seed, self._episode_seed, self._turn)) % (2**31),
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "skip_special_tokens": False,
            "stop_token_ids": self.stop_ids,
            "include_stop_str_in_output": True,
            "logit_bias": {str(i): LOGIT_BIAS_FLOOR for i in self.banned},
        }

    def _answer(self, ids: list[int], r: Any, t0: float) -> PolicyReply:
        """The server's HTTP answer as the turn's reply."""
        if r.status_code != 200:
            return self._refused(r.status_code, r.text)
        return self._finish(ids, r.json(), t0)

    def _finish(self, ids: list[int], body: dict[str, Any], t0: float) -> PolicyReply:
        """A server without ids raises: never trained on as text."""
        out_ids, logprobs, _, _ = parse_completion(body, self.base_url)
        return sampled_reply(self, ids, out_ids, logprobs, t0)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _refused(self, status: int, text: str) -> PolicyReply:
        if status in (400, 422, 500) and "prompt" in text:  # llama-cpp-python: 500 on validation
            raise TokenServerError(
                f"the server at {self.base_url} refused a token-id prompt (HTTP {status}: "
                f"{' '.join(text.split())[:160]}): token-in, token-out needs a server whose /v1/completions "
                "takes `prompt` as token ids (vLLM, `pear-agent train serve`); llama-cpp-python's takes text"
            )
        return PolicyReply(
            "", 0.0, error=f"HTTP {status} from {self.base_url}: {' '.join(text.split())[:300]}"
        )

    def _error(self, exc: Exception) -> PolicyReply:
        return PolicyReply("", 0.0, error=" ".join(f"{type(exc).__name__}: {exc}".split())[:500])

    def _request(self, messages: list[Message]) -> _Request | PolicyReply:
        """A turn's request, or the reply that ends the turn before it is sent."""
        t0 = time.perf_counter()
        ids = open_turn(self, messages)
        if isinstance(ids, PolicyReply):
            return ids
        url = f"{self.base_url}/completions"
        return _Request(t0, ids, {"url": url, "json": self.request_body(ids), "headers": self._headers()})

    async def aact(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        req = self._request(messages)
        if isinstance(req, PolicyReply):
            return req
        httpx = _http()
        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                r = await client.post(**req.call)
        except httpx.HTTPError as exc:
            return self._error(exc)
        return self._answer(req.ids, r, req.t0)

    def act(self, messages: list[Message], ctx: TurnContext) -> PolicyReply:
        req = self._request(messages)
        if isinstance(req, PolicyReply):
            return req
        httpx = _http()
        try:
            r = httpx.post(**req.call, timeout=self.timeout_s)
        except httpx.HTTPError as exc:
            return self._error(exc)
        return self._answer(req.ids, r, req.t0)


def check_processed_logprobs(base_url: str, model: str, tokenizer: Any, timeout_s: float = 120.0) -> None:
    """Refuse a server whose log-probabilities are not of the distribution it sampled.

    vLLM returns the raw logits' log-probabilities (before temperature and logit bias) unless it
    was started with `--logprobs-mode processed_logprobs`; log mu would then not be the sampler's,
    and the trainer's drift and score-centring would compare against another distribution. The
    probe asks for one token with a +100 logit bias on a special token: a processed log-probability
    is ~0 (the bias makes it certain), a raw one is the model's own (far below 0)."""

    stops = set(turn_end_ids(tokenizer))
    banned = [i for i in reply_banned_ids(tokenizer) if i not in stops]
    target = banned[0] if banned else sorted(stops)[0]
    prompt = tokenizer("Reply with one word.", add_special_tokens=False)["input_ids"] or [target]
    body = {
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 1.0,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
        "skip_special_tokens": False,
        "logit_bias": {str(target): 100.0},
    }
    httpx = _http()
    try:
        r = httpx.post(f"{base_url.rstrip('/')}/completions", json=body, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise TokenServerError(f"cannot reach the server at {base_url}: {exc}") from None
    if r.status_code != 200:
        raise TokenServerError(
            f"the server at {base_url} refused the log-probability probe (HTTP {r.status_code}: "
            f"{' '.join(r.text.split())[:160]})"
        )
    ids, lps, _, _ = parse_completion(r.json(), base_url)
    if ids[:1] != [target] or lps[0] < -0.01:
        raise TokenServerError(
            f"the server at {base_url} returns raw log-probabilities (a token given a +100 logit bias came "
            f"back with log-probability {lps[0]:.2f}, not ~0): start vLLM with --logprobs-mode "
            "processed_logprobs (vllm_sync.serve_command writes it) so log mu is the sampled distribution"
        )
