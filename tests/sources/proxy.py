"""A tiny loopback HTTP proxy in front of the real test Prometheus that can inject failures.

Each request takes the next action from a script (``forward``, an HTTP status, a delay, or ``bytes``: a
200 answer with that body, for malformed answers a real server never sends) and the proxy records what it
saw, so tests can assert on retries and headers without mocking any client.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

import requests


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


@dataclass
class FaultProxy:
    upstream: str
    script: deque[str | int | float | bytes] = field(default_factory=deque)
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                return

            def do_GET(self) -> None:
                proxy.seen.append(Seen(self.path, {k: v for k, v in self.headers.items()}))
                action: str | int | float | bytes = proxy.script.popleft() if proxy.script else "forward"
                if isinstance(action, bytes):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(action)))
                    self.end_headers()
                    self.wfile.write(action)
                    return
                if isinstance(action, float):
                    time.sleep(action)
                    action = "forward"
                if isinstance(action, int):
                    body = b'{"status":"error","errorType":"injected","error":"injected failure"}'
                    self.send_response(action)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                upstream = requests.get(proxy.upstream + self.path, timeout=30)
                self.send_response(upstream.status_code)
                self.send_header("Content-Type", upstream.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(upstream.content)))
                self.end_headers()
                self.wfile.write(upstream.content)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def queries(self) -> list[Seen]:
        return [s for s in self.seen if s.path.startswith("/api/v1/query_range")]

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
