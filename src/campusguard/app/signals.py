"""Running a long-lived service in the main thread until its sources end or a signal stops it.

`run_until_stopped` drives anything with the `StoppableService` lifecycle (`WatchService`, the
cluster driver `ClusterWatch`, the console `campusguard.app.console.uvicorn_runner.ConsoleService`) the
same way, as a service manager (systemd, Docker, Kubernetes) expects:

- SIGTERM and SIGINT both stop it cleanly: the cameras stop, open incidents end
  (``details.interrupted``) and are committed, recordings are finished, the sinks flushed; the
  run then returns True (exit 0). A stop that takes longer than ``stop_timeout_s`` (the config's
  ``service.stop_timeout_s``) returns False (exit 1) with one line saying so.
- A second signal exits at once (status 130 for SIGINT, 143 for SIGTERM), without waiting.
- With systemd (``NOTIFY_SOCKET``): ``READY=1`` once the service has started (cameras up),
  ``STOPPING=1`` when a stop begins (`campusguard.app.infra.sdnotify`); the pipeline's watchdog
  sends ``WATCHDOG=1``.

`stop_signals` is the signal part alone, for a command whose work is not a `StoppableService`
(``campusguard scan``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Protocol

from campusguard.app.infra.sdnotify import systemd

__all__ = ["DEFAULT_STOP_TIMEOUT_S", "StopRequest", "StoppableService", "run_until_stopped", "stop_signals"]

DEFAULT_STOP_TIMEOUT_S = 10.0
"""The config's ``service.stop_timeout_s`` default."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StoppableService(Protocol):
    """What `run_until_stopped` drives: `WatchService`, the cluster driver, or the console."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def finish(self, timeout_s: float = 30.0) -> bool: ...


class StopRequest:
    """What the first stop signal set: `requested` (an event) and when (`at`, monotonic), by `signal_name`."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.at: float | None = None
        self.signal_name: str | None = None

    def remaining(self, timeout_s: float) -> float | None:
        """Seconds left of ``timeout_s`` since the stop was asked for; None before that."""
        return None if self.at is None else timeout_s - (time.monotonic() - self.at)


@contextlib.contextmanager
def stop_signals(on_stop: Callable[[], None], what: str = "ending open events") -> Iterator[StopRequest]:
    """SIGINT and SIGTERM call ``on_stop`` once (it must return at once: set events, no waiting),
    with one line on stderr and systemd's ``STOPPING=1``; a second signal exits the process at once.
    The previous handlers are back when the block ends (only the main thread may do this)."""
    request = StopRequest()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if request.requested.is_set():
            print(f"{name} again: exiting now, without waiting for the stop", file=sys.stderr, flush=True)
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            os._exit(128 + signum)
        request.at, request.signal_name = time.monotonic(), name
        request.requested.set()
        print(f"{name}: stopping, {what}...", file=sys.stderr, flush=True)
        systemd().stopping(f"stopping ({name})")
        on_stop()

    old = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield request
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def run_until_stopped(
    service: StoppableService,
    seconds: float | None = None,
    *,
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S,
    ready_status: str = "watching",
) -> bool:
    """Run ``service`` in the main thread until its sources end, ``seconds`` pass, or SIGINT/SIGTERM.

    A signal (or the end of ``seconds``) stops the service cleanly within ``stop_timeout_s``
    seconds; a second signal exits at once. Returns True on a clean run, False when a worker
    failed or the stop took longer than ``stop_timeout_s`` (said on one line).
    """
    with stop_signals(service.stop) as request:
        service.start()
        systemd().ready(ready_status)
        if seconds is not None and not service.wait(seconds):
            request.at = time.monotonic()
            service.stop()
        while not service.wait(0.2):
            left = request.remaining(stop_timeout_s)
            if left is not None and left <= 0:
                break
        left = request.remaining(stop_timeout_s)
        done = service.finish(max(0.1, left) if left is not None else 30.0)
        left = request.remaining(stop_timeout_s)
        if not done and left is not None and left <= 0 and request.requested.is_set():
            print(
                f"{request.signal_name}: the stop took longer than service.stop_timeout_s={stop_timeout_s:g} s; "
                "exiting without waiting for the rest",
                file=sys.stderr,
                flush=True,
            )
            return False
        return done
