"""Durable event storage: the `EventStore` protocol and its SQLite implementation.

Durability: ``SQLiteEventStore`` runs SQLite in WAL mode with ``synchronous=FULL``. In WAL
mode ``NORMAL`` already survives a killed process (a commit is in the WAL file, in the OS
page cache, before ``commit()`` returns) but may lose the last commits on power loss or an
OS crash; ``FULL`` fsyncs the WAL on every commit, so a committed event survives both.
Events are rare (a few per minute per camera), so one fsync per event costs nothing that
matters: measured on the development VM, ``record`` takes 4.0 ms median (12 ms p95) with
``FULL`` against 0.04 ms with ``NORMAL``, and the pipeline calls it from its event thread, not
the detection loop. Every write commits before returning: callers report an event as raised (alerts,
stdout) only after `EventStore.record` returns.

Schema: table ``events``, one row per incident holding its latest state; ``PRAGMA
user_version`` holds the schema version (`SCHEMA_VERSION`). Changes are numbered migrations
(`campusguard.app.events.migrations`), applied in order in one transaction when a read-write store opens an older
file; opening a file written by a newer schema is refused. `PostgresEventStore`
(`campusguard.app.events.postgres`) implements the same protocols with the same SQL
(`campusguard.app.events.sql`); `open_event_store` picks one from the storage config.

Keep (schema v3): an operator marks an incident kept (`UpsertingEventStore.keep`, columns ``kept``,
``kept_by``, ``kept_at``); retention (`campusguard.app.retention`) never deletes a kept incident
nor its media. The retention reads and deletes (``expired``, ``delete_events``, ``clear_snapshots``,
``media_rows``, ``protected_ids``, ``reclaim_space``) are on `UpsertingEventStore`, shared by both
stores; deletes go in batches of ids.

Media policy (schema v4): ``media_blur``, the camera's ``privacy.blur`` when the incident's
snapshot and clip were made (`Event.media_blur`); rows from before it hold NULL, which the console
takes as the strictest policy (`campusguard.app.media.policy`).

Outcomes (schema v6): resolving an incident may record what the operator found (``outcome``:
``confirmed``, ``false_alarm`` or ``nuisance``, with ``outcome_by`` and ``outcome_at``): `review`
and `review_many` take it beside the note; queries filter on it (``none``: no outcome). Replay
(`campusguard.app.tracks.replay`) counts the incidents a changed rule keeps or drops by outcome.

Checklists (schema v5): table ``event_steps``, one row per incident and step text of its rule's
``sop`` (ticked or not, by whom, when): `UpsertingEventStore.set_step` and ``checklists``; retention
deletes the rows of the incidents it deletes.

Review (schema v2): an operator acknowledges and resolves incidents with a note
(`SQLiteEventStore.review`). The review columns (``state``, ``acknowledged_by`` ...) are
separate from the pipeline's lifecycle columns: `record` never touches them, and `review` never
touches the pipeline's. `EventRecord` is one incident with its review state; its ``to_dict()`` is
the event JSON of the console API. Queries (`SQLiteEventStore.query_records`) take every filter
as a bound parameter; no SQL is built from input.
"""

from __future__ import annotations

import csv
import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol, TextIO, runtime_checkable

from campusguard.app.events.checklist import StepMark
from campusguard.app.events.migrations import SCHEMA_VERSION, TABLES, render
from campusguard.app.events.recorder import EventRecorder
from campusguard.app.events.records import (
    OUTCOMES,
    REVIEW_STATES,
    EventFilter,
    EventRecord,
    ReviewAction,
    ReviewState,
    check_outcome,
    utc_iso,
)
from campusguard.app.events.sql import REVIEW_FROM, REVIEW_TO, SQLITE, Dialect
from campusguard.app.events.types import Event
from campusguard.app.infra.diskspace import disk_health, is_disk_full
from campusguard.app.infra.sqlitedb import (
    SQLiteFile,
    apply_migrations,
    check_sqlite_file,
    connect_durable,
    schema_version,
    write_transaction,
)
from campusguard.errors import CampusGuardError, InvalidInputError

__all__ = [
    "EventStore",
    "InterruptibleStore",
    "RecordQuery",
    "ReviewableEventStore",
    "PrunableStore",
    "EventDatabase",
    "SQLiteEventStore",
    "UpsertingEventStore",
    "EventRecord",
    "EventFilter",
    "ReviewAction",
    "ReviewConflictError",
    "BulkReview",
    "MAX_BULK_REVIEW",
    "StoreUnavailableError",
    "check_can_end",
    "check_page",
    "check_review_action",
    "query_events",
    "review_outcome",
    "ReviewState",
    "REVIEW_STATES",
    "OUTCOMES",
    "CSV_FIELDS",
    "write_csv",
    "csv_lines",
    "read_events",
    "SCHEMA_VERSION",
    "is_sqlite_file",
]


@runtime_checkable
class EventStore(EventRecorder, Protocol):
    """Where events are kept: `EventRecorder` (``record``, ``close``) and reads. Every write is
    durable when it returns."""

    def add(self, event: Event) -> None:
        """Store a new incident (its ``start``)."""
        ...

    def update(self, event: Event) -> None:
        """Replace the stored state of an incident with this update."""
        ...

    def end(self, event: Event) -> None:
        """Mark an incident ended with this final state."""
        ...

    def get(self, event_id: str) -> Event | None:
        """The latest state of one incident, or ``None``."""
        ...

    def query(
        self,
        *,
        camera_id: str | None = None,
        since: datetime | None = None,
        rule: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Incidents matching every given filter, oldest first.

        ``since`` compares with the wall-clock start (``started_at``) or, when the event has
        none, the time it was recorded. ``rule`` matches the rule name.
        """
        ...


@runtime_checkable
class InterruptibleStore(Protocol):
    """A store whose calls retry a lost connection (`PostgresEventStore`), and can be told to stop."""

    def stop_retrying(self) -> None:
        """A call retrying now gives up (`StoreUnavailableError`) and later ones try once; safe from any thread."""
        ...


class StoreUnavailableError(CampusGuardError):
    """The event store's server could not be reached, or a write or read could not be completed
    within the store's retry budget; nothing was committed by the failed call (retry it)."""


class ReviewConflictError(InvalidInputError):
    """A review action does not apply to the incident's current state (e.g. acknowledging a resolved one)."""


MAX_BULK_REVIEW = 500
"""The most incidents one `UpsertingEventStore.review_many` call reviews (one transaction)."""


@dataclass(frozen=True)
class BulkReview:
    """What `UpsertingEventStore.review_many` did, per incident.

    Attributes:
        updated: the incidents the action changed, as they are now (in the order asked).
        missing: ids of no incident.
        conflicts: id -> current state, for incidents the action does not apply to (already resolved...).
    """

    updated: list[EventRecord] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)


class RecordQuery(Protocol):
    """What `query_events` reads through: one page of matching incidents and their number."""

    def query_records(
        self, where: EventFilter = ..., *, limit: int | None = 50, offset: int = 0, newest_first: bool = True
    ) -> tuple[list[EventRecord], int]: ...


@runtime_checkable
class ReviewableEventStore(EventStore, Protocol):
    """An `EventStore` that also keeps the operators' review of each incident (the console's store)."""

    def get_record(self, event_id: str) -> EventRecord | None:
        """One incident with its review state, or ``None``."""
        ...

    def query_records(
        self, where: EventFilter = ..., *, limit: int | None = 50, offset: int = 0, newest_first: bool = True
    ) -> tuple[list[EventRecord], int]:
        """One page of matching incidents and the number of all matching incidents."""
        ...

    def review(
        self,
        event_id: str,
        action: ReviewAction,
        *,
        user: str,
        note: str | None = None,
        outcome: str | None = None,
    ) -> EventRecord:
        """Acknowledge or resolve an incident (resolving may record its ``outcome``); committed when this returns."""
        ...


@runtime_checkable
class PrunableStore(Protocol):
    """What retention (`campusguard.app.retention.Pruner`) needs of an event store."""

    def expired(self, before: datetime, *, limit: int = ...) -> list[tuple[str, str, str | None, str]]: ...

    def delete_events(self, event_ids: Iterable[str], *, batch: int = ...) -> int: ...

    def clear_snapshots(self, event_ids: Iterable[str], *, batch: int = ...) -> int: ...

    def media_rows(self) -> list[tuple[str, str, str, bool, bool, str]]: ...

    def protected_ids(self) -> set[str]: ...

    def reclaim_space(self, *, force: bool = ...) -> int: ...


@runtime_checkable
class EventDatabase(ReviewableEventStore, PrunableStore, Protocol):
    """The event store as `open_event_store` opens it (`SQLiteEventStore`, `PostgresEventStore`):
    lifecycle writes, reads and review (`ReviewableEventStore`) and retention (`PrunableStore`).

    One process shares one: ``serve`` hands the console's store to its `WatchService`
    (``shared_store``), typed by this protocol, so a wrapper that drops a capability (retention's,
    say) fails the type check instead of running retention without a store.
    """


class UpsertingEventStore:
    """What every SQL store derives from one committed statement (`_execute`), ``get_record`` and
    ``query_records``: the lifecycle writes and the plain reads.

    Every phase is one upsert on ``event_id`` (`record`; ``add``, ``update`` and ``end`` are
    it), so a retried write stores the incident once. A subclass names its `Dialect` and runs one
    statement durably; `SQLiteEventStore` and `PostgresEventStore` subclass it.
    """

    dialect: ClassVar[Dialect]
    _upsert_sql: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "dialect" in cls.__dict__:
            cls._upsert_sql = cls._record_statement(cls.dialect.upsert_sql())

    @classmethod
    def _record_statement(cls, upsert: str) -> str:
        """The one statement `record` runs, from the dialect's ``upsert`` (PostgreSQL adds its alert relay row)."""
        return upsert

    def _execute(self, what: str, sql: str, args: tuple[Any, ...]) -> None:
        """Run one write statement; committed (durable) when this returns. ``what`` names it in errors."""
        raise NotImplementedError

    def _execute_count(self, what: str, sql: str, args: tuple[Any, ...]) -> int:
        """Run one write statement, committed when this returns; the number of rows it changed."""
        raise NotImplementedError

    def _fetch(self, what: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Run one read statement; its rows."""
        raise NotImplementedError

    def _review_batch(
        self, what: str, update: tuple[str, tuple[Any, ...]], select: tuple[str, tuple[Any, ...]]
    ) -> tuple[set[str], list[tuple[Any, ...]]]:
        """In one transaction: run ``update`` (`Dialect.review_many_sql`, returning the ids it changed)
        then ``select`` (`Dialect.select_many_sql`); ``(ids changed, rows selected)``."""
        raise NotImplementedError

    # review of many incidents -------------------------------------------------------------------
    def review_many(
        self,
        event_ids: Sequence[str],
        action: ReviewAction,
        *,
        user: str,
        note: str | None = None,
        outcome: str | None = None,
    ) -> BulkReview:
        """Acknowledge or resolve several incidents with one note, in one transaction (committed
        when this returns). Each incident moves only if its state allows (as `review` does); the
        others are reported, never raised: unknown ids in ``missing``, wrong states in ``conflicts``.
        A repeated id counts once.

        ``outcome`` (resolve only): what was found (`OUTCOMES`), recorded on each incident resolved.

        Raises:
            InvalidInputError: an unknown action or outcome, an outcome to acknowledge with, or more
                than `MAX_BULK_REVIEW` ids.
        """
        check_review_action(action, outcome)
        ids = list(dict.fromkeys(event_ids))
        if len(ids) > MAX_BULK_REVIEW:
            raise InvalidInputError(f"at most {MAX_BULK_REVIEW} incidents per bulk review, got {len(ids)}")
        if not ids:
            return BulkReview()
        d = self.dialect
        update = (
            d.review_many_sql(action, len(ids), outcome=outcome is not None),
            d.review_many_args(action, ids, user, note, datetime.now(UTC), outcome),
        )
        changed, rows = self._review_batch(
            f"reviewing {len(ids)} events", update, (d.select_many_sql(len(ids)), tuple(ids))
        )
        records = {r.event.event_id: r for r in map(d.record, rows)}
        result = BulkReview()
        for eid in ids:
            record = records.get(eid)
            if record is None:
                result.missing.append(eid)
            elif eid in changed:
                result.updated.append(record)
            else:
                result.conflicts[eid] = record.state
        return result

    def count_by_camera(self, where: EventFilter = EventFilter()) -> dict[str, int]:  # noqa: B008 - frozen
        """The number of incidents matching ``where`` per camera (cameras with none are absent)."""
        sql, args = self.dialect.count_by_camera_sql(where)
        return {str(r[0]): int(r[1]) for r in self._fetch("counting events by camera", sql, tuple(args))}

    # keep and retention -----------------------------------------------------------------------
    def keep(self, event_id: str, kept: bool, *, user: str) -> EventRecord:
        """Mark an incident kept (retention never deletes it nor its media) or not; committed when this returns.

        Raises:
            KeyError: no incident has this id.
        """
        now = self.dialect.encode_time(datetime.now(UTC))
        args = (bool(kept), user if kept else None, now if kept else None, event_id)
        if not self._execute_count(f"keeping event {event_id}", self.dialect.keep_sql(), args):
            raise KeyError(event_id)
        record = self.get_record(event_id)
        if record is None:
            raise KeyError(event_id)
        return record

    def expired(self, before: datetime, *, limit: int = 100_000) -> list[tuple[str, str, str | None, str]]:
        """``(event_id, camera_id, snapshot_path, ended_utc)`` of ended, not kept incidents that ended
        before ``before``, oldest first (``ended_utc``: ISO 8601 UTC text)."""
        rows = self._fetch(
            "listing expired events", self.dialect.expired_sql(), (self.dialect.encode_time(before), limit)
        )
        return [
            (
                str(r[0]),
                str(r[1]),
                None if r[2] is None else str(r[2]),
                r[3] if isinstance(r[3], str) else utc_iso(r[3]),
            )
            for r in rows
        ]

    def delete_events(self, event_ids: Iterable[str], *, batch: int = 500) -> int:
        """Delete incidents by id (kept ones are skipped), ``batch`` per statement, and their checklist
        rows; the number deleted."""
        deleted = self._by_id_batches("deleting events", self.dialect.delete_sql, event_ids, batch)
        if deleted:
            self._execute_count("deleting checklists", self.dialect.orphan_steps_sql(), ())
        return deleted

    # checklists ---------------------------------------------------------------------------------
    def set_step(self, event_id: str, step: str, checked: bool, *, user: str) -> StepMark:
        """Tick (or untick) one checklist step of an incident, recording who and when; committed when
        this returns.

        Raises:
            KeyError: no incident has this id.
        """
        now = datetime.now(UTC)
        d = self.dialect
        args = d.step_args(event_id, step, checked, user, now)
        if not self._execute_count(f"checking a step of event {event_id}", d.step_sql(), args):
            raise KeyError(event_id)
        return StepMark(step=step, checked=bool(checked), by=user, at=utc_iso(now))

    def checklists(self, event_ids: Sequence[str], *, batch: int = 500) -> dict[str, dict[str, StepMark]]:
        """The stored step marks of incidents: ``{event_id: {step: StepMark}}`` (incidents without any are absent)."""
        ids = list(dict.fromkeys(event_ids))
        out: dict[str, dict[str, StepMark]] = {}
        for i in range(0, len(ids), batch):
            chunk = tuple(ids[i : i + batch])
            rows = self._fetch("reading checklists", self.dialect.steps_sql(len(chunk)), chunk)
            for eid, step, checked, by, at in rows:
                at_text = at if isinstance(at, str) else utc_iso(at)
                out.setdefault(str(eid), {})[str(step)] = StepMark(str(step), bool(checked), str(by), at_text)
        return out

    def clear_snapshots(self, event_ids: Iterable[str], *, batch: int = 500) -> int:
        """Forget the snapshot path of incidents by id (before their files are deleted); the number changed."""
        return self._by_id_batches("clearing snapshots", self.dialect.clear_snapshot_sql, event_ids, batch)

    def _by_id_batches(self, what: str, sql_for: Callable[[int], str], event_ids: Iterable[str], batch: int) -> int:
        """Run ``sql_for(n)`` on the ids, ``batch`` at a time; the rows it touched in all."""
        ids = list(event_ids)
        touched = 0
        for i in range(0, len(ids), batch):
            chunk = tuple(ids[i : i + batch])
            touched += self._execute_count(what, sql_for(len(chunk)), chunk)
        return touched

    def media_rows(self) -> list[tuple[str, str, str, bool, bool, str]]:
        """Every incident naming a snapshot: ``(event_id, camera_id, snapshot_path, open, kept, ended_utc)``."""
        rows = self._fetch("listing event media", self.dialect.media_rows_sql(), ())
        return [
            (
                str(r[0]),
                str(r[1]),
                str(r[2]),
                r[3] == "open",
                bool(r[4]),
                r[5] if isinstance(r[5], str) else utc_iso(r[5]),
            )
            for r in rows
        ]

    def protected_ids(self) -> set[str]:
        """Ids of incidents whose media retention must leave alone: kept, or still open."""
        return {str(r[0]) for r in self._fetch("listing kept events", self.dialect.kept_ids_sql(), ())}

    def reclaim_space(self, *, force: bool = False) -> int:
        """Give the space of deleted rows back to the file system where the database needs it; bytes given back."""
        return 0

    def get_record(self, event_id: str) -> EventRecord | None:
        raise NotImplementedError

    def query_records(
        self,
        where: EventFilter = EventFilter(),  # noqa: B008 - frozen, so a shared default is safe
        *,
        limit: int | None = 50,
        offset: int = 0,
        newest_first: bool = True,
    ) -> tuple[list[EventRecord], int]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def record(self, event: Event) -> None:
        """Store one lifecycle update, the one write of every phase: insert the incident, or replace
        its pipeline columns (never the review columns); committed when this returns."""
        row = self.dialect.event_row(event, datetime.now(UTC))
        self._execute(f"storing event {event.event_id}", self._upsert_sql, row)

    def add(self, event: Event) -> None:
        """Store a new incident (`record`)."""
        self.record(event)

    def update(self, event: Event) -> None:
        """Replace the state of an incident, inserted if unknown (`record`)."""
        self.record(event)

    def end(self, event: Event) -> None:
        """Mark an incident ended (`record` of an update with its ``end_s``)."""
        check_can_end(event)
        self.record(event)

    def get(self, event_id: str) -> Event | None:
        """The latest state of one incident, or ``None``."""
        record = self.get_record(event_id)
        return None if record is None else record.event

    def query(
        self,
        *,
        camera_id: str | None = None,
        since: datetime | None = None,
        rule: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Incidents matching every given filter, oldest first (by wall-clock time, then stream time)."""
        return query_events(self, camera_id=camera_id, since=since, rule=rule, kind=kind, limit=limit)


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


def check_can_end(event: Event) -> None:
    """`EventStore.end` needs the end time."""
    if event.end_s is None:
        raise InvalidInputError(f"event {event.event_id} cannot end without end_s")


def check_page(limit: int | None, offset: int) -> None:
    """`ReviewableEventStore.query_records` takes no negative paging."""
    if (limit is not None and limit < 0) or offset < 0:
        raise InvalidInputError(f"limit and offset must be >= 0, got limit={limit}, offset={offset}")


def check_review_action(action: str, outcome: str | None = None) -> None:
    """A review action is one of `REVIEW_FROM`'s; an outcome is one of `OUTCOMES` and goes with ``resolve``."""
    if action not in REVIEW_FROM:
        raise InvalidInputError(f"review action must be one of {sorted(REVIEW_FROM)}, got {action!r}")
    check_outcome(outcome)
    if outcome is not None and action != "resolve":
        raise InvalidInputError(f"an outcome is recorded when resolving, not with {action!r}")


def query_events(
    store: RecordQuery,
    *,
    camera_id: str | None,
    since: datetime | None,
    rule: str | None,
    kind: str | None,
    limit: int | None,
) -> list[Event]:
    """`EventStore.query` on a store's `query_records`: oldest first, by wall-clock time then stream time."""
    records, _ = store.query_records(
        EventFilter(camera_id=camera_id, rule=rule, kind=kind, since=since), limit=limit, newest_first=False
    )
    return [r.event for r in records]


def review_outcome(
    store: ReviewableEventStore, event_id: str, action: ReviewAction, changed: int, current: str | None
) -> EventRecord:
    """What `ReviewableEventStore.review` returns or raises once its update ran (``changed`` rows;
    ``current``: the state after it, ``None`` when there is no such incident)."""
    if current is None:
        raise KeyError(event_id)
    if not changed:
        raise ReviewConflictError(f"event {event_id} is {current}; it cannot be {REVIEW_TO[action]} now")
    record = store.get_record(event_id)
    if record is None:  # deleted by retention between the review and this read
        raise KeyError(event_id)
    return record


CSV_FIELDS: tuple[str, ...] = (
    "id",
    "camera",
    "rule",
    "kind",
    "zone",
    "state",
    "started_at",
    "ended_at",
    "start_s",
    "end_s",
    "tracker_ids",
    "class_names",
    "count",
    "direction",
    "acknowledged_by",
    "acknowledged_at",
    "resolved_by",
    "resolved_at",
    "note",
    "outcome",
)
_SPREADSHEET_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(value: Any) -> str:
    """One CSV cell; text a spreadsheet would run as a formula is prefixed with a quote."""
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        value = " ".join(map(str, value))
    text = str(value)
    if isinstance(value, str) and text.startswith(_SPREADSHEET_FORMULA):
        return "'" + text
    return text


def csv_lines(records: Iterable[EventRecord]) -> Iterator[str]:
    """The CSV export of incidents, one line at a time (header first; `CSV_FIELDS` columns)."""

    class _Line:
        value = ""

        def write(self, text: str) -> None:
            self.value = text

    line = _Line()
    writer = csv.writer(line)
    writer.writerow(CSV_FIELDS)
    yield line.value
    for record in records:
        data = record.to_dict()
        writer.writerow([_csv_cell(data[k]) for k in CSV_FIELDS])
        yield line.value


def write_csv(records: Iterable[EventRecord], fh: TextIO) -> None:
    """Write the CSV export of incidents to an open text file."""
    for line in csv_lines(records):
        fh.write(line)


def is_sqlite_file(path: str | Path) -> bool:
    """True if ``path`` starts with the SQLite 3 file header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _collapse(events: Iterable[Event]) -> list[Event]:
    """Latest state per ``event_id`` from a sequence of lifecycle updates, in first-seen order."""
    latest: dict[str, Event] = {}
    for ev in events:
        latest[ev.event_id] = ev
    return list(latest.values())


def read_events(path: str | Path) -> list[Event]:
    """Latest state of every incident in a SQLite event store or a JSON-lines file of events.

    Args:
        path: an `SQLiteEventStore` file, or a JSONL file with one `Event.to_dict` per line
            (as `campusguard.app.alerts.JsonlSink` writes; lines may be wrapped as
            ``{"event": {...}}``).

    Raises:
        InvalidInputError: the file is missing or a line is not an event.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"events file {path} does not exist")
    if is_sqlite_file(path):
        store = SQLiteEventStore(path, read_only=True)
        try:
            return store.query()
        finally:
            store.close()
    events: list[Event] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if "event" in data and isinstance(data["event"], dict):
                    data = data["event"]
                events.append(Event.from_dict(data))
            except (ValueError, TypeError) as exc:
                raise InvalidInputError(f"{path}:{lineno}: not an event ({exc})") from exc
    return _collapse(events)
