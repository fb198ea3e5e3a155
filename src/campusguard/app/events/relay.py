"""The alert relay of a PostgreSQL event store: a transactional outbox between the store and the alert sinks.

::

    PostgresEventStore.record --(one statement)--> events (upsert) + alert_relay (a row per update)
    AlertRelay (a thread on every node)    --claims rows (FOR UPDATE SKIP LOCKED)--> send(event)
                                                --then deletes them, in the same transaction

An update is stored and queued for the alerts in one statement (`with_relay`: the upsert in a
``WITH``), so in one commit, so a process killed between the two
loses no alert: whichever node's relay runs next hands it on. A relay claims rows with
``SELECT ... FOR UPDATE SKIP LOCKED`` inside a transaction, hands each update to ``send`` (the sinks
put it into their outboxes) and deletes the rows in the same transaction: two nodes never hand on
one row at once, and a node killed while it holds rows releases them (its session ends) for another.
A relay killed after ``send`` but before its commit makes the next one hand the update on again:
the sinks' outboxes put an update in once (``(sink, event_id, phase, sequence)``), so that repeats
nothing.

Order: a relay takes only the oldest row of each incident (a row with an older one of the same
``event_id`` waits, even when another node holds the older one), so an incident's ``start`` reaches
the outboxes before its ``end`` whatever node relays which.

Schema: table ``alert_relay`` and its version table ``campusguard_relay_schema`` (migrations under
an advisory lock of their own), created when the store opens read-write.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from campusguard.app.events.pgsession import PgSession, RetryPolicy, advisory_key, apply_migrations
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.types import Event
from campusguard.app.infra.throttle import OutageLog

__all__ = ["RELAY_INSERT_SQL", "RELAY_TABLE", "AlertRelay", "migrate_relay", "relay_args", "with_relay"]

log = logging.getLogger("campusguard.app.events.relay")

RELAY_TABLE = "alert_relay"
VERSION_TABLE = "campusguard_relay_schema"
_LOCK = advisory_key("cgrelay")

MIGRATIONS: dict[int, str] = {
    1: f"""
CREATE TABLE {RELAY_TABLE} (
    id          BIGSERIAL PRIMARY KEY,
    event_id    TEXT NOT NULL,
    phase       TEXT NOT NULL,
    sequence    BIGINT NOT NULL,
    event       TEXT NOT NULL,
    recorded_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX {RELAY_TABLE}_event ON {RELAY_TABLE} (event_id, id)
""",
}
"""Migration N brings the relay's table from version N-1 to N."""

RELAY_INSERT_SQL = f"INSERT INTO {RELAY_TABLE} (event_id, phase, sequence, event) VALUES (%s, %s, %s, %s)"
"""One update to relay (`relay_args` gives the values)."""


def with_relay(write_sql: str) -> str:
    """One statement: ``write_sql`` (the store's upsert, its parameters first) and the update's relay
    row (`relay_args` after them): both committed, or neither."""
    return f"WITH stored AS ({write_sql}) {RELAY_INSERT_SQL}"

_CLAIM_SQL = f"""
SELECT r.id, r.event FROM {RELAY_TABLE} r
WHERE NOT EXISTS (SELECT 1 FROM {RELAY_TABLE} p WHERE p.event_id = r.event_id AND p.id < r.id)
ORDER BY r.id LIMIT %s
FOR UPDATE OF r SKIP LOCKED
"""
_DELETE_SQL = f"DELETE FROM {RELAY_TABLE} WHERE id = ANY(%s)"
_AFTER_ERROR_S = 1.0
RELAY_KEEP_DAYS = 30
"""A queued update older than this is dropped when a store opens (nobody relayed it in a month)."""


def migrate_relay(conn: psycopg.Connection[Any]) -> None:
    """Create or bring up to date the relay table (one transaction, under its advisory lock), and drop
    its rows older than `RELAY_KEEP_DAYS`: updates no process relayed (a site whose processes have no
    sinks leaves every row), so the table stays bounded."""
    apply_migrations(conn, version_table=VERSION_TABLE, lock=_LOCK, migrations=MIGRATIONS, what="alert relay")
    conn.execute(
        f"DELETE FROM {RELAY_TABLE} WHERE recorded_at < now() - make_interval(days => %s)", (RELAY_KEEP_DAYS,)
    )


def relay_args(event: Event) -> tuple[str, str, int, str]:
    """The values of `RELAY_INSERT_SQL` for ``event``."""
    return (event.event_id, event.phase, int(event.sequence), json.dumps(event.to_dict(), default=str))


class AlertRelay:
    """The relay thread of one node: hands the stored updates of the relay table to ``send``.

    Args:
        url: the event store's PostgreSQL URL.
        send: hands one update to the alert sinks; it raises `StoreUnavailableError` when a sink
            could not take it (the row stays, tried again a second later); any other error is
            logged and the update counts as handed on.
        retry: the back-off of calls whose connection failed.
        poll_s: how often the table is looked at when nobody `wake`s the relay (seconds); the
            event writer of the same process wakes it after each commit.
        batch: most rows claimed in one transaction.

    Attributes:
        relayed: updates handed on by this relay.
    """

    def __init__(
        self,
        url: str,
        send: Callable[[Event], None],
        *,
        retry: RetryPolicy | None = None,
        poll_s: float = 0.25,
        batch: int = 50,
    ) -> None:
        if poll_s <= 0 or batch < 1:
            raise ValueError("alert relay: need poll_s > 0 and batch >= 1")
        self._session = PgSession(url, what="alert relay", retry=retry or RetryPolicy(budget_s=5.0))
        self.display = self._session.display
        self._send = send
        self.poll_s = float(poll_s)
        self.batch = int(batch)
        self.relayed = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._outage = OutageLog(log, f"alert relay {self.display}")
        self._thread: threading.Thread | None = None
        self._closed = False
        self._blocked: str | None = None  # why the last round left an update for later (a sink's outbox away)

    def start(self) -> AlertRelay:
        """Start the relay thread (once); returns self."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="alert-relay", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        """Look at the table now (an update was just committed)."""
        self._wake.set()

    def relay_once(self) -> int:
        """One transaction: claim up to ``batch`` rows (the oldest of each incident, none another
        relay holds), hand them on, delete those handed on; how many.

        Raises:
            StoreUnavailableError: the server could not be reached within the retry budget.
        """
        return self._session.run("relaying alerts", self._relay)

    def _relay(self, conn: psycopg.Connection[Any]) -> int:
        self._blocked = None
        with conn.transaction():
            rows = conn.execute(_CLAIM_SQL, (self.batch,)).fetchall()
            done: list[int] = []
            for row_id, text in rows:
                try:
                    event = Event.from_dict(json.loads(text))
                except (ValueError, TypeError) as exc:  # not an update: said, never blocks the incident
                    log.error("alert relay: row %d is not an event update (%s); dropped", row_id, exc)
                    done.append(int(row_id))
                    continue
                try:
                    self._send(event)
                except StoreUnavailableError as exc:  # a sink could not take it: it stays for the next round
                    self._blocked = f"update {event.event_id} {event.phase} waits: {exc}"
                    break
                except Exception:  # a fault of ours: said, and the update counts as handed on (never a loop)
                    log.exception("alert relay: handing on %s %s failed", event.event_id, event.phase)
                done.append(int(row_id))
            if done:
                conn.execute(_DELETE_SQL, (done,))
        self.relayed += len(done)
        return len(done)

    def drain(self, timeout_s: float) -> int:
        """Relay until no row is left that this relay may take, or ``timeout_s`` passed; how many."""
        deadline = time.monotonic() + timeout_s
        total = 0
        while time.monotonic() < deadline:
            try:
                n = self.relay_once()
            except StoreUnavailableError as exc:
                log.warning("alert relay %s: %s; the updates left are relayed by the next node or run", self.display, exc)
                break
            total += n
            if not n:
                break
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                n = self.relay_once()
            except StoreUnavailableError as exc:
                self._outage.down(f"cannot relay ({exc})")
                self._stop.wait(_AFTER_ERROR_S)
                continue
            except Exception:  # a fault of ours: said, never the end of the relay
                log.exception("alert relay %s hit an unexpected error; it goes on", self.display)
                self._stop.wait(_AFTER_ERROR_S)
                continue
            if self._blocked is not None:  # a sink's outbox is away: the update waits, tried again in a while
                self._outage.down(self._blocked)
                self._stop.wait(_AFTER_ERROR_S)
                continue
            self._outage.up("relays again")
            if n:
                continue  # more may wait (an incident's next update, a backlog)
            self._wake.wait(self.poll_s)
            self._wake.clear()

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the thread, relay what is left (within ``timeout_s``; one attempt when the server is
        lost: the rows stay queued for another node or the next run) and close the connection (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._session.stop_retrying()  # a server that is down is not waited for: the rows stay queued
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        self.drain(max(0.1, timeout_s))
        self._session.close()
