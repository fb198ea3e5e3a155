"""The watchdog: `WorkerThread` (a stage's thread that records its death) and `Watchdog` (stalled
sources reconnect, dead workers stop the pipeline)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from campusguard.app.engine.sources import CameraReader

log = logging.getLogger(__name__)


# watchdog ----------------------------------------------------------------------------------
class WorkerThread(threading.Thread):
    """A daemon thread around a worker's ``run`` that records whether the work returned.

    A crash is logged here; stopping the pipeline is the `Watchdog`'s job, which also catches
    a thread ended by `SystemExit` (``threading`` drops those without a word).
    """

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._work = target
        self.returned = False

    def run(self) -> None:
        try:
            self._work()
            self.returned = True
        except Exception:
            log.exception("worker %s crashed", self.name)


class Watchdog:
    """Reconnects live sources that stalled, and stops the pipeline when a worker thread died.

    Args:
        readers: the camera readers.
        threads: worker threads that must stay alive until their work returns.
        stop: the pipeline's stop event, set here when a worker died.
        failed: set here when a worker died.
        done: ends the watchdog's own loop (set once the pipeline has finished).
        period_s: seconds between checks.
        heartbeat: called after every round that found no dead worker (systemd's watchdog ping,
            `campusguard.app.infra.sdnotify.SystemdNotifier.watchdog`); a pipeline that failed or
            a watchdog that hangs goes quiet, and systemd restarts the service.

    ``threads`` is kept as given (not copied): a camera that comes online after the start adds
    its analytics thread to it.
    """

    def __init__(
        self,
        readers: Sequence[CameraReader],
        threads: Sequence[WorkerThread],
        stop: threading.Event,
        failed: threading.Event,
        *,
        done: threading.Event,
        period_s: float = 1.0,
        heartbeat: Callable[[], object] | None = None,
    ) -> None:
        self.readers = list(readers)
        self.threads = threads
        self.heartbeat = heartbeat
        self.stop = stop
        self.failed = failed
        self.done = done
        self.period_s = period_s
        self.stalls = 0

    def check(self, now: float | None = None) -> None:
        """One round of checks."""
        now = time.monotonic() if now is None else now
        for r in self.readers:
            if r.live and r.stalled(now):
                r.request_reconnect(f"no frame for {now - r.stats.last_frame_at:.1f} s")  # the reader logs the outage
                r.stats.last_frame_at = now  # one request per stall period
                self.stalls += 1
        dead = [t.name for t in list(self.threads) if not t.is_alive() and not t.returned]
        if dead and not self.failed.is_set():
            log.error("worker %s died; stopping the pipeline", ", ".join(dead))
            self.failed.set()
            self.stop.set()
        if not self.failed.is_set() and self.heartbeat is not None:
            self.heartbeat()  # healthy round: systemd's WATCHDOG=1 (rate-limited by the notifier)

    def run(self) -> None:
        while not self.done.wait(self.period_s):
            self.check()
