"""systemd's readiness and watchdog protocol (``sd_notify``), without a systemd dependency.

A unit with ``Type=notify`` starts the service with ``NOTIFY_SOCKET`` naming a unix datagram
socket (a path, or ``@name`` for an abstract one); the service sends it newline-separated
``KEY=VALUE`` lines: ``READY=1`` once it serves (the cameras are up), ``WATCHDOG=1`` at least
every ``WATCHDOG_USEC`` microseconds while healthy (``WatchdogSec=``: systemd restarts a service
that goes quiet), ``STOPPING=1`` when a stop begins, and ``STATUS=...`` for ``systemctl status``.
See sd_notify(3) and docs/deploy.md. Without ``NOTIFY_SOCKET`` every call does nothing, so
`watch` and `serve` behave the same outside systemd (Docker, Kubernetes, a terminal).

The protocol is one ``sendto`` per message; it is written here (a dozen lines) rather than taken
from a package because the packages that do it either wrap libsystemd (a C dependency) or are
unmaintained.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping

__all__ = ["SystemdNotifier", "systemd"]

log = logging.getLogger(__name__)


class SystemdNotifier:
    """Sends ``sd_notify`` messages to the socket named by ``NOTIFY_SOCKET`` (thread-safe).

    Args:
        environ: where ``NOTIFY_SOCKET`` and ``WATCHDOG_USEC`` (and ``WATCHDOG_PID``) are read
            (default: ``os.environ``, read once here).

    Attributes:
        address: the socket's address (``\\0``-prefixed for an abstract one), or None: no-op.
        watchdog_interval_s: how often `watchdog` actually sends (half of ``WATCHDOG_USEC``, as
            sd_watchdog_enabled(3) advises), or None when systemd asked for no watchdog.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        name = env.get("NOTIFY_SOCKET") or ""
        self.address: str | None = None
        if name.startswith("@"):
            self.address = "\0" + name[1:]
        elif name.startswith("/"):
            self.address = name
        elif name:
            log.warning("NOTIFY_SOCKET=%r is neither a path nor an @abstract name; not notifying systemd", name)
        self.watchdog_interval_s: float | None = None
        usec, pid = env.get("WATCHDOG_USEC", ""), env.get("WATCHDOG_PID", "")
        if self.address is not None and usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_interval_s = int(usec) / 2e6
        self._lock = threading.Lock()
        self._last_watchdog = 0.0
        self._failed = False
        self._ready = False  # READY=1 sent: watchdog pings go out only after it
        self.sent: list[str] = []  # what went out, for the process's own log and tests

    @property
    def enabled(self) -> bool:
        """Whether a notify socket was given."""
        return self.address is not None

    def notify(self, *lines: str) -> bool:
        """Send ``lines`` (``KEY=VALUE``) as one datagram; True when sent. Never raises: a
        service must not fail because its manager stopped listening (one log line, then quiet)."""
        if self.address is None:
            return False
        message = "\n".join(lines)
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.sendto(message.encode("utf-8"), self.address)
        except OSError as exc:
            with self._lock:
                first, self._failed = not self._failed, True
            if first:
                log.warning("cannot notify systemd at %s: %s", self.address.replace("\0", "@"), exc)
            return False
        with self._lock:
            self.sent.append(message)
        return True

    def ready(self, status: str | None = None) -> bool:
        """``READY=1`` (with ``STATUS=``): the service is up."""
        sent = self.notify("READY=1", *([f"STATUS={status}"] if status else []))
        with self._lock:
            self._ready = True
        return sent

    def stopping(self, status: str | None = None) -> bool:
        """``STOPPING=1``: a stop has begun."""
        return self.notify("STOPPING=1", *([f"STATUS={status}"] if status else []))

    def status(self, status: str) -> bool:
        """``STATUS=...``: a line for ``systemctl status``."""
        return self.notify(f"STATUS={status}")

    def watchdog(self, now: float | None = None) -> bool:
        """``WATCHDOG=1``, at most once per `watchdog_interval_s` (call it from every healthy round
        of the pipeline's watchdog); False when not due, before `ready` (the pipeline's watchdog starts
        with the cameras, before the service says it is up; systemd's watchdog starts at READY), or
        when no watchdog was asked for."""
        if self.watchdog_interval_s is None or not self._ready:
            return False
        now = time.monotonic() if now is None else now
        with self._lock:
            if now - self._last_watchdog < self.watchdog_interval_s:
                return False
            self._last_watchdog = now
        return self.notify("WATCHDOG=1")


_notifier: SystemdNotifier | None = None
_notifier_lock = threading.Lock()


def systemd() -> SystemdNotifier:
    """The process's notifier, built from the environment at its first use."""
    global _notifier
    with _notifier_lock:
        if _notifier is None:
            _notifier = SystemdNotifier()
        return _notifier
