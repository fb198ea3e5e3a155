"""The event store contract, run against every implementation on a real database.

Each test runs on SQLite (a temporary file) and PostgreSQL (a fresh schema on the test server,
see ``conftest.py``): lifecycle, upsert idempotence, the review state machine, queries and
filters, and schema migrations. What only one backend has (SQLite's WAL, PostgreSQL's lost
connections) is tested in its own file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import events_schema_v6
import pytest

from campusguard.app.events import Event, EventRecorder, EventStore, ReviewableEventStore, open_event_store
from campusguard.app.events.export import CSV_FIELDS, write_csv
from campusguard.app.events.migrations import SCHEMA_VERSION
from campusguard.app.events.records import EventFilter
from campusguard.app.events.review import ReviewConflictError
from campusguard.app.events.sql import COLUMNS, SQLITE, Dialect
from campusguard.app.events.store import UpsertingEventStore
from campusguard.errors import InvalidInputError

T0 = datetime(2026, 1, 10, 22, 0, tzinfo=UTC)


@dataclass
class Backend:
    """One store implementation under test: how to open it and how to reach under it."""

    name: str
    target: str  # SQLite path or PostgreSQL URL

    def open(self, *, read_only: bool = False) -> ReviewableEventStore:
        return open_event_store(self.target, read_only=read_only)

    def sql(self, statement: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on the database itself (``?`` parameters), committed; its rows."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.target)
            try:
                rows = conn.execute(statement, args).fetchall()
                conn.commit()
                return rows
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.target, autocommit=True) as pg:
            cur = pg.execute(statement.replace("?", "%s"), args)
            return cur.fetchall() if cur.description else []

    def set_version(self, version: int) -> None:
        """Mark the database as written by schema ``version``."""
        if self.name == "sqlite":
            self.sql(f"PRAGMA user_version={int(version)}")
        else:
            self.sql("INSERT INTO campusguard_schema (version) VALUES (?)", (version,))

    def version(self) -> int:
        if self.name == "sqlite":
            return int(self.sql("PRAGMA user_version")[0][0])
        return int(self.sql("SELECT MAX(version) FROM campusguard_schema")[0][0])

    def create_v1(self, event: Event, now: datetime) -> None:
        """A database as schema v1 wrote it (migration 1 only, no review columns, in the SQL of its day:
        `events_schema_v6`) holding ``event``."""
        if self.name == "sqlite":
            conn = sqlite3.connect(self.target)
            conn.executescript(events_schema_v6.SQLITE_V6[1])
            conn.execute(
                f"INSERT INTO events ({', '.join(V1_COLUMNS)}) VALUES ({', '.join('?' * len(V1_COLUMNS))})",
                _v1_row(SQLITE.event_row(event, now)),
            )
            conn.execute("PRAGMA user_version=1")
            conn.commit()
            conn.close()
            return
        import psycopg

        from campusguard.app.events import postgres

        dialect: Dialect = postgres._PG
        with psycopg.connect(self.target, autocommit=True) as pg, pg.transaction():
            pg.execute(
                "CREATE TABLE campusguard_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            for statement in events_schema_v6.POSTGRES_V6[1].split(";"):
                if statement.strip():
                    pg.execute(statement)
            pg.execute("INSERT INTO campusguard_schema (version) VALUES (1)")
            pg.execute(
                f"INSERT INTO events ({', '.join(V1_COLUMNS)}) VALUES ({', '.join(['%s'] * len(V1_COLUMNS))})",
                _v1_row(dialect.event_row(event, now)),
            )


V1_COLUMNS = tuple(c for c in COLUMNS if c != "media_blur")  # the pipeline's columns of schema v1


def _v1_row(row: tuple[Any, ...]) -> tuple[Any, ...]:
    values = dict(zip(COLUMNS, row, strict=True))
    return tuple(values[c] for c in V1_COLUMNS)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "events.db"))
    return Backend("postgresql", request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(backend: Backend) -> Iterator[ReviewableEventStore]:
    s = backend.open()
    try:
        yield s
    finally:
        s.close()


# lifecycle and upserts ---------------------------------------------------------------------------
def test_lifecycle_keeps_latest_state(
    backend: Backend, store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    assert isinstance(store, EventStore) and isinstance(store, ReviewableEventStore)
    store.record(make_event())
    assert store.get("e1").is_open  # type: ignore[union-attr]
    assert backend.sql("SELECT status FROM events") == [("open",)]
    store.record(make_event(phase="update", tracker_ids=(3, 7, 9), count=3))
    store.record(make_event(phase="end", tracker_ids=(3, 7, 9), count=3, end_s=20.0, end_frame=200))
    assert store.get("e1") == make_event(phase="end", tracker_ids=(3, 7, 9), count=3, end_s=20.0, end_frame=200)
    assert len(store.query()) == 1 and store.get("nope") is None
    assert backend.sql("SELECT status FROM events") == [("closed",)]
    with pytest.raises(InvalidInputError, match="end_s"):
        store.end(make_event(event_id="e2"))


def test_every_phase_is_the_one_upsert_record_runs(
    backend: Backend, store: ReviewableEventStore, make_event: Callable[..., Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``add``, ``update`` and ``end`` are ``record``: one statement, the store's upsert, each committed."""
    assert isinstance(store, EventRecorder) and isinstance(store, UpsertingEventStore)
    statements: list[str] = []
    execute = store._execute

    def counting(what: str, sql: str, args: tuple[Any, ...]) -> None:
        statements.append(sql)
        execute(what, sql, args)

    monkeypatch.setattr(store, "_execute", counting)
    store.add(make_event())
    store.update(make_event(phase="update", count=3))
    store.end(make_event(phase="end", count=3, end_s=20.0))
    store.record(make_event(event_id="e2"))
    assert len(statements) == 4 and set(statements) == {type(store)._upsert_sql}
    assert [e.event_id for e in store.query()] == ["e1", "e2"] and store.get("e1").end_s == 20.0  # type: ignore[union-attr]


def test_the_same_event_twice_is_one_row(
    backend: Backend, store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    """A retried write or a restarted worker writes an incident again: still one row, first recorded time kept."""
    started = make_event(started_at=T0, details={"dwell_s": 1.5})
    store.record(started)
    first = store.get_record("e1")
    store.record(started)
    store.add(started)
    ended = make_event(phase="end", started_at=T0, end_s=20.0, ended_at=T0 + timedelta(seconds=8))
    store.record(ended)
    store.end(ended)
    assert backend.sql("SELECT COUNT(*) FROM events") == [(1,)]
    again = store.get_record("e1")
    assert first is not None and again is not None
    assert again.event == ended and again.recorded_at == first.recorded_at and again.time_utc == first.time_utc
    assert again.updated_at >= first.updated_at


def test_an_update_without_wall_clock_keeps_the_sort_time(
    store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    store.record(make_event())  # no started_at: sorted by the time it was recorded
    first = store.get_record("e1")
    store.record(make_event(phase="update", count=5))
    again = store.get_record("e1")
    assert first is not None and again is not None and again.time_utc == first.time_utc
    store.record(make_event(phase="update", started_at=T0))
    moved = store.get_record("e1")
    assert moved is not None and moved.time_utc == "2026-01-10T22:00:00.000000+00:00"


def test_instant_event_is_closed(
    backend: Backend, store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    store.add(make_event(rule_kind="line_crossing", end_s=12.5, direction="in"))
    assert backend.sql("SELECT status, direction FROM events") == [("closed", "in")]


def test_store_is_shared_across_threads(store: ReviewableEventStore, make_event: Callable[..., Event]) -> None:
    threads = [
        threading.Thread(target=lambda k=k: [store.add(make_event(event_id=f"{k}-{i}")) for i in range(20)])
        for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.query()) == 80


def test_several_stores_on_one_database_see_each_others_commits(
    backend: Backend, make_event: Callable[..., Event]
) -> None:
    with backend.open() as a, backend.open() as b:  # type: ignore[attr-defined]
        a.record(make_event())
        assert b.get("e1") == make_event()
        b.record(make_event(phase="end", end_s=20.0))
        assert a.get("e1").end_s == 20.0  # type: ignore[union-attr]


# queries ----------------------------------------------------------------------------------------
def _four_events(store: EventStore, make_event: Callable[..., Event]) -> None:
    """a (cam0, no entry), b (crowd plaza), c (cam1), d (crowd plaza), 10 minutes apart from T0."""
    store.add(make_event(event_id="a", started_at=T0))
    store.add(
        make_event(event_id="b", rule_name="crowd plaza", rule_kind="crowd", started_at=T0 + timedelta(minutes=10))
    )
    store.add(make_event(event_id="c", camera_id="cam1", started_at=T0 + timedelta(minutes=20)))
    store.add(
        make_event(event_id="d", rule_name="crowd plaza", rule_kind="crowd", started_at=T0 + timedelta(minutes=30))
    )


@pytest.mark.parametrize(
    ("filters", "expected_ids"),
    [
        ({}, ["a", "b", "c", "d"]),
        ({"camera_id": "cam1"}, ["c"]),
        ({"rule": "crowd plaza"}, ["b", "d"]),
        ({"kind": "intrusion"}, ["a", "c"]),
        ({"since": T0 + timedelta(minutes=5)}, ["b", "c", "d"]),
        ({"since": T0 + timedelta(minutes=5), "camera_id": "cam0"}, ["b", "d"]),
        ({"since": datetime(2026, 1, 10, 23, 5, tzinfo=timezone(timedelta(hours=1)))}, ["b", "c", "d"]),
        ({"limit": 2}, ["a", "b"]),
    ],
)
def test_query_filters(
    store: ReviewableEventStore, make_event: Callable[..., Event], filters: dict[str, Any], expected_ids: list[str]
) -> None:
    _four_events(store, make_event)
    assert [e.event_id for e in store.query(**filters)] == expected_ids


@pytest.mark.parametrize(
    ("where", "page", "expected_ids", "expected_total"),
    [
        ({}, {}, ["d", "c", "b", "a"], 4),  # newest first
        ({}, {"limit": 2}, ["d", "c"], 4),
        ({}, {"limit": 2, "offset": 2}, ["b", "a"], 4),
        ({}, {"limit": 2, "offset": 10}, [], 4),
        ({"state": "acknowledged"}, {}, ["c"], 1),
        ({"state": "open"}, {}, ["d", "b", "a"], 3),
        ({"kind": "crowd"}, {"limit": 1}, ["d"], 2),
        ({"since": T0 + timedelta(minutes=10), "until": T0 + timedelta(minutes=30)}, {}, ["c", "b"], 2),
        ({"camera_id": "cam0", "rule": "no entry"}, {}, ["a"], 1),
        ({}, {"newest_first": False, "limit": None}, ["a", "b", "c", "d"], 4),
        # SQL metacharacters are values, never SQL
        ({"camera_id": "cam0' OR '1'='1"}, {}, [], 0),
        ({"rule": "x'; DROP TABLE events; --"}, {}, [], 0),
        ({"kind": '" OR 1=1 --'}, {}, [], 0),
    ],
)
def test_query_records_filters_and_pages(
    store: ReviewableEventStore,
    make_event: Callable[..., Event],
    where: dict[str, Any],
    page: dict[str, Any],
    expected_ids: list[str],
    expected_total: int,
) -> None:
    _four_events(store, make_event)
    store.review("c", "acknowledge", user="olga")
    records, total = store.query_records(EventFilter(**where), **page)
    assert [r.event.event_id for r in records] == expected_ids
    assert total == expected_total
    assert len(store.query()) == 4  # nothing was changed by any filter


def test_query_records_rejects_negative_paging(store: ReviewableEventStore) -> None:
    with pytest.raises(InvalidInputError, match="offset"):
        store.query_records(offset=-1)


# review state machine -----------------------------------------------------------------------------
def test_review_transitions_record_user_time_and_note(
    store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    store.add(make_event())
    acked = store.review("e1", "acknowledge", user="olga", note="guard sent")
    assert (acked.state, acked.acknowledged_by, acked.note) == ("acknowledged", "olga", "guard sent")
    assert acked.acknowledged_at is not None and datetime.fromisoformat(acked.acknowledged_at) <= datetime.now(UTC)
    with pytest.raises(ReviewConflictError, match="acknowledged"):
        store.review("e1", "acknowledge", user="olga")
    # the pipeline's later updates never reset the review
    store.record(make_event(phase="end", end_s=20.0))
    after_end = store.get_record("e1")
    assert after_end is not None and after_end.state == "acknowledged" and after_end.event.end_s == 20.0
    resolved = store.review("e1", "resolve", user="ivan", note="")  # empty note keeps the previous one
    assert (resolved.state, resolved.resolved_by, resolved.note, resolved.acknowledged_by) == (
        "resolved",
        "ivan",
        "guard sent",
        "olga",
    )
    with pytest.raises(ReviewConflictError, match="resolved"):
        store.review("e1", "resolve", user="ivan")
    with pytest.raises(KeyError):
        store.review("nope", "acknowledge", user="olga")
    with pytest.raises(InvalidInputError, match="review action"):
        store.review("e1", "delete", user="olga")  # type: ignore[arg-type]
    store.add(make_event(event_id="e2"))
    direct = store.review("e2", "resolve", user="ivan", note="false alarm")  # open -> resolved directly
    assert direct.state == "resolved" and direct.acknowledged_by is None


def test_resolving_records_the_outcome_by_whom_and_when_and_filters_on_it(
    store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    for eid in ("e1", "e2", "e3", "e4"):
        store.add(make_event(event_id=eid))
    fa = store.review("e1", "resolve", user="ivan", note="a shadow", outcome="false_alarm")
    assert (fa.outcome, fa.outcome_by, fa.note) == ("false_alarm", "ivan", "a shadow")
    assert fa.outcome_at is not None and datetime.fromisoformat(fa.outcome_at) <= datetime.now(UTC)
    assert store.review("e2", "resolve", user="olga").outcome is None  # resolving without one records none
    with pytest.raises(InvalidInputError, match="outcome must be one of"):
        store.review("e3", "resolve", user="olga", outcome="maybe")
    with pytest.raises(InvalidInputError, match="when resolving"):
        store.review("e3", "acknowledge", user="olga", outcome="confirmed")
    assert store.get_record("e3").state == "open"  # type: ignore[union-attr]  # nothing changed by a refused call
    if isinstance(store, UpsertingEventStore):
        bulk = store.review_many(["e3", "e4"], "resolve", user="olga", outcome="nuisance")
        assert [(r.event.event_id, r.outcome, r.outcome_by) for r in bulk.updated] == [
            ("e3", "nuisance", "olga"),
            ("e4", "nuisance", "olga"),
        ]
    store.record(make_event(event_id="e1", phase="end", end_s=30.0))  # the pipeline never touches it
    assert store.get_record("e1").outcome == "false_alarm"  # type: ignore[union-attr]
    ids = lambda outcome: {r.event.event_id for r in store.query_records(EventFilter(outcome=outcome))[0]}  # noqa: E731
    assert ids("false_alarm") == {"e1"} and ids("none") == {"e2"}
    assert ids(None) == {"e1", "e2", "e3", "e4"}


def test_concurrent_acknowledgements_of_one_incident_succeed_once(
    store: ReviewableEventStore, make_event: Callable[..., Event]
) -> None:
    store.add(make_event())
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def ack(i: int) -> None:
        barrier.wait()
        try:
            store.review("e1", "acknowledge", user=f"op{i}")
            outcomes.append("ok")
        except ReviewConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=ack, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict"] * 7 + ["ok"]
    assert store.get_record("e1").acknowledged_by.startswith("op")  # type: ignore[union-attr]


def test_record_json_and_csv_export(store: ReviewableEventStore, make_event: Callable[..., Event]) -> None:
    import csv
    import io
    import json

    store.add(make_event(started_at=T0, snapshot_path="/x/e1.jpg"))
    store.add(make_event(event_id="e2", rule_name="=HYPERLINK(1)", started_at=T0 + timedelta(minutes=1)))
    store.review("e1", "acknowledge", user="olga", note='said "hi", left')
    data = store.get_record("e1").to_dict()  # type: ignore[union-attr]
    assert data["id"] == "e1" and data["camera"] == "cam0" and data["kind"] == "intrusion"
    assert data["state"] == "acknowledged" and data["track_id"] == 3 and data["has_snapshot"] is True
    assert data["started_at"] == "2026-01-10T22:00:00.000000+00:00" and data["ended_at"] is None
    json.dumps(data)  # JSON-serialisable as is
    out = io.StringIO()
    records, _ = store.query_records(limit=None, newest_first=False)
    write_csv(records, out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))
    assert tuple(rows[0]) == CSV_FIELDS
    first = dict(zip(CSV_FIELDS, rows[1], strict=True))
    assert first["note"] == 'said "hi", left' and first["tracker_ids"] == "3 7" and first["acknowledged_by"] == "olga"
    assert dict(zip(CSV_FIELDS, rows[2], strict=True))["rule"] == "'=HYPERLINK(1)"  # no formula injection


# schema ---------------------------------------------------------------------------------------------
def test_an_empty_database_is_migrated_to_the_current_schema(
    backend: Backend, make_event: Callable[..., Event]
) -> None:
    if backend.name == "sqlite":
        with pytest.raises(InvalidInputError, match="does not exist"):
            backend.open(read_only=True)
    else:
        with pytest.raises(InvalidInputError, match="no CampusGuard event store"):
            backend.open(read_only=True)
    with backend.open() as store:  # type: ignore[attr-defined]
        store.record(make_event())
    assert backend.version() == SCHEMA_VERSION == 6
    with backend.open() as store, backend.open(read_only=True) as reader:  # type: ignore[attr-defined]
        assert store.get("e1") == reader.get("e1") == make_event()
    assert backend.version() == SCHEMA_VERSION  # opening again migrates nothing


def test_a_v1_database_is_migrated_and_keeps_its_events(backend: Backend, make_event: Callable[..., Event]) -> None:
    backend.create_v1(make_event(started_at=T0), T0)
    with pytest.raises(InvalidInputError, match="older than this CampusGuard"):
        backend.open(read_only=True)
    with backend.open() as store:  # type: ignore[attr-defined]
        record = store.get_record("e1")
        assert record is not None and record.state == "open" and record.event == make_event(started_at=T0)
        assert record.acknowledged_by is None and record.note is None
    assert backend.version() == SCHEMA_VERSION
    with pytest.raises(Exception, match="(?i)check"):  # the state column keeps its CHECK constraint
        backend.sql("UPDATE events SET state = 'bogus'")


def test_the_media_policy_of_an_incident_is_its_first_known_one(
    backend: Backend, make_event: Callable[..., Event]
) -> None:
    """``media_blur`` (schema v4) is the policy the incident's media were made under: a later update
    (another policy, or none known) never changes it; a row from before it holds None (unknown)."""
    with backend.open() as store:  # type: ignore[attr-defined]
        store.record(make_event(event_id="e1", media_blur="persons"))
        store.record(replace(make_event(event_id="e1", media_blur="none"), phase="update", sequence=1))
        store.record(replace(make_event(event_id="e1"), phase="end", end_s=9.0, sequence=2))
        store.record(make_event(event_id="e2"))
        assert store.get("e1").media_blur == "persons"  # type: ignore[union-attr]
        assert store.get_record("e1").to_dict()["media_blur"] == "persons"  # type: ignore[union-attr]
        assert store.get("e2").media_blur is None  # type: ignore[union-attr]
        store.record(replace(make_event(event_id="e2", media_blur="faces"), phase="update", sequence=1))
        assert store.get("e2").media_blur == "faces"  # type: ignore[union-attr]


def test_a_newer_schema_is_refused_in_one_line(backend: Backend) -> None:
    backend.open().close()
    backend.set_version(SCHEMA_VERSION + 1)
    for read_only in (False, True):
        with pytest.raises(InvalidInputError, match="newer than this CampusGuard") as info:
            backend.open(read_only=read_only)
        assert "\n" not in str(info.value)


def test_concurrent_openers_of_an_empty_database_migrate_it_once(
    backend: Backend, make_event: Callable[..., Event]
) -> None:
    """Several workers starting at once: every opener succeeds and the schema is applied once."""
    errors: list[BaseException] = []
    stores: list[ReviewableEventStore] = []
    barrier = threading.Barrier(6)

    def open_one() -> None:
        barrier.wait()
        try:
            stores.append(backend.open())
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert errors == [] and len(stores) == 6
        stores[0].record(make_event())
        assert all(s.get("e1") == make_event() for s in stores)
    finally:
        for s in stores:
            s.close()
    assert backend.version() == SCHEMA_VERSION
    if backend.name == "postgresql":
        assert backend.sql("SELECT version FROM campusguard_schema ORDER BY version") == [(v,) for v in range(1, 7)]
