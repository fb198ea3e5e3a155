"""Rate-limited logging: at most one line per key and interval, with a count of what was held back;
and `OutageLog`, one line when an outage starts and one when it ends.

A camera that misbehaves at night logs the same thing on every frame (a gate decision, a detector
batch, a retry); `--log-level debug` must stay readable over hours and cost nothing at ``info``.
`LogThrottle.debug` checks the logger's level first, so a disabled line is one comparison.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["LogThrottle", "OutageLog"]


class LogThrottle:
    """At most one log line per ``key`` every ``interval_s`` seconds (monotonic clock).

    Args:
        logger: where the lines go.
        interval_s: the shortest time between two lines of one key.
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if interval_s < 0:
            raise ValueError(f"interval_s must be >= 0, got {interval_s}")
        self.logger = logger
        self.interval_s = interval_s
        self._clock = clock
        self._last: dict[Hashable, float] = {}
        self._held: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def _admit(self, key: Hashable) -> int | None:
        """The number of lines held back since the last one of ``key``, or None to hold this one back."""
        now = self._clock()
        with self._lock:
            last = self._last.get(key)
            if last is not None and now - last < self.interval_s:
                self._held[key] = self._held.get(key, 0) + 1
                return None
            self._last[key] = now
            return self._held.pop(key, 0)

    def log(self, level: int, key: Hashable, msg: str, *args: object, stacklevel: int = 2) -> bool:
        """Log ``msg % args`` at ``level`` unless a line of ``key`` went out less than ``interval_s``
        ago; True when it went out. The line says how many of its kind were held back, and names the
        caller's file and line (``stacklevel`` frames up), not this module's."""
        if not self.logger.isEnabledFor(level):
            return False
        held = self._admit(key)
        if held is None:
            return False
        if held:
            msg = f"{msg} (%d similar line(s) held back in the last %.0f s)"
            args = (*args, held, self.interval_s)
        self.logger.log(level, msg, *args, stacklevel=stacklevel)
        return True

    def debug(self, key: Hashable, msg: str, *args: object) -> bool:
        """`log` at DEBUG."""
        return self.log(logging.DEBUG, key, msg, *args, stacklevel=3)


class OutageLog:
    """One log line when an outage starts and one when it ends, with the failures held back between.

    A camera that cannot be reached, or a database that is down, fails on every retry; an
    operator wants to read when it went away and when it came back, not a warning every two
    seconds. `down` logs the first failure and counts the next ones; `up` logs the end with how
    long it lasted and how many failures were held back. Both at WARNING, so the end shows
    wherever the start did (the default level). Thread-safe.

    Args:
        logger: where the lines go.
        what: names the thing in both lines (``camera 'gate'``, ``PostgreSQL event store db@host``).
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, logger: logging.Logger, what: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.what = what
        self._clock = clock
        self._lock = threading.Lock()
        self.since: float | None = None  # when the outage began (clock), None while up
        self.held = 0  # failures since the first, not logged
        self.outages = 0  # outages so far

    @property
    def is_down(self) -> bool:
        return self.since is not None

    def down(self, reason: str) -> bool:
        """A failure: logged when it starts an outage (True), else counted."""
        with self._lock:
            if self.since is not None:
                self.held += 1
                return False
            self.since, self.held = self._clock(), 0
            self.outages += 1
        self.logger.warning("%s: %s (outage started; logged again when it ends)", self.what, reason, stacklevel=2)
        return True

    def up(self, note: str = "back") -> bool:
        """A success: logged when it ends an outage (True), else nothing."""
        with self._lock:
            if self.since is None:
                return False
            lasted, held = self._clock() - self.since, self.held
            self.since, self.held = None, 0
        self.logger.warning(
            "%s: %s after %.1f s of outage (%d failure(s) held back)", self.what, note, lasted, held, stacklevel=2
        )
        return True
