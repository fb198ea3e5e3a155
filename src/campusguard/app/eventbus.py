"""In-process fan-out of committed events to the console's subscribers (server-sent events).

The pipeline's event worker calls `EventBus.publish` only after the store's commit returned,
so a browser is never shown an event the database does not hold. Every subscriber has its
own bounded queue that drops its oldest item when full: a stalled browser loses old updates
(it can re-read them from the API) but never holds up the event worker or other subscribers.

`DropOldestQueue` is that queue; the live view's viewers use it too.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Generic, TypeVar

__all__ = ["DropOldestQueue", "EventBus", "EventSubscription"]

T = TypeVar("T")


class DropOldestQueue(Generic[T]):
    """A thread-safe bounded queue whose `offer` never waits: when full, the oldest item goes.

    Args:
        maxsize: items kept at most (>= 1).
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"queue size must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.dropped = 0
        self.delivered = 0
        self.closed = False
        self._items: deque[T] = deque()
        self._cond = threading.Condition()

    def offer(self, item: T) -> None:
        """Append ``item``, dropping the oldest when full; ignored once closed."""
        with self._cond:
            if self.closed:
                return
            if len(self._items) >= self.maxsize:
                self._items.popleft()
                self.dropped += 1
            self._items.append(item)
            self._cond.notify()

    def get(self, timeout: float) -> T | None:
        """The oldest item, or ``None`` after ``timeout`` seconds without one or once closed."""
        with self._cond:
            if not self._items and not self.closed:
                self._cond.wait(timeout)
            if not self._items:
                return None
            self.delivered += 1
            return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)

    def close(self) -> None:
        """Drop what is queued and wake a waiting `get` (idempotent)."""
        with self._cond:
            self.closed = True
            self._items.clear()
            self._cond.notify_all()


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
