"""`EventSpool`: updates round-trip in order; a line cut by a crash is reported in one line and skipped."""

from __future__ import annotations

import json
import logging
import queue
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from campusguard.app.alerts import JsonlSink
from campusguard.app.engine.writer import EventWorker
from campusguard.app.events import SQLiteEventStore, read_events
from campusguard.app.events.spool import EventSpool


def _updates(make_event) -> list:
    t0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    return [
        make_event(started_at=t0, details={"dwell_s": 1.5}),
        make_event(phase="update", started_at=t0, tracker_ids=(3, 7, 9), count=3),
        make_event(phase="end", started_at=t0, end_s=20.0, ended_at=t0.replace(second=8), count=3),
        make_event(event_id="e2", rule_kind="line_crossing", direction="in", end_s=12.5),
    ]


def _cut(spool: EventSpool, make_event) -> None:
    """Half a line at the end, as a crash in the middle of `append` leaves it."""
    line = EventSpool(spool.path.with_name("whole.jsonl"))
    line.append([make_event(event_id="e9")])
    with open(spool.path, "ab") as fh:
        fh.write(line.path.read_bytes()[:57])


def test_updates_round_trip_in_order_and_rewrite_and_remove_are_whole(tmp_path: Path, make_event) -> None:
    spool = EventSpool(tmp_path / "state" / "events.spool.jsonl")
    assert not spool.exists() and spool.read() == []
    updates = _updates(make_event)
    spool.append(updates[:1])
    spool.append(updates[1:])
    assert spool.read() == updates
    spool.rewrite(updates[2:])
    assert spool.read() == updates[2:] and [p.name for p in spool.path.parent.iterdir()] == [spool.path.name]
    spool.rewrite([])
    assert not spool.exists()
    spool.append(updates)
    spool.remove()
    assert not spool.exists()


def test_a_cut_last_line_is_reported_in_one_line_and_skipped(tmp_path: Path, make_event, caplog) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    updates = _updates(make_event)
    spool.append(updates[:2])
    _cut(spool, make_event)
    with caplog.at_level(logging.ERROR, logger="campusguard.app.events.spool"):
        assert spool.read() == updates[:2]
    (record,) = caplog.records
    message = record.getMessage()
    assert "line 3 is cut short" in message and "skipped" in message and str(spool.path) in message
    assert "\n" not in message and record.exc_info is None


def test_an_append_after_a_cut_line_starts_a_line_of_its_own(tmp_path: Path, make_event, caplog) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    updates = _updates(make_event)
    spool.append(updates[:2])
    _cut(spool, make_event)
    spool.append(updates[2:])
    with caplog.at_level(logging.ERROR, logger="campusguard.app.events.spool"):
        assert spool.read() == updates
    assert [r.getMessage().split(";")[0].rsplit(": ", 1)[1] for r in caplog.records] == [
        "line 3 is not an event update"
    ]


def test_the_event_worker_replays_a_spool_with_a_cut_line_into_a_real_store(tmp_path: Path, make_event, caplog) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    updates = _updates(make_event)
    spool.append(updates)
    _cut(spool, make_event)
    store = SQLiteEventStore(tmp_path / "events.db")
    sink = JsonlSink(tmp_path / "alerts.jsonl")
    worker = EventWorker(queue.Queue(), store, [sink], [], threading.Event(), spool=spool)
    with caplog.at_level(logging.INFO):
        worker.run()  # no camera: replay, then close
    assert worker.replayed == len(updates) and not spool.exists()
    assert read_events(tmp_path / "events.db") == [updates[2], updates[3]]  # the final state of each incident
    alerts = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [(a["event_id"], a["phase"]) for a in alerts] == [(e.event_id, e.phase) for e in updates]  # in order, once
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "cut short" in errors[0].getMessage() and errors[0].exc_info is None


@pytest.mark.parametrize("text", ["[1, 2]\n", "not json\n"])
def test_a_damaged_line_is_skipped_not_raised(tmp_path: Path, make_event, text: str) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    spool.append([make_event()])
    with open(spool.path, "a", encoding="utf-8") as fh:
        fh.write(text)
    spool.append([make_event(event_id="e2")])
    assert [e.event_id for e in spool.read()] == ["e1", "e2"]


def test_removing_a_spool_that_is_already_gone_is_not_an_error(tmp_path) -> None:
    """Another writer (or an operator) removed it first: the writer closing must not crash on it."""
    from campusguard.app.events.spool import EventSpool

    spool = EventSpool(tmp_path / "events.spool.jsonl")
    spool.remove()
    assert not spool.path.exists()
