"""Where the sign-in limiter (`campusguard.app.console.identity.auth.LoginLimiter`) keeps its counts of failed logins.

The limiter's policy (which keys a failure counts under, how long each waits) is in `auth`; a
`FailureTable` only keeps one `Failures` entry per key and changes them atomically. This
process's memory (`MemoryFailures`) serves one console; consoles that share a PostgreSQL
database share its table (`campusguard.app.console.identity.postgres.PostgresFailures`), so a guess
spread over several nodes behind a load balancer is counted once, whichever node it reached.

A table keeps its own clock: monotonic seconds in memory; wall-clock seconds in a shared table
(the nodes' clocks, kept by NTP, not one process's monotonic count).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["FailureKey", "Failures", "FailureStep", "FailureTable", "MemoryFailures"]

FailureKey = tuple[str, ...]
"""``("pair", user, address)``, ``("address", address)``, ``("account", user)`` or ``("device", user, nonce)``."""


@dataclass
class Failures:
    """Failed logins of one key: how many (or, per account, when, within the window), when the last
    was, and until when the key waits (seconds of the table's clock)."""

    count: int = 0
    last: float = 0.0
    blocked_until: float = 0.0
    times: deque[float] | None = None  # per-account keys only: the failures within the window


FailureStep = Callable[[FailureKey, Failures], float | None]
"""Counts one failure into a key's entry (changed in place); the delay it starts, or ``None``."""


class FailureTable(Protocol):
    """The failed-login counts of one console, or of every console sharing a database."""

    clock: Callable[[], float]

    def blocked_until(self, keys: Sequence[FailureKey]) -> list[float]:
        """Until when each of ``keys`` that has an entry waits."""
        ...

    def record(
        self, keys: Sequence[FailureKey], step: FailureStep, *, now: float, forget_before: float, max_keys: int
    ) -> list[float | None]:
        """Apply ``step`` to the entry of each key (a new one when it has none) as one atomic change,
        forget keys whose last failure is at or before ``forget_before``, and keep at most ``max_keys``
        (forgetting the least recently failed keys that do not wait at ``now`` first); ``step``'s answers.
        ``step`` may run more than once (a shared table retries a lost connection): it changes only the entry."""
        ...

    def forget(self, key: FailureKey) -> None:
        """Drop one key's entry."""
        ...

    def __len__(self) -> int:
        """Keys remembered now."""
        ...


class MemoryFailures:
    """A `FailureTable` in this process's memory (thread-safe), least recently failed key first."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._entries: OrderedDict[FailureKey, Failures] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def blocked_until(self, keys: Sequence[FailureKey]) -> list[float]:
        with self._lock:
            return [f.blocked_until for k in keys if (f := self._entries.get(k)) is not None]

    def record(
        self, keys: Sequence[FailureKey], step: FailureStep, *, now: float, forget_before: float, max_keys: int
    ) -> list[float | None]:
        with self._lock:
            self._forget_old(forget_before)
            delays = []
            for key in keys:
                entry = self._entries.setdefault(key, Failures())
                self._entries.move_to_end(key)
                delays.append(step(key, entry))
            self._evict(max_keys, now)
            return delays

    def forget(self, key: FailureKey) -> None:
        with self._lock:
            self._entries.pop(key, None)

    def _forget_old(self, before: float) -> None:
        # least recently failed first: stop at the first key that is still recent
        while self._entries:
            key, entry = next(iter(self._entries.items()))
            if entry.last > before:
                return
            del self._entries[key]

    def _evict(self, max_keys: int, now: float) -> None:
        """Past ``max_keys``: forget the least recently failed keys that do not wait; waiting ones last."""
        excess = len(self._entries) - max_keys
        if excess <= 0:
            return
        idle = [k for k, f in self._entries.items() if f.blocked_until <= now][:excess]
        for key in idle:
            del self._entries[key]
        while len(self._entries) > max_keys:
            self._entries.popitem(last=False)
