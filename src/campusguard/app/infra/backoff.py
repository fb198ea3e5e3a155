"""Exponential back-off between attempts, shared by every retry loop of the app.

Used by the camera readers' reconnects (`campusguard.app.engine.sources.CameraReader`), the PostgreSQL
event store's reconnects (`campusguard.app.events.postgres.RetryPolicy`) and the webhook sink's
retries (`campusguard.app.alerts.sender.Retry`, for the webhook and email sinks). The MQTT sink's reconnects are paho's own
(``reconnect_delay_set``), configured with the same kind of numbers.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Backoff"]


@dataclass(frozen=True)
class Backoff:
    """Delays between attempts: ``initial_s``, times ``factor`` after each failure, never above ``max_s``.

    Attributes:
        initial_s: delay before the second attempt, seconds (> 0, or 0 for none).
        max_s: longest delay, seconds.
        factor: each failed attempt multiplies the delay by this (>= 1).
        jitter: each delay is shortened by a random fraction in ``[0, jitter)`` (0 to 1) so many
            clients that failed together do not retry together; 0 (the default) is deterministic.
    """

    initial_s: float
    max_s: float
    factor: float = 2.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        if self.initial_s < 0 or self.max_s < 0 or self.factor < 1 or not 0 <= self.jitter <= 1:
            raise ValueError(f"back-off needs initial_s >= 0, max_s >= 0, factor >= 1, 0 <= jitter <= 1: {self}")

    def delays(self) -> Iterator[float]:
        """The delays in seconds, one per failed attempt, without end (start a new iterator to reset)."""
        delay = min(self.initial_s, self.max_s)
        while True:
            yield delay * (1.0 - self.jitter * random.random()) if self.jitter else delay
            delay = min(delay * self.factor, self.max_s)

    def delay(self, attempts: int) -> float:
        """The delay after the ``attempts``-th failed attempt (1: ``initial_s``), without jitter: for retry
        loops that keep only the count (the durable outboxes store it with each message)."""
        return min(self.max_s, self.initial_s * self.factor ** max(0, attempts - 1))

    def waits(self, stop: threading.Event) -> Iterator[bool]:
        """Wait out each delay in turn, cut short by ``stop``: yields ``True`` once ``stop`` is set.

        ``for stopped in backoff.waits(stop)`` between attempts; a retry loop that ends when asked.
        """
        for delay in self.delays():
            yield stop.wait(delay)
