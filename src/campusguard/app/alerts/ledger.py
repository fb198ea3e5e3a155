"""`DeliveryLedger`: what an alert sink has delivered, kept on disk, so a restart repeats nothing.

A delivery is named by the incident's ``event_id``, the update's ``phase`` and its ``sequence``
(`campusguard.app.events.types.Event`). A sink asks `DeliveryLedger.delivered` before it sends
and calls `DeliveryLedger.record` once the update is delivered (a JSON line fsync'd, a webhook
answered 2xx); a re-read file, a replayed spool or a restarted run that raises the same update
again is then skipped. An incident ends once: any ``end`` of an ``event_id`` already recorded
counts as its end, whatever its sequence (an interrupted end and a real one are one end).

The file is SQLite (WAL, ``synchronous=FULL``: a recorded delivery survives a crash or a power
cut), one table keyed by the sink's name, so several sinks share one file beside the event
store (``<store>.delivered.db``). Rows older than ``keep_days`` are dropped when it opens: a
ledger of a year of alerts stays small, and only a file re-read after that long is sent again.
A crash between a delivery and its record can still repeat that one update; payloads carry
``event_id`` and ``sequence`` so the consumer can drop it.

`Ledger` is what the sinks use of one: this SQLite file, or the table the nodes of a PostgreSQL
store share (`campusguard.app.alerts.postgres.ledger.PgDeliveryLedger`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

from campusguard.app.events.types import Event
from campusguard.app.infra.sqlitedb import check_sqlite_file
from campusguard.errors import InvalidInputError

__all__ = ["DeliveryKey", "DeliveryLedger", "Ledger", "delivery_key", "delivery_match", "ledger_path_for"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS delivered (
    sink     TEXT NOT NULL,
    event_id TEXT NOT NULL,
    phase    TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    at       REAL NOT NULL,
    PRIMARY KEY (sink, event_id, phase, sequence)
)
"""

DeliveryKey = tuple[str, str, int | None]
"""``(event_id, phase, sequence)`` naming one delivery; ``None`` for an end's sequence (`delivery_key`)."""


def delivery_key(event_id: str, phase: str, sequence: int) -> DeliveryKey:
    """The key an update is delivered under. An incident ends once: any ``end`` of an ``event_id``
    counts as its end, whatever its sequence (an interrupted end and a real one are one end), so an
    end's key has no sequence."""
    return (event_id, phase, None if phase == "end" else int(sequence))


def delivery_match(event: Event, param: str) -> tuple[str, tuple[object, ...]]:
    """The SQL condition (on columns ``event_id``, ``phase``, ``sequence``; ``param`` the driver's
    placeholder) and its arguments that a row of ``event``'s delivery meets (`delivery_key`)."""
    event_id, phase, sequence = delivery_key(event.event_id, event.phase, event.sequence)
    if sequence is None:
        return f"event_id = {param} AND phase = {param}", (event_id, phase)
    return f"event_id = {param} AND phase = {param} AND sequence = {param}", (event_id, phase, sequence)


def ledger_path_for(store_sqlite: str | Path) -> Path:
    """The ledger file of the sinks of a store whose SQLite file is ``store_sqlite``."""
    return Path(store_sqlite).with_suffix(".delivered.db")


class Ledger(Protocol):
    """A durable set of one sink's deliveries ``(event_id, phase, sequence)`` (`DeliveryLedger`, `PgDeliveryLedger`)."""

    def delivered(self, event: Event) -> bool:
        """True when this update (or, for an ``end``, any end of the incident) was delivered."""
        ...

    def record(self, event: Event) -> None:
        """Remember that this update was delivered."""
        ...

    def record_key(self, event_id: str, phase: str, sequence: int) -> None:
        """`record` from the parts of a payload; a record that cannot be written is logged, never raised."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None: ...


class DeliveryLedger:
    """A durable set of ``(sink, event_id, phase, sequence)`` deliveries (thread-safe).

    Args:
        path: the SQLite file; its folder is created.
        sink: the name of the sink this ledger answers for (one file may hold several).
        keep_days: rows older than this are dropped at open (> 0).

    Raises:
        InvalidInputError: the file cannot be opened.
    """

    def __init__(self, path: str | Path, sink: str, *, keep_days: float = 90.0) -> None:
        self.path = Path(path)
        self.sink = sink
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        check_sqlite_file(self.path, what="delivery ledger")
        try:
            self._db: sqlite3.Connection | None = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute(_SCHEMA)
            self._db.execute("DELETE FROM delivered WHERE sink = ? AND at < ?", (sink, time.time() - keep_days * 86400))
        except sqlite3.Error as exc:
            raise InvalidInputError(f"delivery ledger {self.path}: cannot open: {exc}") from None

    def delivered(self, event: Event) -> bool:
        """True when this update (or, for an ``end``, any end of the incident) was delivered."""
        match, args = delivery_match(event, "?")
        with self._lock:
            if self._db is None:
                return False
            sql = f"SELECT 1 FROM delivered WHERE sink = ? AND {match} LIMIT 1"
            return self._db.execute(sql, (self.sink, *args)).fetchone() is not None

    def record(self, event: Event) -> None:
        """Remember that this update was delivered; durable when this returns."""
        self.record_key(event.event_id, event.phase, int(event.sequence))

    def record_key(self, event_id: str, phase: str, sequence: int) -> None:
        """`record` from the parts of a payload (a dead letter re-driven). A record that cannot be
        written (a full disk) is logged: the delivery stands, a restart may repeat it."""
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR IGNORE INTO delivered (sink, event_id, phase, sequence, at) VALUES (?, ?, ?, ?, ?)",
                    (self.sink, event_id, phase, int(sequence), time.time()),
                )
            except sqlite3.Error as exc:
                log.error("delivery ledger %s: %s %s#%d not recorded (%s)", self.path, event_id, phase, sequence, exc)

    def __len__(self) -> int:
        with self._lock:
            if self._db is None:
                return 0
            (n,) = self._db.execute("SELECT COUNT(*) FROM delivered WHERE sink = ?", (self.sink,)).fetchone()
        return int(n)

    def close(self) -> None:
        """Close the file (idempotent)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
