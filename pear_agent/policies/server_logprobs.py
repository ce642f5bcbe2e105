"""A server's per-token log-probabilities as a `TokenTrace` (the sampled ids and log mu of each).

OpenAI-style chat completions return `choices[0].logprobs.content`: one entry per generated token
with `token` (its text) and `logprob`. The ids come from:
- vLLM started with `--return-tokens-as-token-ids` (or the request field of that name): each
  `token` is `"token_id:<id>"`;
- servers that add a `token_id` field beside each entry (`pear-agent train serve` does);
Without ids (a hosted API) the text alone cannot be trusted to re-tokenise to the same ids, so no
trace is made (None) and the reply's text is trained as text. Streamed chunks carry their entries
piecewise: concatenate them in order (`entries_of`).
"""

from __future__ import annotations

import re
from typing import Any

from pear_agent.policies.base import TokenTrace

TOKEN_ID_RE = re.compile(r"^token_id:(\d+)$")


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def entries_of(logprobs: Any) -> list[Any]:
    """The per-token entries of one choice's `logprobs` object (or []): `content` (chat) entries."""
    if logprobs is None:
        return []
    content = _get(logprobs, "content")
    return list(content or [])


def token_id(entry: Any) -> int | None:
    raw = _get(entry, "token_id")
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    m = TOKEN_ID_RE.match(str(_get(entry, "token") or ""))
    if m:
        return int(m.group(1))
    extra = getattr(entry, "model_extra", None) or {}
    raw = extra.get("token_id")
    return raw if isinstance(raw, int) and not isinstance(raw, bool) else None


def trace_from_logprobs(entries: list[Any], policy_version: int | None = None) -> TokenTrace | None:
    """A TokenTrace from logprob entries; None when any entry lacks its id or a finite log-prob."""
    ids, lps = [], []
    for e in entries:
        tid = token_id(e)
        lp = _get(e, "logprob")
        if tid is None or not isinstance(lp, int | float) or lp != lp or lp > 0:
            return None
        ids.append(tid)
        lps.append(float(lp))
    if not ids:
        return None
    return TokenTrace(ids, lps, policy_version)
