"""`PgOutbox`: a sink's outbox in PostgreSQL (`campusguard.app.alerts.outbox.OutboxStore`), shared by every node.

The same interface as the SQLite `campusguard.app.alerts.outbox.Outbox`, for one sink name in
the shared tables (`campusguard.app.alerts.postgres.schema`):

- `add_once` puts an update's message in unless ``(sink, event_id, phase, sequence)`` was put in
  before (any end, for an ``end``), in one transaction under a transaction-level advisory lock of
  the sink and incident: a re-relayed update (`campusguard.app.events.relay`) is put in once.
- `due` claims the messages it returns: one transaction on a connection of its own, their rows
  locked (``FOR UPDATE SKIP LOCKED``: never a message another node holds, and only the oldest
  message of a topic, even one another node holds, so an incident's updates go in order). The
  claim ends when each of them was removed, held for a retry or released, with one commit: a
  delivered message is deleted in the transaction that held it while it was sent. A node killed
  mid-send ends its session, and the lock with it: another node sends that message.
- `next_batch` claims the same way for a pipelining sender (MQTT: a window of messages handed to
  the client library at once), the oldest messages of the sink in order without the one-per-topic
  rule (every MQTT event goes to one topic), none another node holds.
- A claim whose connection is lost (the server restarted) is dropped and said once: its message
  stays and is sent again (by whichever node claims it); a receiver that got it already drops it
  by its ``event_id`` and ``sequence``.
- What stays at least once: a node killed after the receiver took a message but before its claim
  committed the delete (one round trip to the server: the claim commits asynchronously) leaves it
  to another node, which sends it again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import psycopg

from campusguard.app.alerts.ledger import delivery_match
from campusguard.app.alerts.outbox import OutboxMessage
from campusguard.app.alerts.postgres.schema import OUTBOX_TABLE, PUT_TABLE, migrate_alerts
from campusguard.app.events.pgsession import PgSession, RetryPolicy
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.types import Event
from campusguard.app.events.urls import one_line

__all__ = ["PgOutbox"]

log = logging.getLogger(__name__)

_LEDGER_KEEP_S = 90 * 86400.0
_MAX_IDLE = 4  # claim connections kept open between claims

_ELIGIBLE = (
    f"sink = %s AND NOT EXISTS (SELECT 1 FROM {OUTBOX_TABLE} p WHERE p.sink = o.sink AND p.topic = o.topic "
    "AND p.seq < o.seq)"
)
_CLAIM_SQL = (
    f"SELECT seq, topic, payload, retain, created, attempts FROM {OUTBOX_TABLE} o "
    f"WHERE {_ELIGIBLE} AND due <= %s AND NOT (topic = ANY(%s)) ORDER BY seq LIMIT %s FOR UPDATE OF o SKIP LOCKED"
)
_BATCH_SQL = (
    f"SELECT seq, topic, payload, retain, created, attempts FROM {OUTBOX_TABLE} "
    "WHERE sink = %s ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED"
)
_NEXT_DUE_SQL = f"SELECT due FROM {OUTBOX_TABLE} o WHERE {_ELIGIBLE} ORDER BY due LIMIT 1 FOR UPDATE OF o SKIP LOCKED"


@dataclass
class _Claim:
    """The open transaction holding the rows one `PgOutbox.due` returned, and those not settled yet."""

    conn: psycopg.Connection[Any]
    open: set[int] = field(default_factory=set)


class PgOutbox:
    """One sink's messages not yet delivered, in PostgreSQL (thread-safe; see the module doc).

    Args:
        url: the event store's PostgreSQL URL.
        sink: the sink's name (every node names it alike: the config's sink name).
        retry: the back-off of calls whose connection failed.
        max_messages: most messages kept for the sink; past it `add` drops the oldest not being sent.
        what: the owner's name for messages (``"webhook outbox"``).

    Raises:
        InvalidInputError, StoreUnavailableError: the tables cannot be opened (`PgSession.open`).
    """

    shared = True
    """Several senders (one per node) take from it: a sender claims, and lets go of what it cannot send."""

    def __init__(
        self,
        url: str,
        sink: str,
        *,
        retry: RetryPolicy | None = None,
        max_messages: int = 100_000,
        what: str = "outbox",
    ) -> None:
        self.sink = sink
        self.max_messages = max_messages
        self._session = PgSession(url, what=what, retry=retry)
        self.path = f"{self._session.display} {OUTBOX_TABLE}[{sink}]"
        self._session.open(migrate_alerts)
        self._lock = threading.Lock()  # the claims and the idle connections
        self._claims: dict[int, _Claim] = {}
        self._idle: list[psycopg.Connection[Any]] = []
        self._lost: set[int] = set()  # claimed messages whose claim's connection was lost
        prune = f"DELETE FROM {PUT_TABLE} WHERE sink = %s AND at < %s"
        self._run("pruning", lambda c: c.execute(prune, (sink, time.time() - _LEDGER_KEEP_S)))

    def _run(self, what: str, op: Any) -> Any:
        return self._session.run(f"{what} the {self.sink} outbox", op)

    # the ledger of updates put in -------------------------------------------------------------
    def published(self, event: Event) -> bool:
        """True when this update (any end, for an ``end``) was put into the outbox before."""
        return bool(self._run("reading", lambda c: self._has(c, event)))

    def _has(self, conn: psycopg.Connection[Any], event: Event) -> bool:
        match, args = delivery_match(event, "%s")
        sql = f"SELECT 1 FROM {PUT_TABLE} WHERE sink = %s AND {match} LIMIT 1"
        return conn.execute(sql, (self.sink, *args)).fetchone() is not None

    # adding --------------------------------------------------------------------------------
    def add(self, messages: list[tuple[str, bytes, bool]], event: Event | None = None) -> int:
        """Commit ``(topic, payload, retain)`` messages together (with ``event``'s ledger row);
        return how many old ones were dropped."""

        def op(conn: psycopg.Connection[Any]) -> int:
            with conn.transaction():
                if event is not None:
                    self._ledger_row(conn, event)
                return self._insert(conn, messages)

        return int(self._run("adding to", op))

    def add_once(self, topic: str, payload: bytes, event: Event) -> tuple[bool, int]:
        """Put ``event``'s message in unless its update was put in before (by any node), in one
        transaction; return ``(added, dropped)``."""

        def op(conn: psycopg.Connection[Any]) -> tuple[bool, int]:
            with conn.transaction():
                # one incident of one sink at a time: two nodes adding two ends put in one
                key = f"{self.sink}\n{event.event_id}"
                conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
                if self._has(conn, event):
                    return False, 0
                self._ledger_row(conn, event)
                return True, self._insert(conn, [(topic, payload, False)])

        added, dropped = self._run("adding to", op)
        return bool(added), int(dropped)

    def _ledger_row(self, conn: psycopg.Connection[Any], event: Event) -> None:
        conn.execute(
            f"INSERT INTO {PUT_TABLE} (sink, event_id, phase, sequence, at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING",
            (self.sink, event.event_id, event.phase, int(event.sequence), time.time()),
        )

    def _insert(self, conn: psycopg.Connection[Any], messages: list[tuple[str, bytes, bool]]) -> int:
        now = time.time()
        with conn.cursor() as cur:
            cur.executemany(
                f"INSERT INTO {OUTBOX_TABLE} (sink, topic, payload, retain, created, due) VALUES (%s, %s, %s, %s, %s, 0)",
                [(self.sink, t, p, bool(r), now) for t, p, r in messages],
            )
        row = conn.execute(f"SELECT COUNT(*) FROM {OUTBOX_TABLE} WHERE sink = %s", (self.sink,)).fetchone()
        excess = max(0, int(row[0] if row else 0) - self.max_messages)
        if excess:
            conn.execute(
                f"DELETE FROM {OUTBOX_TABLE} WHERE seq IN (SELECT seq FROM {OUTBOX_TABLE} WHERE sink = %s "
                "ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED)",
                (self.sink, excess),
            )
        return excess

    # taking --------------------------------------------------------------------------------
    def due(self, limit: int, *, now: float | None = None, busy: Collection[str] = ()) -> list[OutboxMessage]:
        """Claim up to ``limit`` messages whose next attempt may run (``due <= now``), oldest first,
        only the oldest of each topic and none of the ``busy`` topics nor any another node holds.
        Each must then be `remove`d, `retry`d or `release`d; the claim commits once all are.

        Raises:
            StoreUnavailableError: no connection could be had, or it was lost.
        """
        now = time.time() if now is None else now
        return self._claim(_CLAIM_SQL, (self.sink, now, list(busy), limit))

    def next_batch(self, after: int, limit: int) -> list[OutboxMessage]:
        """Claim up to ``limit`` of the sink's oldest messages that no other claim holds (this node's
        in-flight ones included), in order, for a pipelining sender; each must then be `remove`d or
        `release`d. ``after`` (the SQLite outbox's cursor) is not used: another node's message may
        commit with a lower number than one already taken here.

        Raises:
            StoreUnavailableError: no connection could be had, or it was lost.
        """
        return self._claim(_BATCH_SQL, (self.sink, limit))

    def _claim(self, sql: str, args: tuple[Any, ...]) -> list[OutboxMessage]:
        """Run the claiming ``sql`` in a transaction of its own that stays open until each row it
        returned is settled."""
        for attempt in (1, 2):  # a kept connection the server dropped (a restart) is replaced once
            conn, kept = self._connection()
            try:
                # the claim's end (a delivered message's delete) commits without waiting for the WAL
                # flush: the moment between a receiver's answer and the commit, in which a killed
                # node's message would be sent again by another, stays one round trip short; a crash
                # of the server itself may repeat that message instead
                conn.execute("SET LOCAL synchronous_commit TO off")
                rows = conn.execute(sql, args).fetchall()
                break
            except psycopg.Error as exc:
                _close(conn)
                if kept and attempt == 1:
                    self._drop_idle()
                    continue
                raise StoreUnavailableError(f"{self.path}: cannot claim messages: {one_line(exc)}") from None
        if not rows:
            self._settled(conn, commit=False)
            return []
        out = [OutboxMessage(int(s), str(t), bytes(p), bool(r), float(c), int(a)) for s, t, p, r, c, a in rows]
        claim = _Claim(conn, {m.seq for m in out})
        with self._lock:
            for m in out:
                self._claims[m.seq] = claim
        return out

    def _connection(self) -> tuple[psycopg.Connection[Any], bool]:
        """A connection for a claim, and whether it was kept from an earlier one."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not conn.closed:
            return conn, True
        try:
            conn = self._session.connect()
            conn.autocommit = False  # a claim is a transaction held open while its messages are sent
        except psycopg.Error as exc:
            raise StoreUnavailableError(f"{self.path}: cannot connect: {one_line(exc)}") from None
        return conn, False

    def _drop_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)

    def _settled(self, conn: psycopg.Connection[Any], *, commit: bool) -> None:
        """End a claim's transaction and keep its connection for the next (or close it)."""
        try:
            if commit:
                conn.commit()
            else:
                conn.rollback()
        except psycopg.Error as exc:
            _close(conn)
            if commit:
                log.warning(
                    "%s: a claim was not committed (%s); its messages may be sent again", self.path, one_line(exc)
                )
            return
        with self._lock:
            if len(self._idle) < _MAX_IDLE:
                self._idle.append(conn)
                return
        _close(conn)

    def _on_claim(self, seq: int, sql: str | None, args: tuple[Any, ...] = ()) -> bool:
        """Run ``sql`` for claimed message ``seq`` in its claim and settle it there; False when ``seq``
        is not claimed here."""
        with self._lock:
            if seq in self._lost:
                self._lost.discard(seq)
                return True
            claim = self._claims.pop(seq, None)
        if claim is None:
            return False
        try:
            if sql is not None and not claim.conn.closed:
                claim.conn.execute(sql, args)
        except psycopg.Error as exc:
            log.warning(
                "%s: the claim on message %d was lost (%s); it stays in the outbox and may be sent again",
                self.path,
                seq,
                one_line(exc),
            )
            with self._lock:
                for other in claim.open - {seq}:
                    self._claims.pop(other, None)
                    self._lost.add(other)
            _close(claim.conn)
            return True
        claim.open.discard(seq)
        if not claim.open:
            self._settled(claim.conn, commit=True)
        return True

    def next_due(self) -> float | None:
        """The earliest ``due`` time of a message this node could claim (wall clock), or None."""

        def op(conn: psycopg.Connection[Any]) -> float | None:
            row = conn.execute(_NEXT_DUE_SQL, (self.sink,)).fetchone()
            return None if row is None else float(row[0])

        result: float | None = self._run("reading", op)
        return result

    def all_due(self) -> int:
        """Make every waiting message (none another node holds) due now; return how many."""
        sql = (
            f"UPDATE {OUTBOX_TABLE} SET due = 0 WHERE seq IN (SELECT seq FROM {OUTBOX_TABLE} "
            "WHERE sink = %s AND due > 0 FOR UPDATE SKIP LOCKED)"
        )
        return int(self._run("rescheduling", lambda c: c.execute(sql, (self.sink,)).rowcount))

    def retry(self, seq: int, due: float, error: str) -> None:
        """Count a failed attempt of message ``seq`` and hold it until ``due`` (wall clock)."""
        sql = f"UPDATE {OUTBOX_TABLE} SET attempts = attempts + 1, due = %s, error = %s WHERE seq = %s"
        if not self._on_claim(seq, sql, (due, error, seq)):
            self._run("holding a message in", lambda c: c.execute(sql, (due, error, seq)))

    def remove(self, seqs: Collection[int]) -> None:
        """Delete messages (delivered or given up on); a claimed one in its claim."""
        sql = f"DELETE FROM {OUTBOX_TABLE} WHERE seq = %s"
        loose = [seq for seq in seqs if not self._on_claim(seq, sql, (seq,))]
        if loose:
            self._run("removing from", lambda c: c.execute(f"DELETE FROM {OUTBOX_TABLE} WHERE seq = ANY(%s)", (loose,)))

    def release(self, seqs: Collection[int]) -> None:
        """Let claimed messages go unchanged (not handled this round)."""
        for seq in seqs:
            self._on_claim(seq, None)

    def __len__(self) -> int:
        sql = f"SELECT COUNT(*) FROM {OUTBOX_TABLE} WHERE sink = %s"
        row = self._run("counting", lambda c: c.execute(sql, (self.sink,)).fetchone())
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Release every claim (its messages stay) and close the connections (idempotent)."""
        with self._lock:
            conns = [c.conn for c in self._claims.values()] + self._idle
            self._claims.clear()
            self._idle.clear()
            self._lost.clear()
        for conn in {id(c): c for c in conns}.values():
            _close(conn)
        self._session.close()


def _close(conn: psycopg.Connection[Any]) -> None:
    with contextlib.suppress(psycopg.Error):
        conn.close()
