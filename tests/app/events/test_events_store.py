"""SQLiteEventStore: lifecycle, queries, schema version, WAL/durability settings, JSONL reading."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest

from campusguard.app.events import Event, EventStore, SQLiteEventStore, read_events
from campusguard.app.events.store import SCHEMA_VERSION
from campusguard.errors import InvalidInputError

T0 = datetime(2026, 1, 10, 22, 0, tzinfo=UTC)


def test_event_dict_round_trip(make_event):
    ev = make_event(started_at=T0, details={"dwell_s": 3.5}, direction="in")
    data = json.loads(json.dumps(ev.to_dict()))
    assert Event.from_dict(data) == ev
    assert ev.with_snapshot("/tmp/a.jpg").snapshot_path == "/tmp/a.jpg" and ev.snapshot_path is None


def test_lifecycle_keeps_latest_state(tmp_path, make_event):
    with SQLiteEventStore(tmp_path / "ev.db") as store:
        assert isinstance(store, EventStore)
        store.record(make_event())
        assert store.get("e1").is_open
        store.record(make_event(phase="update", tracker_ids=(3, 7, 9), count=3))
        store.record(make_event(phase="end", tracker_ids=(3, 7, 9), count=3, end_s=20.0, end_frame=200))
        got = store.get("e1")
        assert got == make_event(phase="end", tracker_ids=(3, 7, 9), count=3, end_s=20.0, end_frame=200)
        assert len(store.query()) == 1
        with pytest.raises(InvalidInputError, match="end_s"):
            store.end(make_event(event_id="e2"))
    conn = sqlite3.connect(tmp_path / "ev.db")
    assert conn.execute("SELECT status FROM events").fetchone()[0] == "closed"


def test_instant_event_is_closed(tmp_path, make_event):
    with SQLiteEventStore(tmp_path / "ev.db") as store:
        store.add(make_event(rule_kind="line_crossing", end_s=12.5, direction="in"))
    conn = sqlite3.connect(tmp_path / "ev.db")
    assert conn.execute("SELECT status, direction FROM events").fetchone() == ("closed", "in")


def _four_events(store, make_event):
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
def test_query_filters(tmp_path, make_event, filters, expected_ids):
    with SQLiteEventStore(tmp_path / "ev.db") as store:
        _four_events(store, make_event)
        assert [e.event_id for e in store.query(**filters)] == expected_ids


def test_wal_mode_and_full_sync(tmp_path):
    store = SQLiteEventStore(tmp_path / "ev.db")
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store._conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    store.close()
    store.close()  # idempotent


def test_newer_schema_and_foreign_files_are_refused(tmp_path):
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(InvalidInputError, match="newer"):
        SQLiteEventStore(newer)
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidInputError, match="other tables"):
        SQLiteEventStore(foreign)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(InvalidInputError, match="junk.db"):
        SQLiteEventStore(junk)
    with pytest.raises(InvalidInputError, match="does not exist"):
        SQLiteEventStore(tmp_path / "missing.db", read_only=True)


def test_read_events_from_db_and_jsonl(tmp_path, make_event):
    with SQLiteEventStore(tmp_path / "ev.db") as store:
        store.record(make_event())
        store.record(make_event(phase="end", end_s=15.0))
    assert [(e.event_id, e.end_s) for e in read_events(tmp_path / "ev.db")] == [("e1", 15.0)]
    lines = [
        json.dumps(make_event().to_dict()),
        json.dumps({"event": make_event(event_id="e2").to_dict(), "error": "HTTP 500"}),  # a dead letter
        "",
        json.dumps(make_event(phase="end", end_s=15.0).to_dict()),
    ]
    (tmp_path / "ev.jsonl").write_text("\n".join(lines) + "\n")
    assert [(e.event_id, e.end_s) for e in read_events(tmp_path / "ev.jsonl")] == [("e1", 15.0), ("e2", None)]
    (tmp_path / "bad.jsonl").write_text('{"event_id": "x"}\n')
    with pytest.raises(InvalidInputError, match="bad.jsonl:1"):
        read_events(tmp_path / "bad.jsonl")
    with pytest.raises(InvalidInputError, match="does not exist"):
        read_events(tmp_path / "none.jsonl")


def test_store_is_shared_across_threads(tmp_path, make_event):
    import threading

    store = SQLiteEventStore(tmp_path / "ev.db")
    threads = [
        threading.Thread(target=lambda k=k: [store.add(make_event(event_id=f"{k}-{i}")) for i in range(20)])
        for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.query()) == 80
    store.close()


# --- review (schema v2): migration, acknowledge/resolve, filtered pages, CSV -----------------------


def _v1_file(path, make_event):
    """A database as schema v1 wrote it (the v1 DDL, one event row)."""
    from campusguard.app.events import store as store_mod

    conn = sqlite3.connect(path)
    conn.executescript(store_mod._SCHEMA_V1)
    ev = make_event(started_at=T0)
    row = SQLiteEventStore._row(None, ev, "2026-01-10T22:00:00.000000+00:00")  # type: ignore[arg-type]
    conn.execute(f"INSERT INTO events ({', '.join(store_mod._COLUMNS)}) VALUES ({', '.join('?' * len(row))})", row)
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()


def test_v1_file_is_migrated_and_keeps_its_events(tmp_path, make_event):
    path = tmp_path / "old.db"
    _v1_file(path, make_event)
    with pytest.raises(InvalidInputError, match="older than this CampusGuard"):
        SQLiteEventStore(path, read_only=True)
    with SQLiteEventStore(path) as store:
        record = store.get_record("e1")
        assert record is not None and record.state == "open" and record.event == make_event(started_at=T0)
        assert record.acknowledged_by is None and record.note is None
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 2
    with pytest.raises(sqlite3.IntegrityError):  # the state column keeps its CHECK constraint
        conn.execute("UPDATE events SET state = 'bogus'")


def test_review_transitions_record_user_time_and_note(tmp_path, make_event):
    from campusguard.app.events.store import ReviewConflictError

    with SQLiteEventStore(tmp_path / "ev.db") as store:
        store.add(make_event())
        acked = store.review("e1", "acknowledge", user="olga", note="guard sent")
        assert (acked.state, acked.acknowledged_by, acked.note) == ("acknowledged", "olga", "guard sent")
        assert datetime.fromisoformat(acked.acknowledged_at) <= datetime.now(UTC)
        with pytest.raises(ReviewConflictError, match="acknowledged"):
            store.review("e1", "acknowledge", user="olga")
        # the pipeline's later updates never reset the review
        store.record(make_event(phase="end", end_s=20.0))
        after_end = store.get_record("e1")
        assert after_end.state == "acknowledged" and after_end.event.end_s == 20.0
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
        store.add(make_event(event_id="e2"))
        direct = store.review("e2", "resolve", user="ivan", note="false alarm")  # open -> resolved directly
        assert direct.state == "resolved" and direct.acknowledged_by is None


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
def test_query_records_filters_and_pages(tmp_path, make_event, where, page, expected_ids, expected_total):
    from campusguard.app.events.store import EventFilter

    with SQLiteEventStore(tmp_path / "ev.db") as store:
        _four_events(store, make_event)
        store.review("c", "acknowledge", user="olga")
        records, total = store.query_records(EventFilter(**where), **page)
        assert [r.event.event_id for r in records] == expected_ids
        assert total == expected_total
        assert len(store.query()) == 4  # nothing was changed by any filter


def test_query_records_rejects_negative_paging(tmp_path):
    with SQLiteEventStore(tmp_path / "ev.db") as store, pytest.raises(InvalidInputError, match="offset"):
        store.query_records(offset=-1)


def test_record_json_and_csv_export(tmp_path, make_event):
    import csv
    import io

    from campusguard.app.events.store import CSV_FIELDS, write_csv

    with SQLiteEventStore(tmp_path / "ev.db") as store:
        store.add(make_event(started_at=T0, snapshot_path="/x/e1.jpg"))
        store.add(make_event(event_id="e2", rule_name="=HYPERLINK(1)", started_at=T0 + timedelta(minutes=1)))
        store.review("e1", "acknowledge", user="olga", note='said "hi", left')
        data = store.get_record("e1").to_dict()
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


def test_concurrent_acknowledgements_of_one_incident_succeed_once(tmp_path, make_event):
    import threading

    from campusguard.app.events.store import ReviewConflictError

    with SQLiteEventStore(tmp_path / "ev.db") as store:
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
        assert store.get_record("e1").acknowledged_by.startswith("op")
