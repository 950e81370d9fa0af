"""A real HTTP server on 127.0.0.1 that speaks OpenAI chat completions, with scripted replies and faults."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# a fault plan answers (request number, request body) with one of:
# "ok", "429", "500", "slow", "badjson", "empty", "reset" (the connection is dropped with a TCP reset, no answer)
FaultPlan = Callable[[int, dict], str]


class FakeOpenAI:
    def __init__(
        self,
        reply: Callable[[dict], str],
        faults: FaultPlan = lambda n, body: "ok",
        slow_seconds: float = 3.0,
        retry_after: str | None = None,
    ):
        self.reply = reply
        self.faults = faults
        self.slow_seconds = slow_seconds
        self.retry_after = retry_after  # the Retry-After header every 429 carries, if any
        self.requests: list[dict] = []
        self.auth: set[str] = set()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    number = len(server.requests)
                    server.requests.append(body)
                    server.auth.add(self.headers.get("Authorization", ""))
                fault = server.faults(number, body)
                if fault == "reset":  # a zero linger turns the close into a reset, as a crashed proxy sends
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    return
                if fault in ("429", "500"):
                    wait = server.retry_after if fault == "429" else None
                    self._send(int(fault), json.dumps({"error": {"message": "scripted fault"}}).encode(), wait)
                    return
                if fault == "slow":
                    time.sleep(server.slow_seconds)
                if fault == "badjson":
                    self._send(200, b'{"id": "x", "choices": [')
                    return
                choices = (
                    []
                    if fault == "empty"
                    else [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": server.reply(body)}}]
                )
                payload = {
                    "id": f"chatcmpl-{number}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body["model"],
                    "choices": choices,
                    "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
                }
                self._send(200, json.dumps(payload).encode())

            def _send(self, status: int, data: bytes, retry_after: str | None = None) -> None:
                try:
                    self.send_response(status)
                    if retry_after is not None:
                        self.send_header("Retry-After", retry_after)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up on a slow reply

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
