"""A live HTTP camera on loopback: MJPEG over HTTP (``multipart/x-mixed-replace``), as many IP
cameras serve it, that can be taken down (connections refused, open streams cut) and brought back
on the same port."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Callable

import cv2
import numpy as np

BOUNDARY = "frame"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpCamera:
    """Serves ``frame_at(t)`` (BGR, ``t`` seconds since start) at ``fps`` on ``/video.mjpg``.

    `down` closes the listening socket and cuts every open stream, so the port refuses
    connections; `up` listens on the same port again.
    """

    def __init__(self, frame_at: Callable[[float], np.ndarray], fps: float = 10.0, port: int | None = None) -> None:
        self.frame_at = frame_at
        self.fps = fps
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/video.mjpg"
        self.t0 = time.monotonic()
        self._alive = threading.Event()
        self._streams = 0  # clients reading it now
        self._streams_lock = threading.Lock()
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.up()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        camera = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the standard library's name
                with camera._streams_lock:
                    camera._streams += 1
                try:
                    self._stream()
                finally:
                    with camera._streams_lock:
                        camera._streams -= 1

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", f"multipart/x-mixed-replace; boundary={BOUNDARY}")
                self.end_headers()
                try:
                    while camera._alive.is_set():
                        ok, jpeg = cv2.imencode(".jpg", camera.frame_at(time.monotonic() - camera.t0))
                        assert ok
                        data = jpeg.tobytes()
                        self.wfile.write(
                            f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                            + data
                            + b"\r\n"
                        )
                        time.sleep(1.0 / camera.fps)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    @property
    def streams(self) -> int:
        """How many clients read the camera now (a frozen client's stream counts until its socket closes)."""
        with self._streams_lock:
            return self._streams

    def up(self) -> None:
        """Listen (again) on the camera's port."""
        self._alive.set()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def down(self) -> None:
        """Stop listening and cut the open streams: connections are refused until `up`."""
        self._alive.clear()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def close(self) -> None:
        self.down()
