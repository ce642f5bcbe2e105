"""A model server that misbehaves, in a process of its own: `pear-agent serve`'s app (the
scripted expert behind an OpenAI-compatible endpoint) under uvicorn, behind a middleware that
answers chat requests, in arrival order, with the faults of a cycled list:

- `ok`: the expert's reply, streamed or not as asked;
- `500`: HTTP 500 with an OpenAI-style error body; `429`: HTTP 429 (Retry-After: 0);
- `cut`: a 200 stream with one event, then the connection dropped before the stream's end;
- `garbage`: a 200 stream whose first event is `data: {not json` (unstreamed: a body that is not JSON);
- `hang`: nothing for `--hang-s` seconds (past the client's timeout), then the reply.

    python -m tests.fault_server --port 8123 --faults ok,500,ok,garbage --stats stats.json

Every chat request is counted by kind in `--stats` (JSON, rewritten after each one).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
from pathlib import Path
from typing import Any

KINDS = ("ok", "500", "429", "cut", "garbage", "hang")


class FaultInjector:
    """ASGI middleware: chat requests get the next fault of the cycle; everything else passes."""

    def __init__(self, app: Any, faults: list[str], hang_s: float, stats: Path | None) -> None:
        self.app, self.hang_s, self.stats_path = app, hang_s, stats
        self.cycle = itertools.cycle(faults)
        self.counts = dict.fromkeys(KINDS, 0)

    def _write_stats(self) -> None:
        if self.stats_path is not None:
            tmp = self.stats_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.counts))
            tmp.replace(self.stats_path)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/chat/completions"):
            await self.app(scope, receive, send)
            return
        kind = next(self.cycle)
        self.counts[kind] += 1
        self._write_stats()
        if kind == "ok":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:  # read the request (as a server does) before answering
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        streamed = bool(json.loads(body or b"{}").get("stream"))
        if kind == "hang":
            await asyncio.sleep(self.hang_s)

            async def replay() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send)
            return
        if kind in ("500", "429"):
            status = int(kind)
            err = {"error": {"message": f"injected HTTP {status}", "type": "server_error", "code": status}}
            headers = [(b"content-type", b"application/json")]
            if status == 429:
                headers.append((b"retry-after", b"0"))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": json.dumps(err).encode()})
            return
        ctype = b"text/event-stream" if streamed else b"application/json"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]})
        if kind == "garbage":
            payload = b"data: {not json\n\n" if streamed else b"{not json"
            await send({"type": "http.response.body", "body": payload, "more_body": streamed})
            if streamed:
                await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
            return
        # cut: one well-formed event, then the connection goes away mid-stream
        first = {
            "id": "cut",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "pear-scripted-expert",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "I "}, "finish_reason": None}],
        }
        await send(
            {
                "type": "http.response.body",
                "body": f"data: {json.dumps(first)}\n\n".encode(),
                "more_body": True,
            }
        )
        raise ConnectionAbortedError("fault_server: stream cut on purpose")


def main(argv: list[str] | None = None) -> int:
    import uvicorn

    from pear_agent.loop.expert_server import create_app

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--faults", default="ok", help=f"comma list cycled over chat requests: {', '.join(KINDS)}")
    p.add_argument("--hang-s", type=float, default=5.0)
    p.add_argument("--stats", type=Path, default=None)
    args = p.parse_args(argv)
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    bad = [f for f in faults if f not in KINDS]
    if bad or not faults:
        print(f"fault_server: unknown fault {bad[:1]}; kinds are {', '.join(KINDS)}", file=sys.stderr)
        return 2
    app = FaultInjector(create_app(), faults, args.hang_s, args.stats)
    app._write_stats()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="critical", timeout_graceful_shutdown=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
