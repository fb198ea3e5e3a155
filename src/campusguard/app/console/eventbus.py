"""In-process fan-out of committed events to the console's subscribers (server-sent events).

The pipeline's event worker calls `EventBus.publish` only after the store's commit returned,
so a browser is never shown an event the database does not hold. Every subscriber has its
own bounded queue that drops its oldest item when full: a stalled browser loses old updates
(it can re-read them from the API) but never holds up the event worker or other subscribers.

`DropOldestQueue` (`campusguard.app.infra.queues`) is that queue; the live view's viewers use it too.
"""

from __future__ import annotations

import threading
from typing import Any

from campusguard.app.infra.queues import DropOldestQueue

__all__ = ["DropOldestQueue", "EventBus", "EventSubscription"]


class EventSubscription(DropOldestQueue[dict[str, Any]]):
    """One subscriber's queue of event dicts; `get(timeout)` them, `close()` when done."""

    def __init__(self, bus: EventBus, maxsize: int) -> None:
        super().__init__(maxsize)
        self._bus = bus

    def close(self) -> None:
        super().close()
        self._bus._remove(self)

    def __enter__(self) -> EventSubscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Publishes event dicts to every open subscription (thread-safe).

    Args:
        maxsize: each subscription's bound.
    """

    def __init__(self, maxsize: int = 256) -> None:
        self.maxsize = maxsize
        self.published = 0
        self._subs: list[EventSubscription] = []
        self._lock = threading.Lock()

    def subscribe(self, maxsize: int | None = None) -> EventSubscription:
        """A new subscription that receives every event published from now on."""
        sub = EventSubscription(self, maxsize or self.maxsize)
        with self._lock:
            self._subs.append(sub)
        return sub

    def publish(self, event: dict[str, Any]) -> None:
        """Hand ``event`` (already committed) to every subscriber; never waits."""
        with self._lock:
            subs = list(self._subs)
            self.published += 1
        for sub in subs:
            sub.offer(event)

    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subs)

    def _remove(self, sub: EventSubscription) -> None:
        with self._lock:
            if sub in self._subs:
                self._subs.remove(sub)

    def close(self) -> None:
        """Close every subscription."""
        with self._lock:
            subs = list(self._subs)
        for sub in subs:
            sub.close()
