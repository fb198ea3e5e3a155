"""`EventWorker`, the event writer: commit, then report; spool what a stopped store did not take.

Also: every store the event path writes to (the SQL stores and the partial stores of scan, the
cluster groups and the console) is an `EventRecorder`.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import re
import threading
import time
from pathlib import Path

from campusguard.app.cluster.group import Outbox
from campusguard.app.engine.sources import EndOfStream
from campusguard.app.engine.writer import EventMessage, EventWorker
from campusguard.app.events import SQLiteEventStore
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.recorder import EventRecorder
from campusguard.app.events.spool import EventSpool
from campusguard.app.events.types import Event
from campusguard.app.scan.unit import _CollectedEvents


class RecordingStore:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def record(self, event: Event) -> None:
        self.log.append(f"store {event.phase}")

    def close(self) -> None:
        self.log.append("store closed")


class RecordingSink:
    def __init__(self, log: list[str], fail: bool = False) -> None:
        self.log, self.fail = log, fail

    def send(self, event: Event) -> None:
        if self.fail:
            raise OSError("sink down")
        self.log.append(f"sink {event.phase}")

    def close(self) -> None:
        self.log.append("sink closed")


def make_event(phase: str) -> Event:
    return Event(
        event_id="e1",
        phase=phase,
        camera_id="c",
        rule_name="r",
        rule_kind="intrusion",
        zone="z",
        start_s=1.0,
        end_s=2.0 if phase == "end" else None,
    )  # type: ignore[arg-type]


def test_event_worker_commits_before_reporting_and_survives_a_broken_sink() -> None:
    log: list[str] = []
    inbox: queue.Queue = queue.Queue()
    for phase in ("start", "end"):
        inbox.put(EventMessage(make_event(phase)))
    inbox.put(EndOfStream("c"))
    worker = EventWorker(
        inbox, RecordingStore(log), [RecordingSink(log, fail=True), RecordingSink(log)], ["c"], threading.Event()
    )
    worker.run()
    assert log == ["store start", "sink start", "store end", "sink end", "sink closed", "sink closed", "store closed"]


class FlakyStore:
    """A store that commits its first ``up_for`` writes, then is unavailable (``StoreUnavailableError``)."""

    def __init__(self, up_for: int = 1_000_000) -> None:
        self.up_for = up_for
        self.committed: list[tuple[str, str]] = []
        self.attempts = 0

    def record(self, event: Event) -> None:
        self.attempts += 1
        if len(self.committed) >= self.up_for:
            raise StoreUnavailableError("PostgreSQL event store postgresql://db/x: storing event failed")
        self.committed.append((event.event_id, event.phase))

    def close(self) -> None:
        pass


class ListSink:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send(self, event: Event) -> None:
        self.sent.append((event.event_id, event.phase))

    def close(self) -> None:
        pass


def _incident(event_id: str) -> list[Event]:
    return [dataclasses.replace(make_event(phase), event_id=event_id) for phase in ("start", "update", "end")]


def _inbox(events: list[Event]) -> queue.Queue:
    inbox: queue.Queue = queue.Queue()
    for ev in events:
        inbox.put(EventMessage(ev))
    inbox.put(EndOfStream("c"))
    return inbox


def test_event_worker_spools_in_order_when_stopped_while_the_store_is_down(tmp_path: Path, caplog) -> None:
    updates = _incident("a") + _incident("b")
    store, sink, stop = FlakyStore(up_for=1), ListSink(), threading.Event()
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    worker = EventWorker(_inbox(updates), store, [sink], ["c"], threading.Event(), retry_s=60, stop=stop, spool=spool)
    threading.Timer(0.3, stop.set).start()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="campusguard.app.engine.writer"):
        worker.run()
    assert time.monotonic() - t0 < 10  # the stop woke the 60 s retry wait
    assert store.committed == sink.sent == [("a", "start")]  # reported only once committed
    assert spool.read() == updates[1:] and worker.spooled == 5 and store.attempts == 3  # one try after the stop
    (line,) = [r.getMessage() for r in caplog.records if "spooled" in r.getMessage()]
    assert line.startswith("5 event update(s)") and str(spool.path) in line


def test_event_worker_replays_the_spool_before_new_updates_and_keeps_what_it_could_not_commit(tmp_path: Path) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    spool.append(_incident("a"))
    # the store takes one replayed update, then is down again; the worker is stopped
    store, sink, stop = FlakyStore(up_for=1), ListSink(), threading.Event()
    stop.set()
    worker = EventWorker(_inbox(_incident("b")), store, [sink], ["c"], threading.Event(), stop=stop, spool=spool)
    worker.run()
    assert store.committed == sink.sent == [("a", "start")] and worker.replayed == 1
    assert spool.read() == _incident("a")[1:] + _incident("b")  # the committed line is gone, new ones follow
    # the next start, with the store back: the rest, in order, each reported once, then the spool is removed
    store, sink = FlakyStore(), ListSink()
    worker = EventWorker(_inbox(_incident("c")), store, [sink], ["c"], threading.Event(), spool=spool)
    worker.run()
    expected = [(e.event_id, e.phase) for e in _incident("a")[1:] + _incident("b") + _incident("c")]
    assert store.committed == sink.sent == expected and worker.replayed == 5 and not spool.exists()


def test_event_worker_without_a_spool_keeps_retrying_after_a_stop() -> None:
    store, stop, done = FlakyStore(up_for=0), threading.Event(), threading.Event()
    stop.set()
    worker = EventWorker(_inbox(_incident("a")), store, [ListSink()], ["c"], threading.Event(), retry_s=0.01, stop=stop)
    thread = threading.Thread(target=lambda: (worker.run(), done.set()), daemon=True)
    thread.start()
    time.sleep(0.3)
    assert not done.is_set() and store.attempts > 3  # nowhere to put the update: it is not dropped
    store.up_for = 100
    assert done.wait(5) and store.committed == [(e.event_id, e.phase) for e in _incident("a")]


def test_a_store_that_stays_down_is_logged_once_when_it_goes_and_once_when_it_is_back(caplog) -> None:
    """A full disk or a server down for hours: one line when the outage starts, one when it ends with
    the count held back (issues 24, 31), not one per retry."""
    store, stop, done = FlakyStore(up_for=0), threading.Event(), threading.Event()
    stop.set()
    worker = EventWorker(_inbox(_incident("a")), store, [ListSink()], ["c"], threading.Event(), retry_s=0.01, stop=stop)
    with caplog.at_level(logging.WARNING, logger="campusguard.app.engine.writer"):
        thread = threading.Thread(target=lambda: (worker.run(), done.set()), daemon=True)
        thread.start()
        time.sleep(0.5)
        store.up_for = 100
        assert done.wait(5)
    retries = [r.getMessage() for r in caplog.records if "not stored yet" in r.getMessage()]
    assert store.attempts > 10 and len(retries) == 1, retries
    back = [r.getMessage() for r in caplog.records if "takes events again" in r.getMessage()]
    assert len(back) == 1 and re.search(r"\(([1-9]\d+) failure\(s\) held back\)", back[0]), back


# every store of the event path is an EventRecorder -------------------------------------------
class _Interruptible:
    def __init__(self) -> None:
        self.recorded: list[Event] = []
        self.closed = self.stopped = False

    def record(self, event: Event) -> None:
        self.recorded.append(event)

    def close(self) -> None:
        self.closed = True

    def stop_retrying(self) -> None:
        self.stopped = True


def test_the_scan_units_store_records_each_update_tagged_with_its_recording() -> None:
    store = _CollectedEvents("cam-1/a.mp4")
    assert isinstance(store, EventRecorder)
    store.record(make_event("start"))
    store.close()
    (ev,) = store.events
    assert ev.phase == "start" and ev.details == {"recording": "cam-1/a.mp4"}


def test_the_cluster_groups_outbox_records_numbered_updates_until_closed() -> None:
    outbox = Outbox()
    assert isinstance(outbox, EventRecorder)
    updates = _incident("a")
    for ev in updates:
        outbox.record(ev)
    assert outbox.pending(10) == (list(enumerate(updates, start=1)), False)
    outbox.close()
    assert outbox.pending(10) == (list(enumerate(updates, start=1)), True)


def test_a_shared_store_is_left_open_for_its_owner_and_a_stop_reaches_it(tmp_path: Path) -> None:
    """``serve`` hands the console's store to the pipeline whole (no wrapper): the worker records
    through it, leaves it open at the end, and a stop still cuts a retrying store's retries short."""
    store = SQLiteEventStore(tmp_path / "events.db")
    inbox: queue.Queue = queue.Queue()
    inbox.put(EventMessage(make_event("start")))
    inbox.put(EndOfStream("c"))
    EventWorker(inbox, store, [], ["c"], threading.Event(), close_store=False).run()
    got = store.get("e1")  # still open: the console reads after a file source ended
    assert got is not None and got.phase == "start"
    store.close()
    inner = _Interruptible()
    worker = EventWorker(
        queue.Queue(), inner, [], ["c"], threading.Event(), spool=EventSpool(tmp_path / "s.jsonl"), close_store=False
    )
    worker.stop_store_retries()
    worker.close()
    assert inner.stopped and not inner.closed


def test_the_sql_stores_are_event_recorders(tmp_path: Path) -> None:
    store = SQLiteEventStore(tmp_path / "events.db")
    assert isinstance(store, EventRecorder)
    store.close()


# issue 24: an update is spooled the moment it arrives; a dead run's open incidents are ended ------
def test_an_update_the_store_does_not_take_is_in_the_spool_at_once_and_replayed_once(tmp_path: Path) -> None:
    """PostgreSQL down, no stop: each update is on disk while the writer still retries, so a kill
    then loses none; the next start replays them in order, each reported once."""
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    store, inbox = FlakyStore(up_for=0), queue.Queue()
    worker = EventWorker(inbox, store, [ListSink()], ["c"], threading.Event(), retry_s=0.05, spool=spool)
    threading.Thread(target=worker.run, daemon=True).start()
    updates = _incident("a")
    for ev in updates:
        inbox.put(EventMessage(ev))
    deadline = time.monotonic() + 5
    while spool.read() != updates and time.monotonic() < deadline:
        time.sleep(0.02)
    assert spool.read() == updates and store.attempts >= 1 and not store.committed  # spooled, not given up
    # the process dies here (nothing more runs); the next start, with the store back:
    store2, sink2 = FlakyStore(), ListSink()
    EventWorker(_inbox([]), store2, [sink2], ["c"], threading.Event(), spool=spool).run()
    assert store2.committed == sink2.sent == [(e.event_id, e.phase) for e in updates] and not spool.exists()
    store.up_for = 10**6  # the old worker's thread would commit them too: idempotent upserts in a real store
    inbox.put(EndOfStream("c"))


def test_the_spool_empties_once_the_store_is_back_mid_run(tmp_path: Path) -> None:
    spool = EventSpool(tmp_path / "events.spool.jsonl")
    store, sink, inbox = FlakyStore(up_for=0), ListSink(), queue.Queue()
    worker = EventWorker(inbox, store, [sink], ["c"], threading.Event(), retry_s=0.05, spool=spool)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    for ev in _incident("a"):
        inbox.put(EventMessage(ev))
    time.sleep(0.3)
    store.up_for = 10**6
    inbox.put(EndOfStream("c"))
    thread.join(5)
    assert sink.sent == [(e.event_id, e.phase) for e in _incident("a")] and not spool.exists()


def test_open_incidents_of_a_dead_run_are_ended_as_interrupted_unless_the_file_is_re_read(tmp_path: Path) -> None:
    from campusguard.app.events.interrupted import InterruptedIncidents

    db = SQLiteEventStore(tmp_path / "e.db")
    live = dataclasses.replace(make_event("update"), event_id="live1", camera_id="live", end_s=None, sequence=3)
    resumed = dataclasses.replace(make_event("start"), event_id="f1", camera_id="c", end_s=None)
    gone = dataclasses.replace(make_event("start"), event_id="f2", camera_id="c", end_s=None)
    for ev in (live, resumed, gone):
        db.record(ev)
    db.record(dataclasses.replace(make_event("end"), event_id="done", camera_id="c"))
    # the new run: the file camera raises f1 again and ends it itself; f2 is not raised again
    inbox = _inbox([resumed, dataclasses.replace(resumed, phase="end", end_s=3.0, sequence=1)])
    inbox.put(EndOfStream("live"))
    sink = ListSink()
    spool = EventSpool(tmp_path / "s.jsonl")
    worker = EventWorker(
        inbox,
        db,
        [sink],
        ["c", "live"],
        threading.Event(),
        spool=spool,
        interrupted=InterruptedIncidents({"c": False, "live": True}),
    )
    worker.run()
    db = SQLiteEventStore(tmp_path / "e.db")
    stored = {e.event_id: e for e in db.query()}
    assert all(not e.is_open for e in stored.values())
    assert stored["live1"].details.get("interrupted") and stored["f2"].details.get("interrupted")
    assert stored["live1"].end_s == stored["live1"].start_s  # its last known time
    assert not stored["f1"].details.get("interrupted") and stored["f1"].end_s == 3.0
    assert sink.sent[0] == ("live1", "end")  # the live camera's at once, before the new run's updates
    assert sorted(sink.sent) == sorted([("live1", "end"), ("f1", "start"), ("f1", "end"), ("f2", "end")])
    assert worker.interrupted_ended == 2 and not spool.exists()
    db.close()
