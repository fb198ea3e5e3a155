"""`WebhookReceiver`: a real webhook receiver on loopback, for the tests and the benchmarks.

One copy for every test and benchmark that receives the webhook sink's POSTs (the alerts' tests, the
nodes' site, the lifecycle and crash tests, ``benchmarks/alert_relay.py`` and
``benchmarks/crash_restart.py``): an ``http.server`` in a thread that answers 200 and keeps each JSON
body, or 500 to the first ``fail_first`` POSTs (a receiver that is down for a while).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["WebhookReceiver"]


class WebhookReceiver:
    """A webhook receiver on 127.0.0.1 (``port`` 0: a free one).

    Attributes:
        received: the bodies answered 200, in arrival order.
        attempts: every POST, the failed ones included.
        arrived: ``(event_id, phase)`` -> when it first arrived (monotonic seconds).
        url: where to POST (``http://127.0.0.1:PORT/hook``); port: the port.
    """

    def __init__(self, port: int = 0, *, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.received: list[dict[str, Any]] = []
        self.attempts = 0
        self.arrived: dict[tuple[str, str], float] = {}
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.attempts += 1
                    fail = outer.attempts <= outer.fail_first
                    if not fail:
                        payload = json.loads(body)
                        outer.received.append(payload)
                        key = (str(payload.get("event_id")), str(payload.get("phase")))
                        outer.arrived.setdefault(key, time.monotonic())
                self.send_response(500 if fail else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def ids(self) -> list[str]:
        """The event ids received, in order."""
        return [r["event_id"] for r in list(self.received)]

    def deliveries(self) -> list[tuple[str, str, int]]:
        """``(event_id, phase, sequence)`` of each body received, in order."""
        return [(b["event_id"], b["phase"], int(b.get("sequence") or 0)) for b in list(self.received)]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
