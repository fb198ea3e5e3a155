"""`EventSide`: each ownership's duties, on the real SQLite and PostgreSQL stores.

The rules live in one table (`Ownership`'s properties); these tests pin the table and check that a
side opened with each ownership does what its row says: `OWNED` opens the config's store and the
sinks with the escalator first, writes the spool and ends a dead run's incidents, and its store is
closed at the end; `BORROWED` leaves the console's store open; `NODE` shares the node's store with
no sinks and a spool of its own; `PARTIAL`, `GROUP` and `BATCH` leave the owner's duties alone.
"""

from __future__ import annotations

import dataclasses
import io
import json
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from campusguard.app.alerts.escalation import Escalator
from campusguard.app.cluster.group import Outbox
from campusguard.app.config import LoadedConfig, parse_config
from campusguard.app.engine.sources import EndOfStream
from campusguard.app.engine.writer import EventWorker
from campusguard.app.event_side import EventSide, Ownership
from campusguard.app.events import SQLiteEventStore
from campusguard.app.events.types import Event
from campusguard.app.scan.unit import _CollectedEvents

DUTIES = ("has_sinks", "escalates", "writes_spool", "ends_dead_runs", "runs_retention", "keeps_recordings")
MORE = ("records_tracks", "closes_store")


@pytest.mark.parametrize(
    ("ownership", "duties"),
    [
        # sinks, escalates, spool, dead runs, retention, recordings, tracks, closes store
        (Ownership.OWNED, (1, 1, 1, 1, 1, 1, 1, 1)),
        (Ownership.BORROWED, (1, 1, 1, 1, 1, 1, 1, 0)),
        (Ownership.BATCH, (1, 0, 0, 0, 0, 0, 0, 1)),
        (Ownership.PARTIAL, (0, 0, 0, 0, 0, 0, 0, 1)),
        (Ownership.GROUP, (0, 0, 0, 0, 0, 1, 1, 1)),
        (Ownership.NODE, (0, 0, 1, 1, 0, 0, 1, 0)),
    ],
)
def test_each_ownership_has_its_duties(ownership: Ownership, duties: tuple[int, ...]) -> None:
    assert {name: getattr(ownership, name) for name in DUTIES + MORE} == dict(
        zip(DUTIES + MORE, map(bool, duties), strict=True)
    )


def _config(tmp_path: Path, *, postgresql: str | None = None, recordings: bool = False) -> LoadedConfig:
    storage = f"  postgresql: {postgresql}\n" if postgresql else ""
    outputs = f"outputs:\n  annotated_video_dir: {tmp_path / 'rec'}\n" if recordings else ""
    return parse_config(
        f"""\
cameras:
  - id: live
    source: rtsp://127.0.0.1:9/stream
    zones:
      - name: gate
        polygon: [[0, 0], [10, 0], [10, 10], [0, 10]]
    rules:
      - kind: intrusion
        name: night
        zone: gate
        escalate: {{after_s: 60, to: [duty]}}
alerts:
  - kind: jsonl
    name: duty
    path: {tmp_path / "duty.jsonl"}
storage:
  sqlite: {tmp_path / "events.db"}
{storage}{outputs}""",
        "c.yaml",
    )


def _phases(path: Path) -> list[tuple[str, str]]:
    return [(d["event_id"], d["phase"]) for d in map(json.loads, path.read_text().splitlines())]


def _open_incident(make_event: Callable[..., Event]) -> Event:
    return make_event(event_id="dead1", camera_id="live", rule_name="night", end_s=None, sequence=2)


def _run_writer(side: EventSide, cameras: list[str]) -> EventWorker:
    """The event writer a service runs with ``side``, through the end of ``cameras``' streams."""
    opened = side.open()
    inbox: queue.Queue = queue.Queue()
    for camera in cameras:
        inbox.put(EndOfStream(camera))
    worker = EventWorker(
        inbox,
        opened.store,
        opened.sinks,
        cameras,
        threading.Event(),
        spool=side.spool(),
        interrupted=side.interrupted(dict.fromkeys(cameras, True)),
        close_store=side.closes_store,
    )
    worker.run()
    worker.close()
    return worker


def test_owned_opens_the_config_store_and_sinks_ends_a_dead_runs_incidents_and_closes_the_store(
    tmp_path: Path, make_event: Callable[..., Event]
) -> None:
    loaded = _config(tmp_path)
    dead_run = SQLiteEventStore(tmp_path / "events.db")
    dead_run.record(_open_incident(make_event))
    dead_run.close()
    side = EventSide.owned(loaded, io.StringIO())
    assert side.spool_path == tmp_path / "events.spool.jsonl"  # the config's
    worker = _run_writer(side, ["live"])
    assert isinstance(side.events.sinks[0], Escalator) and len(side.events.sinks) == 2  # escalator first
    assert worker.interrupted_ended == 1 and not (tmp_path / "events.spool.jsonl").exists()  # written, committed
    store = SQLiteEventStore(tmp_path / "events.db")
    ended = store.get("dead1")
    store.close()
    assert ended is not None and not ended.is_open and ended.details.get("interrupted")
    assert "dead1" in (tmp_path / "duty.jsonl").read_text()  # the end was alerted
    with pytest.raises(AttributeError):  # the side's store was closed at the end: no connection left
        side.events.store.record(make_event(event_id="late", camera_id="live"))
    with pytest.raises(RuntimeError, match="opened once"):
        side.open()


def test_owned_retention_opens_its_own_connection(tmp_path: Path) -> None:
    loaded = _config(tmp_path)
    side = EventSide.owned(loaded, io.StringIO())
    stage = side.start_retention(loaded.config)
    assert stage is not None
    try:
        store = stage.cleaner.pruner.store
        assert isinstance(store, SQLiteEventStore)  # its own: the writer closes the side's before the last pass
    finally:
        stage.finish()


def test_borrowed_leaves_the_store_open_and_retention_prunes_it(
    tmp_path: Path, make_event: Callable[..., Event]
) -> None:
    loaded = _config(tmp_path)
    console_store = SQLiteEventStore(tmp_path / "events.db")
    try:
        console_store.record(_open_incident(make_event))
        side = EventSide.borrowed(loaded, console_store, io.StringIO())
        worker = _run_writer(side, ["live"])
        assert worker.interrupted_ended == 1
        assert side.events.store is console_store
        ended = console_store.get("dead1")  # still open for its owner, the console
        assert ended is not None and ended.details.get("interrupted")
        stage = side.start_retention(loaded.config)
        assert stage is not None and stage.cleaner.pruner.store is console_store
        stage.finish()
        assert console_store.get("dead1") is not None  # still open after retention's last pass
    finally:
        console_store.close()


def test_node_cameras_share_the_nodes_postgresql_store_with_no_sinks_and_a_spool_each(
    tmp_path: Path, postgres_url: str, make_event: Callable[..., Event]
) -> None:
    from campusguard.app.events import open_event_store

    loaded = _config(tmp_path, postgresql=postgres_url)
    store = open_event_store(loaded.config.storage)
    node = EventSide.borrowed(loaded, store, io.StringIO())
    try:
        store.record(_open_incident(make_event))  # left open by the node that died
        assert len(node.open().sinks) == 2  # once per node: escalator and the jsonl sink
        relay = node.open_relay()
        assert relay is not None  # a PostgreSQL store relays its committed updates to the node's sinks
        relay.close(5.0)
        assert _phases(tmp_path / "duty.jsonl") == [("dead1", "start")]  # relayed once, by the node
        camera = node.node_camera(loaded, "n1", "live")
        assert camera.ownership is Ownership.NODE
        assert camera.spool_path == tmp_path / "events.spool.n1.live.jsonl"
        worker = _run_writer(camera, ["live"])
        assert camera.events.sinks == [] and camera.events.store is store  # the node's relay sends
        assert worker.interrupted_ended == 1  # the camera's dead node's incident, ended by its taker
        ended = store.get("dead1")  # the node's store is left open
        assert ended is not None and ended.details.get("interrupted")
        assert camera.start_retention(loaded.config) is None  # the site's leader runs it
        assert _phases(tmp_path / "duty.jsonl") == [("dead1", "start")]  # the camera's service sent nothing
    finally:
        node.close_sinks(1.0)
        store.close()


def test_a_scan_unit_and_a_group_leave_spool_dead_runs_and_rows_to_their_owner(tmp_path: Path) -> None:
    loaded = _config(tmp_path, recordings=True)
    for ownership in (Ownership.PARTIAL, Ownership.GROUP, Ownership.NODE, Ownership.BORROWED):
        with pytest.raises(ValueError, match="a store its owner gives it"):
            EventSide(loaded, ownership)
    unit, group = EventSide.partial(loaded, _CollectedEvents("a.mp4")), EventSide.group(loaded, Outbox())
    for side in (unit, group):
        assert side.open().sinks == []  # no escalator either: the owner escalates
        assert side.spool() is None and side.interrupted({"live": True}) is None and side.closes_store
    assert unit.start_retention(loaded.config) is None
    stage = group.start_retention(loaded.config)  # the recordings it writes, on its node
    assert stage is not None
    try:
        assert stage.cleaner.pruner.store is None
        assert stage.cleaner.pruner.layout.recordings_dir == tmp_path / "rec"
    finally:
        stage.finish()
    assert not (tmp_path / "events.db").exists()  # no store opened for them


def test_scans_writer_alerts_without_escalation_and_writes_no_spool(
    tmp_path: Path, make_event: Callable[..., Event]
) -> None:
    loaded = _config(tmp_path)
    side = EventSide.batch(loaded, io.StringIO())
    opened = side.open()
    try:
        assert len(opened.sinks) == 1 and not isinstance(opened.sinks[0], Escalator)  # old footage
        assert side.spool() is None and side.interrupted({"live": True}) is None
        assert side.start_retention(loaded.config) is None
        opened.store.record(dataclasses.replace(make_event(camera_id="live"), event_id="s1"))
    finally:
        for sink in opened.sinks:
            sink.close()
        opened.store.close()
    store = SQLiteEventStore(tmp_path / "events.db")
    assert store.get("s1") is not None
    store.close()
