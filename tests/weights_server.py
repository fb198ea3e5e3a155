"""A loopback HTTP server for weights-store tests: serves real bytes, honours ``Range``, and can cut
a transfer after N bytes or stall, the way a flaky network does."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Behaviour:
    """What the server does. ``files``: URL path -> bytes. ``cut_after``: close the connection after
    that many body bytes, for the first ``cuts`` GETs of a file. ``ignore_range``: answer every GET with
    the whole file (200), as some servers do. ``requests``: (path, Range header) seen."""

    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: int | None = None
    cuts: int = 0
    ignore_range: bool = False
    requests: list[tuple[str, str | None]] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    behaviour: Behaviour

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        b = self.behaviour
        b.requests.append((self.path, self.headers.get("Range")))
        body = b.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-") and not b.ignore_range:
            start = int(rng[len("bytes=") : -1])
            if start >= len(body):
                self.send_error(416)
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if b.cut_after is not None and b.cuts > 0 and not self.path.endswith("SHA256SUMS"):
            b.cuts -= 1
            self.wfile.write(payload[: b.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)


@contextmanager
def serve(behaviour: Behaviour) -> Iterator[str]:
    """Serve ``behaviour`` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    handler = type("Handler", (_Handler,), {"behaviour": behaviour})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
