"""`ConsoleService`: ``campusguard serve`` as one `campusguard.app.signals.StoppableService`.

The pipeline (`ConsoleRuntime`) and the HTTP server (uvicorn) stop together, the way `watch`
stops: `campusguard.app.signals.run_until_stopped` owns SIGTERM and SIGINT in the main thread,
and uvicorn runs in a thread of its own. (Run in the main thread, uvicorn installs its own
handlers and, once it has shut down, raises the signal again with the default handler: the
process then died of SIGTERM, exit 143, before the pipeline's stop ran, so open incidents stayed
open and the recording stayed a ``.part`` file.)

A stop closes the listening socket, ends the cameras (open incidents ended and committed,
recordings finished, sinks flushed), then the live views and event streams, then the server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from campusguard.app.infra.secrets import install_log_redaction
from campusguard.errors import InvalidInputError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from campusguard.app.console.runtime import ConsoleRuntime

__all__ = ["ConsoleService"]

_UVICORN_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access")
_HTTP_CLOSE_S = 3.0  # open streams (live view, event push) are cut after this long once the stop began


class ConsoleService:
    """The console's pipeline and HTTP server, started and stopped as one service.

    Args:
        runtime: the console runtime (built, not started).
        app: its FastAPI app (`campusguard.app.console.server.create_app`).
        host: address to listen on.
        port: TCP port.
        options: further ``uvicorn.Config`` options (`campusguard.cli.serve.uvicorn_options`).
        start_timeout_s: how long `start` waits for the server to listen, seconds.

    Attributes:
        on_started: called once the server listens (the command's "console on ..." lines).
    """

    def __init__(
        self,
        runtime: ConsoleRuntime,
        app: FastAPI,
        *,
        host: str,
        port: int,
        options: dict[str, Any] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        import uvicorn

        self.runtime = runtime
        config = uvicorn.Config(
            app, host=host, port=port, timeout_graceful_shutdown=int(_HTTP_CLOSE_S), **(options or {})
        )
        self.server = uvicorn.Server(config)
        install_log_redaction(h for name in _UVICORN_LOGGERS for h in logging.getLogger(name).handlers)
        self.where = f"{host}:{port}"
        self.start_timeout_s = start_timeout_s
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.on_started: Callable[[], None] | None = None

    def start(self) -> None:
        """Start the pipeline, then the HTTP server; return once it listens.

        Raises:
            ConfigError, SourceError, ModelLoadError: what ``campusguard watch`` would refuse.
            InvalidInputError: the server could not listen.
        """
        self.runtime.start()
        if self._stopping.is_set():  # a signal while the cameras were being opened
            self.runtime.request_stop()
        self._thread = threading.Thread(target=self.server.run, name="console-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.server.should_exit = True
                self.runtime.stop(1.0)
                raise InvalidInputError(f"the console could not listen on {self.where}")
            time.sleep(0.02)
        if self.on_started is not None:
            self.on_started()

    def stop(self) -> None:
        """Ask the pipeline to stop; no waiting (safe from a signal handler)."""
        self._stopping.set()
        self.runtime.request_stop()

    def wait(self, timeout: float | None = None) -> bool:
        """True once a stop was asked for and the pipeline has drained, or the HTTP server ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._thread is None or not self._thread.is_alive():
                return True
            service = self.runtime.service
            if self._stopping.is_set() and (service is None or service.wait(0)):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def finish(self, timeout_s: float = 30.0) -> bool:
        """End the pipeline (open incidents ended and committed, sinks flushed) within ``timeout_s``,
        close the live views and event streams, then the HTTP server; False when the pipeline did
        not end in time, a worker failed, or the server had died on its own."""
        self._stopping.set()
        started = time.monotonic()
        http_alive = self._thread is not None and self._thread.is_alive()
        self.server.should_exit = True  # no new connection; the open ones get _HTTP_CLOSE_S
        clean = self.runtime.stop(timeout_s)
        if self._thread is not None:
            self._thread.join(max(0.5, min(_HTTP_CLOSE_S + 1, timeout_s - (time.monotonic() - started))))
        return clean and http_alive
