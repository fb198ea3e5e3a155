"""`SQLiteEventStore`: the event store in one SQLite file, the embedded default.

Durability: ``SQLiteEventStore`` runs SQLite in WAL mode with ``synchronous=FULL``. In WAL
mode ``NORMAL`` already survives a killed process (a commit is in the WAL file, in the OS
page cache, before ``commit()`` returns) but may lose the last commits on power loss or an
OS crash; ``FULL`` fsyncs the WAL on every commit, so a committed event survives both.
Events are rare (a few per minute per camera), so one fsync per event costs nothing that
matters: measured on the development VM, ``record`` takes 4.0 ms median (12 ms p95) with
``FULL`` against 0.04 ms with ``NORMAL``, and the pipeline calls it from its event thread, not
the detection loop. Every write commits before returning: callers report an event as raised (alerts,
stdout) only after `EventStore.record` returns.

Schema: ``PRAGMA user_version`` holds the schema version (`SCHEMA_VERSION`). The migrations
(`campusguard.app.events.migrations`, in SQLite's spelling) are applied in order in one transaction
when a read-write store opens an older file; opening a file written by a newer schema is refused.
What the store does beyond one statement (upserts, review, keep, retention, checklists) is
`UpsertingEventStore`'s, shared with `PostgresEventStore` (`campusguard.app.events.postgres`).
"""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from campusguard.app.events.migrations import SCHEMA_VERSION, TABLES, render
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction
from campusguard.app.events.review import check_review_action, review_outcome
from campusguard.app.events.sql import SQLITE
from campusguard.app.events.store import UpsertingEventStore, check_page
from campusguard.app.infra.diskspace import disk_health, is_disk_full
from campusguard.app.infra.sqlitedb import (
    SQLiteFile,
    apply_migrations,
    check_sqlite_file,
    connect_durable,
    schema_version,
    write_transaction,
)
from campusguard.errors import InvalidInputError

__all__ = ["SQLiteEventStore"]


_ROOM_FOR_ROWS = 1 << 20  # bytes asked of the media when the event database finds its disk full


class SQLiteEventStore(SQLiteFile, UpsertingEventStore):
    """`EventStore` in one SQLite file (WAL, ``synchronous=FULL``), safe to share across threads.

    Args:
        path: database file; its folder is created if missing.
        read_only: open an existing file without writing (for queries and evaluation).

    Raises:
        InvalidInputError: the file is not a CampusGuard event database, was written by a newer
            schema, or (read-only) does not exist.
    """

    dialect = SQLITE

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            if read_only and not self.path.is_file():
                raise InvalidInputError(f"event database {self.path} does not exist")
            check_sqlite_file(self.path, what="event database")
            self._conn = connect_durable(self.path, read_only=read_only)
            self._migrate(read_only)
        except sqlite3.DatabaseError as exc:
            raise InvalidInputError(f"event database {self.path} cannot be opened: {exc}") from exc

    def _migrate(self, read_only: bool) -> None:
        version = schema_version(self._conn)
        if version > SCHEMA_VERSION:
            raise InvalidInputError(
                f"event database {self.path} has schema version {version}, newer than this CampusGuard ({SCHEMA_VERSION})"
            )
        if version == SCHEMA_VERSION:
            return
        if read_only:
            if version == 0:
                raise InvalidInputError(f"event database {self.path} is not a CampusGuard event database")
            raise InvalidInputError(
                f"event database {self.path} has schema version {version}, older than this CampusGuard "
                f"({SCHEMA_VERSION}); open it once read-write (campusguard watch or serve) to migrate it"
            )
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        # (another opener may be migrating the new file right now: its tables are ours)
        if version == 0 and tables - TABLES:
            raise InvalidInputError(f"event database {self.path} holds other tables; refusing to use it")
        apply_migrations(self._conn, render(self.dialect.schema), version)

    # writes ---------------------------------------------------------------------------------
    def _execute(self, what: str, sql: str, args: tuple[Any, ...]) -> None:
        """One committed write. A full disk ("database or disk is full") is the store being
        unavailable: nothing was committed, the oldest media are asked to make room
        (`DiskHealth.make_room`), and `StoreUnavailableError` tells the writer to try again."""
        try:
            with self._lock, write_transaction(self._conn) as conn:
                conn.execute(sql, args)
        except sqlite3.OperationalError as exc:
            if not is_disk_full(exc):
                raise
            disk = disk_health()
            disk.failed("event row", self.path, exc)
            disk.make_room(self.path.parent, _ROOM_FOR_ROWS)
            raise StoreUnavailableError(f"{what}: event database {self.path}: {exc}") from exc
        disk_health().ok(self.path)

    def _execute_count(self, what: str, sql: str, args: tuple[Any, ...]) -> int:
        with self._lock, write_transaction(self._conn) as conn:
            return int(conn.execute(sql, args).rowcount)

    def _fetch(self, what: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return [tuple(r) for r in self._conn.execute(sql, args).fetchall()]

    def _review_batch(
        self, what: str, update: tuple[str, tuple[Any, ...]], select: tuple[str, tuple[Any, ...]]
    ) -> tuple[set[str], list[tuple[Any, ...]]]:
        with self._lock, write_transaction(self._conn) as conn:  # check, change and read in one transaction
            changed = {str(r[0]) for r in conn.execute(*update).fetchall()}
            return changed, [tuple(r) for r in conn.execute(*select).fetchall()]

    def reclaim_space(self, *, force: bool = False) -> int:
        """VACUUM the file when a quarter of it (and at least 1 MiB) is free pages, or ``force``; then
        truncate the WAL. Bytes the file shrank by."""
        with self._lock:
            page = int(self._conn.execute("PRAGMA page_size").fetchone()[0])
            pages = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
            free = int(self._conn.execute("PRAGMA freelist_count").fetchone()[0])
            if not free or not (force or (free * page >= 2**20 and free * 4 >= pages)):
                return 0
            self._conn.execute("VACUUM")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            after = int(self._conn.execute("PRAGMA page_count").fetchone()[0])
        return max(0, pages - after) * page

    # reads ----------------------------------------------------------------------------------
    def query_records(
        self,
        where: EventFilter = EventFilter(),  # noqa: B008 - frozen, so a shared default is safe
        *,
        limit: int | None = 50,
        offset: int = 0,
        newest_first: bool = True,
    ) -> tuple[list[EventRecord], int]:
        """One page of incidents matching ``where`` and the number of all matching incidents.

        Args:
            where: the filters (all must match).
            limit: page size (``None``: all).
            offset: matching incidents to skip.
            newest_first: order by wall-clock time descending (the console), else ascending.
        """
        check_page(limit, offset)
        page, page_args, count, count_args = SQLITE.page_sql(
            where, limit=limit, offset=offset, newest_first=newest_first
        )
        with self._lock:
            rows = self._conn.execute(page, page_args).fetchall()
            total = int(self._conn.execute(count, count_args).fetchone()[0])
        return [SQLITE.record(r) for r in rows], total

    def get_record(self, event_id: str) -> EventRecord | None:
        """One incident with its review state, or ``None``."""
        with self._lock:
            row = self._conn.execute(SQLITE.select_sql(), (event_id,)).fetchone()
        return None if row is None else SQLITE.record(row)

    def review(
        self,
        event_id: str,
        action: ReviewAction,
        *,
        user: str,
        note: str | None = None,
        outcome: str | None = None,
    ) -> EventRecord:
        """Acknowledge or resolve an incident, recording who, when and the note; committed when this returns.

        A non-empty ``note`` replaces the stored one; an empty or missing one keeps it. ``outcome``
        (resolve only): what was found (`OUTCOMES`), recorded with who and when.

        Raises:
            KeyError: no incident has this id.
            ReviewConflictError: the action does not apply to the current state (acknowledging an
                acknowledged or resolved incident, resolving a resolved one).
            InvalidInputError: an unknown action or outcome, or an outcome to acknowledge with.
        """
        check_review_action(action, outcome)
        args = SQLITE.review_args(action, event_id, user, note, datetime.now(UTC), outcome)
        with self._lock, write_transaction(self._conn) as conn:  # check and change in one transaction
            changed = conn.execute(SQLITE.review_sql(action, outcome=outcome is not None), args).rowcount
            current = conn.execute(SQLITE.state_sql(), (event_id,)).fetchone()
        return review_outcome(self, event_id, action, changed, None if current is None else current[0])
