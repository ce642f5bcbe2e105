"""Local HTTP servers for tests: `pear-agent serve` in a thread, and a misbehaving endpoint."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serve_in_thread(latency_s: float = 0.0, reasoning_field: bool = False) -> Iterator[str]:
    """`pear-agent serve`'s app under uvicorn on a free port; yields the base URL."""
    import uvicorn

    from pear_agent.serve import create_app

    port = free_port()
    config = uvicorn.Config(
        create_app(latency_s, reasoning_field=reasoning_field), host="127.0.0.1", port=port, log_level="error"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


GOOD_REPLY = 'I open the gripper.\n```json\n{"arm": {"gripper": 1.0}}\n```'


class BadHandler(BaseHTTPRequestHandler):
    """Behaviour chosen by the first path segment: /500/v1, /429/v1, /garbage/v1, /hang/v1, /flaky/v1
    (two 503s, then a valid reply). Error bodies echo the Authorization header, as a careless proxy
    might, so redaction is tested for real."""

    calls: ClassVar[dict[str, int]] = {}

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

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        mode = self.path.strip("/").split("/")[0]
        BadHandler.calls[mode] = BadHandler.calls.get(mode, 0) + 1
        auth = self.headers.get("Authorization", "")
        err = json.dumps({"error": {"message": f"server exploded; you sent {auth}", "type": "x"}}).encode()
        if mode == "500":
            self._send(500, err)
        elif mode == "429":
            self._send(429, err)
        elif mode == "garbage":
            self._send(200, b"<html>this is not JSON " + auth.encode() + b"</html>", "text/html")
        elif mode == "badjson":
            self._send(200, b'{"unexpected": true}')
        elif mode == "hang":
            time.sleep(5)
            self._send(500, err)
        elif mode == "flaky" and BadHandler.calls[mode] % 3 != 0:
            self._send(503, err)
        else:
            body = {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": GOOD_REPLY},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
            self._send(200, json.dumps(body).encode())


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
