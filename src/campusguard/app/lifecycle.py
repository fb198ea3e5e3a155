"""`StopAndWait`: the stop and the wait that `WatchService` and the cluster driver `ClusterWatch` share.

Both own an event side (`campusguard.app.event_side`) and run until their streams end or a signal
stops them; a stop is the same for both (no new retention pass, a store call retrying a lost
connection gives up so its update is spooled), and waiting is waiting for the one thread whose
end means "every event committed" (the event writer's, or the driver's poll loop). `finish`
differs (the driver has no readers or track writer) and stays with each.
"""

from __future__ import annotations

import threading
import time

from campusguard.app.engine.writer import EventWorker
from campusguard.app.retention import RetentionCleaner

__all__ = ["StopAndWait"]


class StopAndWait:
    """``stop`` and ``wait`` of a service with a stop event, an event writer and a retention stage.

    A subclass sets `stop_event`, `retention` and `event_worker`, marks `_started` once its
    workers run, and names the thread to wait for in `_last_thread`.
    """

    stop_event: threading.Event
    retention: RetentionCleaner | None
    event_worker: EventWorker | None
    _started: bool

    def _last_thread(self) -> threading.Thread | None:
        """The thread whose end means every event is committed (None: nothing to wait for)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ask every stage to wind down (idempotent; safe from a signal handler).

        A store call retrying a lost connection gives up at once: what the store does not take
        now is spooled for the next start (`EventWorker`) rather than holding the stop up.
        """
        self.stop_event.set()
        if self.retention is not None:
            self.retention.stop(timeout_s=0)  # a pass under way ends on its own; no new one starts
        if self.event_worker is not None:
            self.event_worker.stop_store_retries()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every camera has ended and events are committed; True when finished."""
        thread = self._last_thread() if self._started else None
        if thread is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while thread.is_alive():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            thread.join(0.2 if remaining is None else min(0.2, remaining))
        return True
