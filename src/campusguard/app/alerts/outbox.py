"""`Outbox`: alerts not yet delivered, kept in a SQLite file, so a crash loses none and repeats none.

One outbox per sink (the MQTT, webhook and email sinks). A message is a ``topic`` (MQTT: the
topic; webhook and email: the incident's ``event_id``, which keeps an incident's updates in
order), a ``payload`` and a ``retain`` flag, with the delivery bookkeeping: when it was put in
(``created``), how many attempts failed (``attempts``), when the next may run (``due``) and the
last error. A message is removed once delivered; what a crash leaves is delivered by the next run
on the same file.

The file also holds the ledger of the updates put into it (``delivered``: ``event_id``, ``phase``,
``sequence``), written in the same transaction as their messages: an update raised again (a
restart that replays the spool, a re-read file) is put in once (`Outbox.add_once`).

SQLite in WAL mode with ``synchronous=FULL``: a message is on disk when `add` returns.

`OutboxStore` is what the sinks and their one sender (`campusguard.app.alerts.sender`) use of an
outbox: this SQLite file, or the tables shared by the nodes of a PostgreSQL store
(`campusguard.app.alerts.postgres.outbox.PgOutbox`), where `OutboxStore.due` claims the messages
it returns until each is removed, retried or released (`OutboxStore.release`).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from campusguard.app.events.types import Event
from campusguard.errors import InvalidInputError

__all__ = ["Outbox", "OutboxMessage", "OutboxStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL,
    payload BLOB NOT NULL,
    retain INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS delivered (
    event_id TEXT NOT NULL,
    phase    TEXT NOT NULL,
    sequence INTEGER NOT NULL,
    at       REAL NOT NULL,
    PRIMARY KEY (event_id, phase, sequence)
);
"""
# columns added after the MQTT outbox's first format: old files gain them when opened
_DELIVERY_COLUMNS = (
    ("created", "REAL NOT NULL DEFAULT 0"),
    ("attempts", "INTEGER NOT NULL DEFAULT 0"),
    ("due", "REAL NOT NULL DEFAULT 0"),
    ("error", "TEXT"),
)
_LEDGER_KEEP_S = 90 * 86400.0


@dataclass(frozen=True)
class OutboxMessage:
    """One message waiting: its number, topic, payload, when it was put in (wall clock, s) and
    how many attempts failed."""

    seq: int
    topic: str
    payload: bytes
    retain: bool = False
    created: float = 0.0
    attempts: int = 0


class OutboxStore(Protocol):
    """A sink's messages not yet delivered (`Outbox`: a SQLite file; `PgOutbox`: PostgreSQL, shared)."""

    shared: bool
    """True when several senders (one per node) take from it, each claiming what it sends."""

    @property
    def path(self) -> Path | str:
        """Where the messages are, as logs name it."""
        ...

    def published(self, event: Event) -> bool:
        """True when this update (any end, for an ``end``) was put in before."""
        ...

    def add(self, messages: list[tuple[str, bytes, bool]], event: Event | None = None) -> int:
        """Commit ``(topic, payload, retain)`` messages (with ``event``'s ledger row); how many old ones were dropped."""
        ...

    def add_once(self, topic: str, payload: bytes, event: Event) -> tuple[bool, int]:
        """Put ``event``'s message in unless its update was put in before; ``(added, dropped)``."""
        ...

    def due(self, limit: int, *, now: float | None = None, busy: Collection[str] = ()) -> list[OutboxMessage]:
        """Up to ``limit`` messages to attempt now, oldest first, the oldest of each topic, none of ``busy``;
        each is then removed, retried or released."""
        ...

    def next_batch(self, after: int, limit: int) -> list[OutboxMessage]:
        """Up to ``limit`` messages in order for a pipelining sender (MQTT), above ``after`` (the
        sender's cursor; a shared outbox claims instead); each then removed or released."""
        ...

    def next_due(self) -> float | None:
        """The earliest ``due`` time of a waiting message (wall clock), or None."""
        ...

    def all_due(self) -> int:
        """Make every waiting message due now; how many."""
        ...

    def retry(self, seq: int, due: float, error: str) -> None:
        """Count a failed attempt of message ``seq`` and hold it until ``due``."""
        ...

    def remove(self, seqs: Collection[int]) -> None:
        """Delete messages (delivered or given up on)."""
        ...

    def release(self, seqs: Collection[int]) -> None:
        """Messages `due` gave that were not attempted: let them go unchanged."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None: ...


class Outbox:
    """Messages not yet delivered, in a SQLite file (WAL, one connection, locked; thread-safe).

    Args:
        path: the file; its folder is created.
        max_messages: most messages kept; past it `add` drops the oldest (and returns how many).
        what: the owner's name for messages (``"mqtt outbox"``).

    Raises:
        InvalidInputError: the file cannot be opened.
    """

    shared = False
    """One sender takes from the file (the process that owns it)."""

    def __init__(self, path: str | Path, max_messages: int = 100_000, *, what: str = "outbox") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.max_messages = max_messages
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            have = {row[1] for row in self._db.execute("PRAGMA table_info(outbox)")}
            for name, decl in _DELIVERY_COLUMNS:
                if name not in have:
                    self._db.execute(f"ALTER TABLE outbox ADD COLUMN {name} {decl}")
            self._db.execute("CREATE INDEX IF NOT EXISTS outbox_topic ON outbox (topic, seq)")
            self._db.execute("DELETE FROM delivered WHERE at < ?", (time.time() - _LEDGER_KEEP_S,))
        except sqlite3.Error as exc:
            raise InvalidInputError(f"{what} {self.path}: cannot open: {exc}") from None

    # the ledger of updates put in -------------------------------------------------------------
    def published(self, event: Event) -> bool:
        """True when this update (any end, for an ``end``) was put into the outbox before."""
        with self._lock:
            return self._has(event)

    def _has(self, event: Event) -> bool:
        sql = "SELECT 1 FROM delivered WHERE event_id = ? AND phase = ?"
        args: tuple[object, ...] = (event.event_id, event.phase)
        if event.phase != "end":
            sql += " AND sequence = ?"
            args += (int(event.sequence),)
        return self._db.execute(sql + " LIMIT 1", args).fetchone() is not None

    # adding --------------------------------------------------------------------------------
    def add(self, messages: list[tuple[str, bytes, bool]], event: Event | None = None) -> int:
        """Commit ``(topic, payload, retain)`` messages together (with ``event``'s ledger row);
        return how many old ones were dropped."""
        with self._lock, self._transaction():
            if event is not None:
                self._ledger_row(event)
            return self._insert(messages)

    def add_once(self, topic: str, payload: bytes, event: Event) -> tuple[bool, int]:
        """Put ``event``'s message in unless its update was put in before, in one transaction;
        return ``(added, dropped)``."""
        with self._lock, self._transaction():
            if self._has(event):
                return False, 0
            self._ledger_row(event)
            return True, self._insert([(topic, payload, False)])

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _ledger_row(self, event: Event) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO delivered (event_id, phase, sequence, at) VALUES (?, ?, ?, ?)",
            (event.event_id, event.phase, int(event.sequence), time.time()),
        )

    def _insert(self, messages: list[tuple[str, bytes, bool]]) -> int:
        now = time.time()
        self._db.executemany(
            "INSERT INTO outbox (topic, payload, retain, created, due) VALUES (?, ?, ?, ?, ?)",
            [(t, p, int(r), now, 0.0) for t, p, r in messages],
        )
        (count,) = self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()
        excess = max(0, int(count) - self.max_messages)
        if excess:
            self._db.execute("DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox ORDER BY seq LIMIT ?)", (excess,))
        return excess

    # taking --------------------------------------------------------------------------------
    def next_batch(self, after: int, limit: int) -> list[OutboxMessage]:
        """Up to ``limit`` messages numbered above ``after`` (the one sender's cursor: what it handed
        over already), oldest first, for a pipelining sender (MQTT)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, topic, payload, retain, created, attempts FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit),
            ).fetchall()
        return [OutboxMessage(int(s), str(t), bytes(p), bool(r), float(c), int(a)) for s, t, p, r, c, a in rows]

    def due(self, limit: int, *, now: float | None = None, busy: Collection[str] = ()) -> list[OutboxMessage]:
        """Up to ``limit`` messages whose next attempt may run (``due <= now``), oldest first, and
        only the oldest of each topic (an incident's updates go in order), skipping ``busy`` topics."""
        now = time.time() if now is None else now
        with self._lock:
            rows = self._db.execute(
                "SELECT seq, topic, payload, retain, created, attempts FROM outbox o WHERE due <= ? "
                "AND NOT EXISTS (SELECT 1 FROM outbox p WHERE p.topic = o.topic AND p.seq < o.seq) "
                "ORDER BY seq LIMIT ?",
                (now, limit + len(busy)),
            ).fetchall()
        out = [OutboxMessage(int(s), str(t), bytes(p), bool(r), float(c), int(a)) for s, t, p, r, c, a in rows]
        return [m for m in out if m.topic not in busy][:limit]

    def next_due(self) -> float | None:
        """The earliest ``due`` time of a waiting message (wall clock), or None when empty."""
        with self._lock:
            (due,) = self._db.execute("SELECT MIN(due) FROM outbox").fetchone()
        return None if due is None else float(due)

    def all_due(self) -> int:
        """Make every waiting message due now (a new run tries what an earlier one held back); return how many."""
        with self._lock:
            return int(self._db.execute("UPDATE outbox SET due = 0 WHERE due > 0").rowcount)

    def retry(self, seq: int, due: float, error: str) -> None:
        """Count a failed attempt of message ``seq`` and hold it until ``due`` (wall clock)."""
        with self._lock:
            self._db.execute(
                "UPDATE outbox SET attempts = attempts + 1, due = ?, error = ? WHERE seq = ?", (due, error, seq)
            )

    def release(self, seqs: Collection[int]) -> None:
        """Nothing to do: a SQLite outbox has one sender, whose own bookkeeping keeps a message it attempts."""

    def remove(self, seqs: Collection[int]) -> None:
        with self._lock:
            self._db.executemany("DELETE FROM outbox WHERE seq = ?", [(s,) for s in seqs])

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM outbox").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()
