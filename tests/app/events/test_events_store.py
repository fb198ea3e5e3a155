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
        store.add(make_event(event_id="a", started_at=T0))
        store.add(
            make_event(event_id="b", rule_name="crowd plaza", rule_kind="crowd", started_at=T0 + timedelta(minutes=10))
        )
        store.add(make_event(event_id="c", camera_id="cam1", started_at=T0 + timedelta(minutes=20)))
        store.add(
            make_event(event_id="d", rule_name="crowd plaza", rule_kind="crowd", started_at=T0 + timedelta(minutes=30))
        )
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
