"""Bulk review and per-camera counts of the event store, on SQLite and on the real PostgreSQL server.

`UpsertingEventStore.review_many` moves every incident whose state allows it in one transaction and
reports the others (unknown ids, wrong states) instead of raising; `count_by_camera` counts
matching incidents per camera (the wall's open-incident markers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from campusguard.app.events import Event
from campusguard.app.events.records import EventFilter
from campusguard.app.events.review import MAX_BULK_REVIEW
from campusguard.app.events.store import UpsertingEventStore
from campusguard.errors import InvalidInputError


def _seed(store: UpsertingEventStore, make_event: Callable[..., Event]) -> None:
    for i, camera in enumerate(["cam0", "cam0", "cam1", "cam1", "cam2"]):
        store.add(make_event(event_id=f"e{i}", camera_id=camera, start_s=float(i)))


def test_review_many_moves_the_allowed_and_reports_the_rest(
    store: UpsertingEventStore, make_event: Callable[..., Event]
) -> None:
    _seed(store, make_event)
    store.review("e2", "resolve", user="olga", note="done before")
    result = store.review_many(["e0", "e1", "e2", "nope", "e0"], "acknowledge", user="ivan", note="one note for all")
    assert [r.event.event_id for r in result.updated] == ["e0", "e1"]  # the repeated e0 counts once
    assert all(r.state == "acknowledged" and r.acknowledged_by == "ivan" for r in result.updated)
    assert all(r.note == "one note for all" for r in result.updated)
    assert result.missing == ["nope"] and result.conflicts == {"e2": "resolved"}
    stored = store.get_record("e1")
    assert stored is not None and stored.state == "acknowledged" and stored.note == "one note for all"
    untouched = store.get_record("e2")
    assert untouched is not None and untouched.note == "done before" and untouched.acknowledged_by is None

    resolved = store.review_many(["e0", "e1", "e3"], "resolve", user="olga", note="")
    assert [(r.event.event_id, r.state, r.resolved_by) for r in resolved.updated] == [
        ("e0", "resolved", "olga"),
        ("e1", "resolved", "olga"),
        ("e3", "resolved", "olga"),
    ]
    assert resolved.updated[0].note == "one note for all"  # an empty note keeps the stored one
    assert store.review_many([], "resolve", user="olga").updated == []


def test_review_many_refuses_bad_input_without_changing_anything(
    store: UpsertingEventStore, make_event: Callable[..., Event]
) -> None:
    _seed(store, make_event)
    with pytest.raises(InvalidInputError, match="review action"):
        store.review_many(["e0"], "delete", user="olga")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=f"at most {MAX_BULK_REVIEW}"):
        store.review_many([f"x{i}" for i in range(MAX_BULK_REVIEW + 1)], "acknowledge", user="olga")
    assert store.query_records(EventFilter(state="open"))[1] == 5


def test_count_by_camera(store: UpsertingEventStore, make_event: Callable[..., Event]) -> None:
    _seed(store, make_event)
    assert store.count_by_camera() == {"cam0": 2, "cam1": 2, "cam2": 1}
    store.review_many(["e0", "e4"], "acknowledge", user="olga")
    assert store.count_by_camera(EventFilter(state="open")) == {"cam0": 1, "cam1": 2}
    assert store.count_by_camera(EventFilter(state="open", camera_id="cam1")) == {"cam1": 2}
    assert store.count_by_camera(EventFilter(kind="crowd")) == {}


def test_concurrent_bulk_acknowledgements_change_each_incident_once(
    store: UpsertingEventStore, make_event: Callable[..., Event]
) -> None:
    ids = [f"c{i}" for i in range(50)]
    for i, eid in enumerate(ids):
        store.add(make_event(event_id=eid, start_s=float(i)))
    results: dict[str, list[str]] = {}

    def ack(user: str, order: list[str]) -> None:
        results[user] = [r.event.event_id for r in store.review_many(order, "acknowledge", user=user).updated]

    threads = [threading.Thread(target=ack, args=(u, o)) for u, o in (("olga", ids), ("ivan", ids[::-1]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results["olga"] + results["ivan"]) == sorted(ids)  # each incident acknowledged by exactly one
    for eid in ids:
        record = store.get_record(eid)
        assert record is not None and record.acknowledged_by == ("olga" if eid in results["olga"] else "ivan")
