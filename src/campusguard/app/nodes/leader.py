"""`SiteLeader`: the one node that does what a site needs done once (retention), by a PostgreSQL lock.

A session-level advisory lock (``pg_try_advisory_lock``) on a connection of its own: the node that
holds it leads; when that node dies or loses the server, its session ends, the server frees the
lock, and the next node to try (every ``retry_s``) leads. No lease to renew and no clock involved.

Advisory locks are per database, and a site is a schema (its ``search_path``): the lock's key is
derived from the job and the schema the leader's session uses (`site_lock_key`), so two sites in
two schemas of one database each have their own leader.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from campusguard.app.events.urls import one_line

__all__ = ["RETENTION_JOB", "SiteLeader", "site_lock_key"]

log = logging.getLogger(__name__)

RETENTION_JOB = "retention"
"""The job of the node that runs the site's retention."""


def site_lock_key(schema: str, job: str, *names: str) -> int:
    """The advisory lock key of the leader of ``job`` (of its ``names``: a sink) of the site whose
    tables are in ``schema``, a stable 63-bit hash (advisory locks are per database: two sites in two
    schemas of one database lead apart)."""
    text = "\n".join((f"campusguard {job}", schema, *names))
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFF_FFFF_FFFF_FFFF


class SiteLeader:
    """Calls ``on_lead`` when this node takes the lock of ``job`` in the site's schema and ``on_lose``
    when it loses it.

    Args:
        url: the site's PostgreSQL URL (its ``search_path`` names the site's schema).
        job: what the leader does (`RETENTION_JOB`); ``names``: which one of it (a sink's name).
        on_lead: this node now leads (start the job); on_lose: it no longer does (stop it).
        retry_s: how often a follower tries the lock, and the leader checks its connection.

    Attributes:
        key: the advisory lock's key (`site_lock_key`), known once the first connection is made.
    """

    def __init__(
        self,
        url: str,
        job: str,
        on_lead: Callable[[], None],
        on_lose: Callable[[], None],
        *,
        names: tuple[str, ...] = (),
        retry_s: float = 5.0,
    ) -> None:
        self.url = url
        self.job = job
        self.names = names
        self.key: int | None = None
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
                log.warning("site leader (%s): %s", self._what(), one_line(exc))
                self._lose()
            self._stop.wait(self.retry_s)

    def _round(self) -> None:
        import psycopg

        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(
                self.url, autocommit=True, connect_timeout=2, application_name="campusguard-leader",
                keepalives=1, keepalives_idle=2, keepalives_interval=1, keepalives_count=2,
            )
        if self.key is None:
            schema = self._conn.execute("SELECT current_schema()").fetchone()
            self.key = site_lock_key(str(schema[0] if schema and schema[0] else ""), self.job, *self.names)
        if self.leading:
            self._conn.execute("SELECT 1")  # still ours while the session lives
            return
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,)).fetchone()
        if row and row[0]:
            self.leading = True
            log.info("this node now leads the site's job (%s)", self._what())
            self.on_lead()

    def _what(self) -> str:
        """The job, its names and its lock key, for the log."""
        key = "?" if self.key is None else f"{self.key:x}"
        return " ".join((self.job, *self.names, f"lock {key}"))

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
