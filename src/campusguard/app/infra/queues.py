"""The app's one bounded, thread-safe queue between stages.

`BoundedQueue` holds at most ``maxsize`` items and either drops its oldest item to make room
(``drop_oldest=True``: a live camera's frames, a browser's events, a viewer's JPEGs, the clip
recorder's frames; the producer never waits) or makes the producer wait for room until a stop
event is set (a recorded file's frames: none may be lost). The drop-oldest queues of the event
bus, the live view and the clip recorder (`DropOldestQueue`) and the readers' `FrameQueue` are
this class.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Generic, TypeVar

__all__ = ["BoundedQueue", "DropOldestQueue"]

T = TypeVar("T")


class BoundedQueue(Generic[T]):
    """A thread-safe bounded FIFO.

    Args:
        maxsize: items kept at most (>= 1).
        drop_oldest: a put on a full queue discards the oldest item (counted in ``dropped``);
            otherwise it waits for room, or for its ``stop`` event.
        doorbell: set on every put, so one consumer can wait on many queues.

    Attributes:
        dropped: items discarded to make room.
        delivered: items taken by `get`.
        closed: set by `close`; puts are then ignored.
    """

    def __init__(self, maxsize: int, drop_oldest: bool = True, doorbell: threading.Event | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"queue size must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.drop_oldest = drop_oldest
        self.dropped = 0
        self.delivered = 0
        self.closed = False
        self._items: deque[T] = deque()
        self._cond = threading.Condition()
        self._doorbell = doorbell

    def put(self, item: T, stop: threading.Event | None = None, *, beyond_maxsize: bool = False) -> bool:
        """Append ``item``; ``False`` when it was not queued (closed, or ``stop`` set while waiting for room).

        ``beyond_maxsize`` queues it whatever the size (an end-of-stream marker consumers must see).
        """
        with self._cond:
            if self.closed:
                return False
            if not beyond_maxsize:
                if self.drop_oldest:
                    while len(self._items) >= self.maxsize:
                        self._items.popleft()
                        self.dropped += 1
                else:
                    while len(self._items) >= self.maxsize:
                        if stop is not None and stop.is_set():
                            return False
                        self._cond.wait(0.05)
            self._items.append(item)
            self._cond.notify_all()
        if self._doorbell is not None:
            self._doorbell.set()
        return True

    def get_nowait(self) -> T | None:
        """Take the oldest item, or ``None`` when empty."""
        return self.get(0.0)

    def get(self, timeout: float) -> T | None:
        """The oldest item, or ``None`` after ``timeout`` seconds without one or once closed."""
        with self._cond:
            if not self._items and not self.closed and timeout > 0:
                self._cond.wait(timeout)
            if not self._items:
                return None
            self.delivered += 1
            item = self._items.popleft()
            self._cond.notify_all()  # a producer may be waiting for room
            return item

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)

    def close(self) -> None:
        """Drop what is queued, ignore later puts and wake a waiting `get` (idempotent)."""
        with self._cond:
            self.closed = True
            self._items.clear()
            self._cond.notify_all()


class DropOldestQueue(BoundedQueue[T]):
    """A `BoundedQueue` whose `offer` never waits: when full, the oldest item goes."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize, drop_oldest=True)

    def offer(self, item: T) -> None:
        """Append ``item``, dropping the oldest when full; ignored once closed."""
        self.put(item)
