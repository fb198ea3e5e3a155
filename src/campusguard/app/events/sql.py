"""What the SQL event stores share: the columns, the SQL of each operation, and the row mapping.

`SQLiteEventStore` and `PostgresEventStore` run the same statements with the same semantics;
only the parameter marker (``?`` / ``%s``), how a value is encoded and how the schema spells its
types differ (`campusguard.app.events.migrations`), and a `Dialect` holds those things. Every value is a bound parameter: no SQL is built from input.

Semantics (both stores):
    - ``record`` upserts on ``event_id``: the first write inserts, later ones replace the
      pipeline's columns (`COLUMNS` less ``event_id`` and ``recorded_at``), never the review
      columns; ``media_blur`` (the policy the media were made under) keeps its first known value; ``time_utc`` (the wall-clock sort time) only moves when the update carries a
      wall-clock start.
    - a review action changes the review columns only when the incident is in a state the
      action may start from (`REVIEW_FROM`), checked and changed in one statement.
    - filters are equalities, ``since <= time_utc < until``; pages are ordered by
      ``time_utc``, ``start_s``, ``event_id``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from campusguard.app.events.migrations import SQLITE_SCHEMA, SchemaSpelling
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction, ReviewState, utc_iso
from campusguard.app.events.types import Event

__all__ = [
    "COLUMNS",
    "REVIEW_COLUMNS",
    "RECORD_COLUMNS",
    "JSON_COLUMNS",
    "TIME_COLUMNS",
    "REVIEW_FROM",
    "REVIEW_TO",
    "Dialect",
    "SQLITE",
    "utc_iso",
]

COLUMNS: tuple[str, ...] = (
    "event_id",
    "camera_id",
    "rule_name",
    "rule_kind",
    "zone",
    "status",
    "phase",
    "start_s",
    "end_s",
    "onset_s",
    "start_frame",
    "end_frame",
    "tracker_ids",
    "class_ids",
    "class_names",
    "count",
    "direction",
    "started_at",
    "ended_at",
    "snapshot_path",
    "details",
    "time_utc",
    "recorded_at",
    "updated_at",
    "media_blur",
)
"""The pipeline's columns: one `Event` and the store's times; `record` writes these."""
REVIEW_COLUMNS: tuple[str, ...] = (
    "state",
    "acknowledged_by",
    "acknowledged_at",
    "resolved_by",
    "resolved_at",
    "note",
    "kept",
    "kept_by",
    "kept_at",
    "outcome",
    "outcome_by",
    "outcome_at",
)
"""The operators' columns: only `Dialect.review_sql` and `Dialect.keep_sql` write these."""
RECORD_COLUMNS: tuple[str, ...] = COLUMNS + REVIEW_COLUMNS
JSON_COLUMNS: frozenset[str] = frozenset({"tracker_ids", "class_ids", "class_names", "details"})
TIME_COLUMNS: frozenset[str] = frozenset(
    {
        "started_at",
        "ended_at",
        "time_utc",
        "recorded_at",
        "updated_at",
        "acknowledged_at",
        "resolved_at",
        "kept_at",
        "outcome_at",
    }
)
"""Wall-clock columns: ISO 8601 UTC text in SQLite, ``timestamptz`` in PostgreSQL."""

# which states each review action may start from, and the state it leaves
REVIEW_FROM: dict[str, tuple[str, ...]] = {"acknowledge": ("open",), "resolve": ("open", "acknowledged")}
REVIEW_TO: dict[str, str] = {"acknowledge": "acknowledged", "resolve": "resolved"}
_REVIEW_BY: dict[str, tuple[str, str]] = {
    "acknowledge": ("acknowledged_by", "acknowledged_at"),
    "resolve": ("resolved_by", "resolved_at"),
}


def _json_text(value: Any) -> str:
    return json.dumps(value, default=str)


def _json_value(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _time_text(value: Any) -> Any:
    return utc_iso(value) if isinstance(value, datetime) else value


@dataclass(frozen=True)
class Dialect:
    """How one database spells parameters and types, and stores JSON and wall-clock values.

    Attributes:
        param: the parameter marker (``"?"`` for sqlite3, ``"%s"`` for psycopg).
        encode_json: Python list/dict to the value bound for a JSON column.
        encode_time: aware datetime to the value bound for a wall-clock column.
        no_limit: the ``LIMIT`` value meaning "all rows".
        schema: how its migrations spell types (`campusguard.app.events.migrations.render`).
    """

    param: str = "?"
    encode_json: Callable[[Any], Any] = _json_text
    encode_time: Callable[[datetime], Any] = utc_iso
    no_limit: int | None = -1
    schema: SchemaSpelling = SQLITE_SCHEMA

    # writes ---------------------------------------------------------------------------------
    def event_row(self, event: Event, now: datetime) -> tuple[Any, ...]:
        """The values of `COLUMNS` for one lifecycle update recorded at ``now`` (aware)."""
        closed = event.phase == "end" or event.end_s is not None
        values: dict[str, Any] = {
            **{k: getattr(event, k) for k in COLUMNS if hasattr(event, k)},
            "status": "closed" if closed else "open",
            "tracker_ids": self.encode_json(list(event.tracker_ids)),
            "class_ids": self.encode_json(list(event.class_ids)),
            "class_names": self.encode_json(list(event.class_names)),
            "details": self.encode_json(event.details),
            "started_at": None if event.started_at is None else self.encode_time(event.started_at),
            "ended_at": None if event.ended_at is None else self.encode_time(event.ended_at),
            "time_utc": self.encode_time(now if event.started_at is None else event.started_at),
            "recorded_at": self.encode_time(now),
            "updated_at": self.encode_time(now),
        }
        return tuple(values[c] for c in COLUMNS)

    def upsert_sql(self) -> str:
        """Insert one `event_row`, or replace the pipeline's columns of the stored incident."""
        keep = {"event_id", "recorded_at", "time_utc", "media_blur"}
        sets = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in keep)
        return (
            f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join([self.param] * len(COLUMNS))}) "
            f"ON CONFLICT (event_id) DO UPDATE SET {sets}, "
            # the media policy is the one the incident's media were made under: its first write holds
            "media_blur = COALESCE(events.media_blur, excluded.media_blur), "
            # an update never moves the wall-clock sort time of an event recorded without one
            "time_utc = CASE WHEN excluded.started_at IS NULL THEN events.time_utc ELSE excluded.time_utc END"
        )

    def review_sql(self, action: ReviewAction, *, outcome: bool = False) -> str:
        """Move an incident to ``REVIEW_TO[action]`` if its state allows (and, ``outcome``, record the
        outcome, by whom and when); parameters from `review_args`."""
        return self._review_update(action, f"event_id = {self.param}", outcome)

    def review_args(
        self,
        action: ReviewAction,
        event_id: str,
        user: str,
        note: str | None,
        now: datetime,
        outcome: str | None = None,
    ) -> tuple[Any, ...]:
        """The parameters of `review_sql` (``outcome=True`` when ``outcome`` is given)."""
        return (*self._set_args(action, user, note, now, outcome), event_id, *REVIEW_FROM[action])

    def review_many_sql(self, action: ReviewAction, n: int, *, outcome: bool = False) -> str:
        """`review_sql` for ``n`` incidents at once, answering the ids it changed (``RETURNING``);
        parameters from `review_many_args`."""
        ids = ", ".join([self.param] * n)
        return self._review_update(action, f"event_id IN ({ids})", outcome) + " RETURNING event_id"

    def _review_update(self, action: ReviewAction, which: str, outcome: bool = False) -> str:
        """The review ``UPDATE`` of the events ``which`` selects, where their state allows ``action``."""
        by, at = _REVIEW_BY[action]
        p = self.param
        allowed = ", ".join([p] * len(REVIEW_FROM[action]))
        found = f", outcome = {p}, outcome_by = {p}, outcome_at = {p}" if outcome else ""
        return (
            f"UPDATE events SET state = {p}, {by} = {p}, {at} = {p}, "
            f"note = COALESCE(NULLIF(CAST({p} AS TEXT), ''), note){found} "
            f"WHERE {which} AND state IN ({allowed})"
        )

    def _set_args(
        self, action: ReviewAction, user: str, note: str | None, now: datetime, outcome: str | None
    ) -> tuple[Any, ...]:
        when = self.encode_time(now)
        found = () if outcome is None else (outcome, user, when)
        return (REVIEW_TO[action], user, when, note, *found)

    def review_many_args(
        self,
        action: ReviewAction,
        event_ids: list[str],
        user: str,
        note: str | None,
        now: datetime,
        outcome: str | None = None,
    ) -> tuple[Any, ...]:
        """The parameters of `review_many_sql` (``outcome=True`` when ``outcome`` is given)."""
        return (*self._set_args(action, user, note, now, outcome), *event_ids, *REVIEW_FROM[action])

    def keep_sql(self) -> str:
        """Mark an incident kept (never pruned) or not; parameters ``(kept, user, now, event_id)``."""
        p = self.param
        return f"UPDATE events SET kept = {p}, kept_by = {p}, kept_at = {p} WHERE event_id = {p}"

    # checklists (`campusguard.app.events.checklist`) -----------------------------------------
    def step_sql(self) -> str:
        """Tick or untick one step of an existing incident (table ``event_steps``, one row per
        incident and step text); parameters from `step_args`. Changes no row when there is no such incident."""
        p = self.param
        return (
            "INSERT INTO event_steps (event_id, step, checked, changed_by, changed_at) "
            f"SELECT {p}, {p}, {p}, {p}, {p} WHERE EXISTS (SELECT 1 FROM events WHERE event_id = {p}) "
            "ON CONFLICT (event_id, step) DO UPDATE SET checked = excluded.checked, "
            "changed_by = excluded.changed_by, changed_at = excluded.changed_at"
        )

    def step_args(self, event_id: str, step: str, checked: bool, user: str, now: datetime) -> tuple[Any, ...]:
        """The parameters of `step_sql`."""
        return (event_id, step, bool(checked), user, self.encode_time(now), event_id)

    def steps_sql(self, n: int) -> str:
        """The step rows of ``n`` incidents by id: ``event_id, step, checked, changed_by, changed_at``."""
        ids = ", ".join([self.param] * n)
        return (
            "SELECT event_id, step, checked, changed_by, changed_at FROM event_steps "
            f"WHERE event_id IN ({ids}) ORDER BY event_id, changed_at"
        )

    def orphan_steps_sql(self) -> str:
        """Delete the step rows of incidents that no longer exist (after retention deleted them)."""
        return "DELETE FROM event_steps WHERE event_id NOT IN (SELECT event_id FROM events)"

    # retention (`campusguard.app.retention`) ------------------------------------------------
    def expired_sql(self) -> str:
        """Ended, not kept incidents that ended before a time, oldest first: ``event_id, camera_id,
        snapshot_path, ended``; parameters ``(before, limit)``."""
        p = self.param
        return (
            "SELECT event_id, camera_id, snapshot_path, COALESCE(ended_at, time_utc) FROM events "
            f"WHERE status = 'closed' AND NOT kept AND COALESCE(ended_at, time_utc) < {p} "
            f"ORDER BY COALESCE(ended_at, time_utc) LIMIT {p}"
        )

    def delete_sql(self, n: int) -> str:
        """Delete ``n`` incidents by id unless kept: ``DELETE ... WHERE event_id IN (...)``."""
        return f"DELETE FROM events WHERE NOT kept AND event_id IN ({', '.join([self.param] * n)})"

    def clear_snapshot_sql(self, n: int) -> str:
        """Forget the snapshot of ``n`` incidents by id (their file is about to be deleted)."""
        return f"UPDATE events SET snapshot_path = NULL WHERE event_id IN ({', '.join([self.param] * n)})"

    def media_rows_sql(self) -> str:
        """Every incident naming a snapshot: ``event_id, camera_id, snapshot_path, status, kept, ended``."""
        return (
            "SELECT event_id, camera_id, snapshot_path, status, kept, COALESCE(ended_at, time_utc) "
            "FROM events WHERE snapshot_path IS NOT NULL"
        )

    def kept_ids_sql(self) -> str:
        """The ids of incidents that are kept or still open (their media are never deleted)."""
        return "SELECT event_id FROM events WHERE kept OR status = 'open'"

    def state_sql(self) -> str:
        """The review state of one incident by ``event_id`` (read after `review_sql`)."""
        return f"SELECT state FROM events WHERE event_id = {self.param}"

    # reads ----------------------------------------------------------------------------------
    def select_sql(self, columns: tuple[str, ...] = RECORD_COLUMNS) -> str:
        """One incident by ``event_id``."""
        return f"SELECT {', '.join(columns)} FROM events WHERE event_id = {self.param}"

    def select_many_sql(self, n: int) -> str:
        """``n`` incidents by ``event_id`` (`RECORD_COLUMNS`), in no particular order."""
        return f"SELECT {', '.join(RECORD_COLUMNS)} FROM events WHERE event_id IN ({', '.join([self.param] * n)})"

    def where(self, where: EventFilter) -> tuple[str, list[Any]]:
        """The WHERE clause of a filter (``""`` for none) and its parameters."""
        clauses: list[str] = []
        args: list[Any] = []
        for column, value in (
            ("camera_id", where.camera_id),
            ("rule_name", where.rule),
            ("rule_kind", where.kind),
            ("state", where.state),
        ):
            if value is not None:
                clauses.append(f"{column} = {self.param}")
                args.append(value)
        if where.status is not None:
            clauses.append(f"status = {self.param}")
            args.append(where.status)
        if where.outcome == "none":
            clauses.append("outcome IS NULL")
        elif where.outcome is not None:
            clauses.append(f"outcome = {self.param}")
            args.append(where.outcome)
        if where.since is not None:
            clauses.append(f"time_utc >= {self.param}")
            args.append(self.encode_time(where.since))
        if where.until is not None:
            clauses.append(f"time_utc < {self.param}")
            args.append(self.encode_time(where.until))
        return (" WHERE " + " AND ".join(clauses)) if clauses else "", args

    def count_by_camera_sql(self, where: EventFilter) -> tuple[str, list[Any]]:
        """``(SQL, parameters)``: ``camera_id, COUNT(*)`` of the incidents matching ``where``, per camera."""
        clause, args = self.where(where)
        return f"SELECT camera_id, COUNT(*) FROM events{clause} GROUP BY camera_id", args

    def page_sql(
        self, where: EventFilter, *, limit: int | None, offset: int, newest_first: bool
    ) -> tuple[str, list[Any], str, list[Any]]:
        """``(page SQL, its parameters, count SQL, its parameters)`` of `query_records`."""
        clause, args = self.where(where)
        order = "DESC" if newest_first else "ASC"
        page = (
            f"SELECT {', '.join(RECORD_COLUMNS)} FROM events{clause} "
            f"ORDER BY time_utc {order}, start_s {order}, event_id {order} LIMIT {self.param} OFFSET {self.param}"
        )
        page_args = [*args, self.no_limit if limit is None else int(limit), int(offset)]
        return page, page_args, f"SELECT COUNT(*) FROM events{clause}", args

    @staticmethod
    def event(row: tuple[Any, ...]) -> Event:
        """The `Event` of a row of `COLUMNS` (JSON as text or decoded, times as text or datetimes)."""
        data = dict(zip(COLUMNS, row, strict=True))
        for key in JSON_COLUMNS:
            data[key] = _json_value(data[key])
        for key in ("started_at", "ended_at"):
            if isinstance(data[key], datetime):
                data[key] = utc_iso(data[key])  # the same aware value SQLite's text gives
        return Event.from_dict(data)

    @classmethod
    def record(cls, row: tuple[Any, ...]) -> EventRecord:
        """The `EventRecord` of a row of `RECORD_COLUMNS`; wall-clock values become ISO 8601 UTC text."""
        n = len(COLUMNS)
        base = dict(zip(COLUMNS, row[:n], strict=True))
        review: dict[str, Any] = dict(zip(REVIEW_COLUMNS, row[n:], strict=True))
        for key in ("acknowledged_at", "resolved_at", "kept_at", "outcome_at"):
            review[key] = _time_text(review[key])
        review["kept"] = bool(review["kept"])
        state: ReviewState = review.pop("state")
        return EventRecord(
            event=cls.event(row[:n]),
            time_utc=_time_text(base["time_utc"]),
            recorded_at=_time_text(base["recorded_at"]),
            updated_at=_time_text(base["updated_at"]),
            state=state,
            **review,
        )


SQLITE = Dialect()
"""SQLite: ``?`` parameters, JSON and times as text."""
