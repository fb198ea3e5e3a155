"""Test helpers for alerts: `make_event`, a real loopback HTTP receiver, a free port."""

from __future__ import annotations

from typing import Any

import pytest


class Receiver:
    """A real HTTP receiver on 127.0.0.1 that answers 500 to the first ``fail_first`` POSTs."""

    def __init__(self, port: int = 0, fail_first: int = 0) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.fail_first = fail_first
        self.received: list[dict] = []
        self.attempts = 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    outer.attempts += 1
                    fail = outer.attempts <= outer.fail_first
                    if not fail:
                        outer.received.append(json.loads(body))
                self.send_response(500 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    @property
    def ids(self) -> list[str]:
        return [r["event_id"] for r in self.received]


@pytest.fixture
def receiver_factory():
    made: list[Receiver] = []

    def make(**kwargs: Any) -> Receiver:
        r = Receiver(**kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


def free_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unused_port() -> int:
    return free_port()
