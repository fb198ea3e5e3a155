"""`SiteLeader`: the one node that does what a site needs done once (retention), by a PostgreSQL lock.

A session-level advisory lock (``pg_try_advisory_lock``) on a connection of its own: the node that
holds it leads; when that node dies or loses the server, its session ends, the server frees the
lock, and the next node to try (every ``retry_s``) leads. No lease to renew and no clock involved.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from campusguard.app.events.urls import one_line

__all__ = ["SiteLeader"]

log = logging.getLogger(__name__)

RETENTION_LOCK = 0x43475254  # "CGRT": who runs the site's retention


class SiteLeader:
    """Calls ``on_lead`` when this node takes the lock ``key`` and ``on_lose`` when it loses it.

    Args:
        url: the site's PostgreSQL URL.
        key: the advisory lock's key (one per job).
        on_lead: this node now leads (start the job); on_lose: it no longer does (stop it).
        retry_s: how often a follower tries the lock, and the leader checks its connection.
    """

    def __init__(
        self, url: str, key: int, on_lead: Callable[[], None], on_lose: Callable[[], None], *, retry_s: float = 5.0
    ) -> None:
        self.url = url
        self.key = key
        self.on_lead = on_lead
        self.on_lose = on_lose
        self.retry_s = retry_s
        self.leading = False
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="site-leader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop trying; a leader stops its job and frees the lock."""
        self._stop.set()
        self._thread.join(timeout=self.retry_s + 5)
        self._lose()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception as exc:  # noqa: BLE001 - the server is away: lead again once it is back
                log.warning("site leader (lock %x): %s", self.key, one_line(exc))
                self._lose()
            self._stop.wait(self.retry_s)

    def _round(self) -> None:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=2, application_name="campusguard-leader",
                keepalives=1, keepalives_idle=2, keepalives_interval=1, keepalives_count=2,
            )
        if self.leading:
            self._conn.execute("SELECT 1")  # still ours while the session lives
            return
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        if row and row[0]:
            self.leading = True
            log.info("this node now leads the site's job (lock %x)", self.key)
            self.on_lead()

    def _lose(self) -> None:
        if self.leading:
            self.leading = False
            try:
                self.on_lose()
            except Exception:  # noqa: BLE001
                log.exception("site leader: stopping the job failed")
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()  # frees the lock, if the session still lives
            self._conn = None
