"""`UpsertingEventStore`: the event store both databases share, on top of one committed statement.

`SQLiteEventStore` (`campusguard.app.events.sqlite`) and `PostgresEventStore`
(`campusguard.app.events.postgres`) subclass it: each names its `Dialect` and runs a statement
durably, and everything else is here, written once with the SQL of `campusguard.app.events.sql`.

Lifecycle: every phase is one upsert on the deterministic ``event_id`` (`UpsertingEventStore.record`;
``add``, ``update`` and ``end`` are it), so a retried write stores the incident once.

Review (schema v2): an operator acknowledges and resolves incidents with a note (each store's
``review``, `UpsertingEventStore.review_many`; the rules are `campusguard.app.events.review`). The
review columns (``state``, ``acknowledged_by`` ...) are separate from the pipeline's lifecycle
columns: `record` never touches them, and a review never touches the pipeline's. `EventRecord` is one
incident with its review state; its ``to_dict()`` is the event JSON of the console API. Queries
(``query_records``) take every filter as a bound parameter; no SQL is built from input.

Keep (schema v3): an operator marks an incident kept (`UpsertingEventStore.keep`, columns ``kept``,
``kept_by``, ``kept_at``); retention (`campusguard.app.retention`) never deletes a kept incident
nor its media. The retention reads and deletes (``expired``, ``delete_events``, ``clear_snapshots``,
``media_rows``, ``protected_ids``, ``reclaim_space``) are here; deletes go in batches of ids.

Media policy (schema v4): ``media_blur``, the camera's ``privacy.blur`` when the incident's
snapshot and clip were made (`Event.media_blur`); rows from before it hold NULL, which the console
takes as the strictest policy (`campusguard.app.media.policy`).

Checklists (schema v5): table ``event_steps``, one row per incident and step text of its rule's
``sop`` (ticked or not, by whom, when): `UpsertingEventStore.set_step` and ``checklists``; retention
deletes the rows of the incidents it deletes.

Outcomes (schema v6): resolving an incident may record what the operator found (``outcome``:
``confirmed``, ``false_alarm`` or ``nuisance``, with ``outcome_by`` and ``outcome_at``): ``review``
and ``review_many`` take it beside the note; queries filter on it (``none``: no outcome). Replay
(`campusguard.app.tracks.replay`) counts the incidents a changed rule keeps or drops by outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from campusguard.app.events.checklist import StepMark
from campusguard.app.events.protocols import RecordQuery
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction, utc_iso
from campusguard.app.events.review import MAX_BULK_REVIEW, BulkReview, check_review_action
from campusguard.app.events.sql import Dialect
from campusguard.app.events.types import Event
from campusguard.errors import InvalidInputError

__all__ = ["UpsertingEventStore", "check_can_end", "check_page", "query_events"]


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


def check_can_end(event: Event) -> None:
    """`EventStore.end` needs the end time."""
    if event.end_s is None:
        raise InvalidInputError(f"event {event.event_id} cannot end without end_s")


def check_page(limit: int | None, offset: int) -> None:
    """`ReviewableEventStore.query_records` takes no negative paging."""
    if (limit is not None and limit < 0) or offset < 0:
        raise InvalidInputError(f"limit and offset must be >= 0, got limit={limit}, offset={offset}")


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
