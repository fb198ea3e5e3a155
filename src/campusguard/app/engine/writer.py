"""`EventWorker`: the event writer, the one place event updates are committed and then reported.

::

    queue[EventMessage | EndOfStream] --> EventWorker --> EventRecorder.record (the commit)
                                                      --> alert sinks, ``on_event`` (only after it)

The `watch` pipeline runs it on its own thread (`campusguard.app.service`); `campusguard scan`
(`campusguard.app.scan.runner`) and the cluster driver (`campusguard.app.cluster.driver`) drive
its `EventWorker.handle` directly with the updates their units and groups return.

With a spool, `EventWorker.run` writes every update ahead: an intake thread appends it to the
`EventSpool` (fsync'd) the moment it leaves the queue, and the writer commits the spooled
updates in order, reporting each once committed; the spool is emptied whenever all are. So an
update the store does not take (PostgreSQL down, a kill while it retries) is on disk at once,
not only at a graceful stop, and the next start replays it, in order, before any new update.

A store that relays (`RelayingRecorder`: PostgreSQL) queues each update for the alerts in the
update's own commit; the worker then never calls the sinks itself: it runs the store's relay
(`RelayingRecorder.open_relay`, started with `run` or the first update, woken after each commit,
drained before the sinks close), which hands the queued updates to the sinks. Every process with
sinks runs one, so the updates a killed process committed are alerted by the others, and none twice.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from campusguard.app.alerts.sinks import send_each
from campusguard.app.engine.sources import EndOfStream
from campusguard.app.events.interrupted import InterruptedIncidents
from campusguard.app.events.protocols import InterruptibleStore, StoreUnavailableError
from campusguard.app.events.recorder import AlertRelayLoop, EventRecorder, RelayingRecorder
from campusguard.app.events.spool import EventSpool
from campusguard.app.events.types import Event
from campusguard.app.infra.throttle import OutageLog

if TYPE_CHECKING:
    from campusguard.app.alerts.protocol import AlertSink

__all__ = ["EventMessage", "EventWorker"]

log = logging.getLogger("campusguard.app.engine.writer")


@dataclass(frozen=True, slots=True)
class EventMessage:
    """One event lifecycle update on its way to the store and the sinks."""

    event: Event


class EventWorker:
    """Commits each event update to the store, then hands it to the alert sinks.

    An event is reported (sinks, stdout) only after `store.record` returned, i.e. after the
    commit. A store that cannot commit within its own retry budget raises
    `StoreUnavailableError`; the worker keeps that event and writes it again every ``retry_s``
    until it is committed (events behind it wait in the bounded queue: back-pressure, never a
    drop). When every camera has ended, the sinks and the store are closed.

    Stopping while the store is unavailable: the retry loop watches ``stop``. Once ``stop`` (or
    ``failed``) is set, an update the store still does not take goes to the ``spool``
    (`EventSpool`, fsync'd JSON lines) instead, and so does every update after it, in order
    (a later update must not reach the store before an earlier one of the same incident); none
    of them is reported. The next worker on the same spool replays it (`replay_spool`) before
    any new update: each line is committed, then reported, and the file is removed once every
    line is committed. Without a spool the worker keeps retrying, as before.

    Args:
        inbox: `EventMessage` / `EndOfStream` queue from the analytics workers.
        store: the event store (`EventRecorder`: ``record(event)``, ``close()``).
        sinks: alert sinks.
        cameras: ids of the cameras whose ends to wait for.
        failed: set when any worker died; the worker then drains what is queued and stops.
        on_event: called with each stored event (after the sinks), e.g. for the demo's summary.
        retry_s: seconds between writes of an event the store could not commit.
        stop: the pipeline's stop event (the retry loop wakes up on it).
        spool: where updates the store did not take before a stop are kept, or None. `run`
            writes every update there first (write-ahead, see the module doc).
        interrupted: the open incidents an earlier run left, ended once the spool is replayed
            (live cameras) or at the camera's end unless the new run raises them again (files).
        close_store: close the store when every camera has ended; False for a store its owner
            closes (``serve``'s console reads it after a file source ended).

    Attributes:
        store_retries: store writes that failed (`StoreUnavailableError`) and were retried or spooled.
        spooled: updates this worker wrote to the spool.
        replayed: spooled updates of an earlier run committed by `replay_spool`.
    """

    def __init__(
        self,
        inbox: queue.Queue[EventMessage | EndOfStream],
        store: EventRecorder,
        sinks: Sequence[AlertSink],
        cameras: Sequence[str],
        failed: threading.Event,
        on_event: Callable[[Event], None] | None = None,
        retry_s: float = 1.0,
        *,
        stop: threading.Event | None = None,
        spool: EventSpool | None = None,
        interrupted: InterruptedIncidents | None = None,
        close_store: bool = True,
    ) -> None:
        self.inbox = inbox
        self.close_store = close_store
        self.store = store
        self.retry_s = retry_s
        self.sinks = list(sinks)
        self.cameras = set(cameras)
        self.failed = failed
        self.on_event = on_event
        self.stop = stop or threading.Event()
        self.spool = spool
        self.store_retries = 0
        # a store that stays unavailable (server down, disk full) is retried every ``retry_s``: one
        # line per 30 s with the count held back, not one per retry for hours
        self._store_outage = OutageLog(log, "event store")  # one line when it goes away, one when it is back
        self.stored = 0
        self.spooled = 0
        self.replayed = 0
        self._spooling = False  # an update went to the spool: every later one follows it there
        self._in_spool = 0  # lines this worker leaves in the spool (its own and an interrupted replay's)
        self.heartbeat = time.monotonic()
        self.interrupted = interrupted
        self.interrupted_ended = 0  # incidents of an earlier run ended as interrupted
        self._lock = threading.Lock()
        self._pending: deque[Event | None] = deque()  # spooled, not committed yet; None: no more
        self._more = threading.Condition(self._lock)
        self._journal = 0  # lines in the spool file
        self._done = 0  # of them committed (a prefix)
        self._given_up = False  # stopping with the store down: the rest stays in the spool
        self._journal_broken = False  # an append failed: lines and updates no longer match
        self._relay: AlertRelayLoop | None = None  # the store's alert relay, once started

    def run(self) -> None:
        """Replay the spool, then store and dispatch until every camera has ended (or a worker
        failed and the queue is empty)."""
        self._relay_loop()  # what another process committed and did not alert goes out now
        if self.spool is not None:
            self._run_spooled()
            return
        try:
            self.replay_spool()
            self.end_interrupted_at_start()
            for item in self._inbox_items():
                if isinstance(item, Event):
                    self.handle(item)
                else:
                    self.end_of_stream(item.camera_id)
        finally:
            self.close()

    def _inbox_items(self) -> Iterator[Event | EndOfStream]:
        """The inbox's updates and camera ends until every camera has ended, or a worker failed and
        the inbox is empty; the heartbeat is kept while waiting."""
        open_cams = set(self.cameras)
        while open_cams:
            try:
                item = self.inbox.get(timeout=0.2)
            except queue.Empty:
                self.heartbeat = time.monotonic()
                if self.failed.is_set():
                    return
                continue
            self.heartbeat = time.monotonic()
            if isinstance(item, EndOfStream):
                open_cams.discard(item.camera_id)
                yield item
            else:
                yield item.event

    # write-ahead path (a spool) ---------------------------------------------------------------
    def _run_spooled(self) -> None:
        """The spool's backlog, the interrupted incidents, then the intake thread's updates, each
        committed in spool order and then reported."""
        assert self.spool is not None
        intake: threading.Thread | None = None
        try:
            backlog = self.spool.read() if self.spool.exists() else []
            if backlog:
                log.info("replaying %d spooled event update(s) from %s into the store", len(backlog), self.spool.path)
            with self._lock:
                self._journal = len(backlog)
                self._pending.extend(backlog)
            replaying = len(backlog)
            if not backlog:
                self._end_interrupted_at_start(self._spool_ahead)
            intake = threading.Thread(target=self._intake, name="events-intake", daemon=True)
            intake.start()
            while True:
                with self._more:
                    while not self._pending:
                        self._more.wait(0.2)
                        self.heartbeat = time.monotonic()
                    event = self._pending.popleft()
                    if event is None and self._pending:  # spooled after the intake ended (interrupted ends)
                        self._pending.append(None)
                        continue
                if event is None:
                    break
                if not self._given_up and self._commit(event):
                    self._committed()
                    self._report(event)
                    if replaying:
                        self.replayed += 1
                        replaying -= 1
                        if not replaying:
                            log.info("replayed %d spooled event update(s)", self.replayed)
                            self._end_interrupted_at_start(self._spool_ahead)
                else:
                    self._given_up = True
                    self.spooled += 1
        finally:
            if intake is not None:
                intake.join(5.0)
            self.close()

    def _end_interrupted_at_start(self, pass_on: Callable[[list[Event]], None]) -> None:
        """Read the incidents an earlier run left open (the store takes reads now) and hand the live
        cameras' ends to ``pass_on`` (`_spool_ahead` on the write-ahead path, `_handle_all` on the
        direct one), like any update."""
        if self.interrupted is None or self.interrupted.loaded:
            return
        ends = self.interrupted.load(self.store)
        if ends:
            pass_on(ends)

    def _intake(self) -> None:
        """Inbox to spool (fsync'd) to the writer, until every camera has ended or a worker failed."""
        try:
            for item in self._inbox_items():
                if isinstance(item, EndOfStream):
                    if self.interrupted is not None:
                        self._spool_ahead(self.interrupted.at_end_of_stream(item.camera_id))
                    continue
                if self.interrupted is not None:
                    self.interrupted.seen(item)
                self._spool_ahead([item])
        finally:
            with self._more:
                self._pending.append(None)
                self._more.notify()

    def _spool_ahead(self, events: list[Event]) -> None:
        """Append ``events`` to the spool (durable), then hand them to the writer; an update the
        spool cannot take (a full disk) still goes to the writer, with one error line."""
        if not events:
            return
        assert self.spool is not None
        for event in events:
            if event.details.get("interrupted"):
                self.interrupted_ended += 1
        with self._more:
            try:
                self.spool.append(events)
                self._journal += len(events)
            except OSError as exc:
                log.error(
                    "event spool %s cannot be written (%s): %d update(s) kept in memory only",
                    self.spool.path,
                    exc,
                    len(events),
                )
                self._journal_broken = True
            self._pending.extend(events)
            self._more.notify()

    def _committed(self) -> None:
        """One more spooled update is committed; an all-committed spool is emptied."""
        assert self.spool is not None
        with self._lock:
            if self._journal_broken:
                return  # the lines and the updates no longer match: the file is kept, replayed whole (idempotent)
            self._done += 1
            if self._done >= self._journal:
                try:
                    self.spool.truncate()
                    self._journal = self._done = 0
                except OSError as exc:
                    log.error("event spool %s cannot be emptied (%s)", self.spool.path, exc)

    def replay_spool(self) -> None:
        """Commit and report, in order, the updates an earlier run spooled; remove the spool once all are committed.

        Stopped while the store is still unavailable, the lines not committed stay in the spool
        (rewritten without the committed ones, so none is reported twice) and later updates are
        appended after them.
        """
        if self.spool is None or not self.spool.exists():
            return
        backlog = self.spool.read()
        log.info("replaying %d spooled event update(s) from %s into the store", len(backlog), self.spool.path)
        for k, event in enumerate(backlog):
            if not self._commit(event):
                self.spool.rewrite(backlog[k:])
                self._spooling = True
                self._in_spool = len(backlog) - k
                return
            self.replayed += 1
            self._report(event)
        self.spool.remove()
        log.info("replayed %d spooled event update(s); %s removed", len(backlog), self.spool.path)

    # direct path (`handle`: `run` without a spool, and the cluster driver) -------------------------
    def end_interrupted_at_start(self) -> None:
        """Once `replay_spool` committed the spool: end the incidents an earlier run left open on the
        live cameras (the files' wait for `end_of_stream`); nothing while the store is unavailable."""
        if not self._spooling:
            self._end_interrupted_at_start(self._handle_all)

    def end_of_stream(self, camera_id: str) -> None:
        """``camera_id``'s stream ended: end the incidents an earlier run left open on it that this
        run did not raise again."""
        if self.interrupted is not None:
            self._handle_all(self.interrupted.at_end_of_stream(camera_id))

    def _handle_all(self, events: list[Event]) -> None:
        for event in events:
            if event.details.get("interrupted"):
                self.interrupted_ended += 1
            self.handle(event)

    def handle(self, event: Event) -> None:
        """Commit, then report; or, stopping with the store unavailable, spool."""
        if self.interrupted is not None:
            self.interrupted.seen(event)
        if self._spooling or not self._commit(event):
            self._spool(event)
            return
        self._report(event)

    def _report(self, event: Event) -> None:
        self.stored += 1
        relay = self._relay_loop()
        if relay is not None:
            relay.wake()  # the store queued the update for the alerts in its commit
        else:
            self._send(event, relaying=False)
        if self.on_event is not None:
            self.on_event(event)

    def _send(self, event: Event, *, relaying: bool) -> None:
        """Hand ``event`` to every sink (`send_each`: relaying, a sink that could not take it raises)."""
        send_each(self.sinks, event, relaying=relaying)

    def _relay_send(self, event: Event) -> None:
        self._send(event, relaying=True)

    def _relay_loop(self) -> AlertRelayLoop | None:
        """The store's alert relay, started on first use; None when the store does not relay, or when
        this worker has no sinks (a node's camera services: the node's own relay sends for them)."""
        if self._relay is None and self.sinks and isinstance(self.store, RelayingRecorder):
            self._relay = self.store.open_relay(self._relay_send).start()
        return self._relay

    def _stopping(self) -> bool:
        return self.stop.is_set() or self.failed.is_set()

    def _commit(self, event: Event) -> bool:
        """``store.record(event)`` until it succeeds (True); False when stopping with the store
        unavailable and a spool to put the event in. An unavailable store never loses the event."""
        while True:
            try:
                self.store.record(event)
                self._store_outage.up("takes events again")
                return True
            except StoreUnavailableError as exc:
                self.store_retries += 1
                self.heartbeat = time.monotonic()
                if self.spool is not None and self._stopping():
                    return False
                if not self._store_outage.down(
                    f"event {event.event_id} is not stored yet ({exc}); retrying every {self.retry_s:.1f} s"
                ):
                    log.debug("event %s is still not stored (%s)", event.event_id, exc)
                if self._stopping():
                    time.sleep(self.retry_s)
                else:
                    self.stop.wait(self.retry_s)  # a stop wakes the loop for one last try, then the spool

    def _spool(self, event: Event) -> None:
        assert self.spool is not None
        self._spooling = True
        try:
            self.spool.append([event])
        except OSError as exc:
            log.error(
                "event %s is LOST: the event spool %s cannot be written (%s)", event.event_id, self.spool.path, exc
            )
            return
        self.spooled += 1
        self._in_spool += 1

    def stop_store_retries(self) -> None:
        """On a stop (any thread, a signal handler too): a store call retrying a lost connection gives
        up now, so its update goes to the spool instead of holding the stop up for the store's budget."""
        if self.spool is not None and isinstance(self.store, InterruptibleStore):
            self.store.stop_retrying()

    def close(self) -> None:
        if self.spool is not None and self._done and self._journal > self._done:
            try:  # drop the committed lines, so none is replayed (or alerted) again
                self.spool.rewrite(self.spool.read()[self._done :])
                self._journal -= self._done
                self._done = 0
            except OSError as exc:
                log.error("event spool %s cannot be rewritten (%s); its lines are replayed whole", self.spool.path, exc)
        if self.spool is not None and self._journal == 0 and not self.spool.exists():
            self.spool.remove()  # an emptied spool file
        if self._relay is not None:  # the updates committed here go to the sinks before they close
            try:
                self._relay.close()
            except Exception:
                log.exception("closing the alert relay failed")
        for sink in self.sinks:
            try:
                sink.close()
            except Exception:
                log.exception("closing alert sink %s failed", type(sink).__name__)
        if self.close_store:
            self.store.close()
        left = self._in_spool or self.spooled
        if left:
            assert self.spool is not None
            log.warning(
                "%d event update(s) the store did not take before the stop are spooled in %s; "
                "the next start replays them into the store",
                left,
                self.spool.path,
            )
