"""Running a long-lived service in the main thread until its sources end or a signal stops it.

`run_until_stopped` drives anything with the `StoppableService` lifecycle (`WatchService`, the
cluster driver `ClusterWatch`): SIGINT or SIGTERM stops it cleanly (open events ended and
committed), a second SIGINT aborts.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType
from typing import Protocol

__all__ = ["StoppableService", "run_until_stopped"]


class StoppableService(Protocol):
    """What `run_until_stopped` drives: `WatchService`, or the cluster driver."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...

    def finish(self, timeout_s: float = 30.0) -> bool: ...


def run_until_stopped(service: StoppableService, seconds: float | None = None) -> bool:
    """Run ``service`` in the main thread until its sources end, ``seconds`` pass, or SIGINT/SIGTERM.

    A signal stops the service cleanly (open events ended and committed); a second SIGINT
    aborts. Returns True on a clean run.
    """
    hits = {"n": 0}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        hits["n"] += 1
        if hits["n"] > 1 and signum == signal.SIGINT:
            raise KeyboardInterrupt
        print(f"{signal.Signals(signum).name}: stopping, ending open events...", file=sys.stderr, flush=True)
        service.stop()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        service.start()
        if seconds is not None and not service.wait(seconds):
            service.stop()
        service.wait()
        return service.finish()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
