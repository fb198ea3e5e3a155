"""`EventSide`: the one owner of a running service's event side, and its `Ownership`.

Everything after the rules, the event store, the alert sinks (escalation first), the relay of a
PostgreSQL store, the write-ahead spool, the incidents a dead run left open and retention, is
assembled here and nowhere else. Who does what follows from one value, the side's `Ownership`:
a process that owns the config's storage writes the spool ahead, ends a dead run's incidents and
runs retention; a camera group or a scan unit that hands its events to an owner does none of it;
a node of a site shares one PostgreSQL store with the other nodes. The rules are the properties
of `Ownership`, so `WatchService`, the cluster driver, the scan runner and the console's camera
back-ends ask the same question and get the same answer.

An `EventSide` is made by the process that owns it (one classmethod per ownership), costs
nothing until `EventSide.open`, and is opened once, by the service that runs it, at the point of
its start where the store used to be opened (after the cameras are probed), so a start-up error
names the same field as before. A node's camera services share their node's store: each gets a
side derived from the node's (`EventSide.node_camera`), not a new path.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.config import LoadedConfig, WatchConfig
from campusguard.app.engine.wiring import open_alert_relay, open_store_and_sinks
from campusguard.app.events.interrupted import InterruptedIncidents
from campusguard.app.events.protocols import EventDatabase, PrunableStore
from campusguard.app.events.recorder import AlertRelayLoop, EventRecorder
from campusguard.app.events.spool import EventSpool
from campusguard.app.retention.stage import RetentionStage, start_retention

__all__ = ["EventSide", "OpenedEvents", "Ownership"]


class Ownership(enum.Enum):
    """Who owns the event store a service writes to, and so which duties fall to the service.

    Each member's properties (`writes_spool`, `ends_dead_runs`, `runs_retention`, ...) are the one
    place these rules are written.
    """

    OWNED = "owned"
    """``watch`` (and the cluster driver of ``watch --ray``) alone: the config's store, opened by the
    side and closed at the end; the sinks with escalation first; the spool written ahead; the
    incidents a dead run left open ended; retention run (with a connection of its own, as the event
    writer closes the store before retention's last pass)."""

    BORROWED = "borrowed"
    """``serve``: the store was opened by the embedding process (the console, which reads it too) and
    is left open at the end for its owner to close; otherwise as `OWNED` (sinks, spool, a dead run's
    incidents, retention on the borrowed store)."""

    BATCH = "batch"
    """``scan``'s one writer (the runner): the config's store and its sinks without escalation (nobody
    is on duty for old footage); no spool (the scan ledger re-runs an unfinished file), no dead-run
    ends (file cameras), no retention."""

    PARTIAL = "partial"
    """A scan unit: an in-memory store whose events its owner (the scan runner) commits; no sinks,
    no spool, no dead-run ends, no retention, no tracks: the owner does what is needed, once."""

    GROUP = "group"
    """A camera group of a cluster (a Ray actor or a local group): an in-memory outbox its driver
    pulls; as `PARTIAL`, except that the group looks after its continuous recordings where it
    writes them (a dead run's segments, their retention) and records its cameras' tracks."""

    NODE = "node"
    """A camera of a ``serve --node`` node: the node's shared PostgreSQL store (left open), a spool
    file of the node and camera, no sinks (the node's relay sends once per site), the incidents its
    camera's dead node left open ended, no retention (the site's leader runs it)."""

    @property
    def closes_store(self) -> bool:
        """The service closes the store at its end (not a store someone else opened and reads)."""
        return self in (Ownership.OWNED, Ownership.BATCH, Ownership.PARTIAL, Ownership.GROUP)

    @property
    def has_sinks(self) -> bool:
        """The side opens the config's alert sinks (the others hand their events to a process that does)."""
        return self in (Ownership.OWNED, Ownership.BORROWED, Ownership.BATCH)

    @property
    def escalates(self) -> bool:
        """The rules' `Escalator` goes first in the sinks (live incidents, someone on duty)."""
        return self in (Ownership.OWNED, Ownership.BORROWED)

    @property
    def writes_spool(self) -> bool:
        """Every update is written ahead to a spool file that the next start replays."""
        return self in (Ownership.OWNED, Ownership.BORROWED, Ownership.NODE)

    @property
    def ends_dead_runs(self) -> bool:
        """The incidents an earlier (killed) run left open are ended as interrupted at the start."""
        return self in (Ownership.OWNED, Ownership.BORROWED, Ownership.NODE)

    @property
    def runs_retention(self) -> bool:
        """The retention stage runs here over the rows, logs and media of the config's storage."""
        return self in (Ownership.OWNED, Ownership.BORROWED)

    @property
    def keeps_recordings(self) -> bool:
        """The continuous recordings written here are looked after here: a dead run's temporary
        segments finished or removed at the start, and (with retention on) their retention."""
        return self in (Ownership.OWNED, Ownership.BORROWED, Ownership.GROUP)

    @property
    def records_tracks(self) -> bool:
        """The cameras' tracks are written where they run (for ``campusguard replay``)."""
        return self in (Ownership.OWNED, Ownership.BORROWED, Ownership.GROUP, Ownership.NODE)


@dataclass(frozen=True)
class OpenedEvents:
    """What `EventSide.open` gives the event writer: the store, and the sinks in order (escalator first)."""

    store: EventRecorder
    sinks: list[AlertSink]


class EventSide:
    """The event side of one running service: its store, sinks, relay, spool, dead-run ends and retention.

    Made with the classmethod of its ownership (`owned`, `borrowed`, `batch`, `partial`, `group`,
    `node_camera`); nothing is opened before `open`, which is called once.

    Args:
        loaded: the config (its storage and alerts sections; its cameras' escalation rules).
        ownership: who owns the store (`Ownership`).
        store: a store already open (borrowed, in memory, the node's, or a test's), else None: the
            config's is opened by `open`.
        out: where stdout sinks write.
        spool_path: the write-ahead spool's file (default: the config's, when the ownership writes one).
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        ownership: Ownership,
        *,
        store: EventRecorder | None = None,
        out: TextIO | None = None,
        spool_path: Path | None = None,
    ) -> None:
        if store is None and not (ownership.has_sinks and ownership.closes_store):  # it would open one to leave open
            raise ValueError(f"the {ownership.value} event side writes to a store its owner gives it")
        self.loaded = loaded
        self.ownership = ownership
        self.out = out
        self._given_store = store
        # the store retention prunes when this side runs it: the borrowed one whole, or a given one
        # that can prune; None: retention opens a connection of its own (or, given a store that
        # cannot prune, leaves the rows alone)
        self._prunable: PrunableStore | None = store if isinstance(store, PrunableStore) else None
        self.spool_path = (
            spool_path if spool_path is not None or not ownership.writes_spool else loaded.config.storage.spool_path()
        )
        self.opened: OpenedEvents | None = None

    # one maker per ownership -------------------------------------------------------------------
    @classmethod
    def owned(cls, loaded: LoadedConfig, out: TextIO | None = None, *, store: EventRecorder | None = None) -> EventSide:
        """``watch`` alone (`Ownership.OWNED`): the config's store (or ``store``), closed at the end."""
        return cls(loaded, Ownership.OWNED, store=store, out=out)

    @classmethod
    def borrowed(cls, loaded: LoadedConfig, store: EventDatabase, out: TextIO | None = None) -> EventSide:
        """``serve`` (`Ownership.BORROWED`): the console's ``store``, typed `EventDatabase` (events, a dead
        run's incidents, retention) so a wrapper that drops a capability fails the type check."""
        side = cls(loaded, Ownership.BORROWED, store=store, out=out)
        side._prunable = store  # the whole store, as the console opened it
        return side

    @classmethod
    def batch(cls, loaded: LoadedConfig, out: TextIO | None = None, *, store: EventRecorder | None = None) -> EventSide:
        """``scan``'s one writer (`Ownership.BATCH`)."""
        return cls(loaded, Ownership.BATCH, store=store, out=out)

    @classmethod
    def partial(cls, loaded: LoadedConfig, store: EventRecorder) -> EventSide:
        """A scan unit's in-memory ``store`` (`Ownership.PARTIAL`)."""
        return cls(loaded, Ownership.PARTIAL, store=store)

    @classmethod
    def group(cls, loaded: LoadedConfig, store: EventRecorder) -> EventSide:
        """A cluster camera group's outbox ``store`` (`Ownership.GROUP`)."""
        return cls(loaded, Ownership.GROUP, store=store)

    def node_camera(self, loaded: LoadedConfig, node: str, camera: str) -> EventSide:
        """The side of camera ``camera``'s service on node ``node`` (`Ownership.NODE`), from this
        node's opened side: the same store, no sinks, the spool file ``<spool>.<node>.<camera>``."""
        spool = self.loaded.config.storage.spool_path()
        return EventSide(
            loaded,
            Ownership.NODE,
            store=self.events.store,
            spool_path=spool.with_name(f"{spool.stem}.{node}.{camera}{spool.suffix}"),
        )

    # opening -----------------------------------------------------------------------------------
    def open(self) -> OpenedEvents:
        """Open the store (unless given) and the sinks (escalator first); once.

        Raises:
            ConfigError: the store or a sink cannot be opened (naming its field).
            RuntimeError: opened twice.
        """
        if self.opened is not None:
            raise RuntimeError(f"the {self.ownership.value} event side is opened once")
        if self.ownership.has_sinks:
            store, sinks = open_store_and_sinks(
                self.loaded, self.out, self._given_store, escalate=self.ownership.escalates
            )
        else:
            assert self._given_store is not None  # checked in `__init__`
            store, sinks = self._given_store, []
        self.opened = OpenedEvents(store, sinks)
        return self.opened

    @property
    def events(self) -> OpenedEvents:
        """The opened store and sinks.

        Raises:
            RuntimeError: `open` was not called.
        """
        if self.opened is None:
            raise RuntimeError(f"the {self.ownership.value} event side is not open")
        return self.opened

    def open_relay(self) -> AlertRelayLoop | None:
        """The relay (not started) handing a PostgreSQL store's committed updates to this side's sinks,
        or None when the store does not relay (SQLite: the event writer calls the sinks itself).
        A node opens it once for all its camera services (`open_alert_relay`)."""
        opened = self.events
        return open_alert_relay(opened.store, opened.sinks)

    def close_sinks(self, timeout_s: float) -> None:
        """Close the sinks (a process that keeps them apart from its writers: a node); the store stays open."""
        for sink in self.opened.sinks if self.opened is not None else []:
            sink.close(timeout_s)

    # the duties of the ownership ---------------------------------------------------------------
    @property
    def closes_store(self) -> bool:
        """The event writer closes the store at its end (`Ownership.closes_store`)."""
        return self.ownership.closes_store

    def spool(self) -> EventSpool | None:
        """The write-ahead spool, or None when this side writes none (`Ownership.writes_spool`)."""
        return EventSpool(self.spool_path) if self.spool_path is not None else None

    def interrupted(self, live: dict[str, bool]) -> InterruptedIncidents | None:
        """What ends the incidents a dead run left open for cameras ``live`` (camera id to whether it
        is a live stream), or None when another process does it (`Ownership.ends_dead_runs`)."""
        return InterruptedIncidents(live) if self.ownership.ends_dead_runs else None

    def keeps_recordings(self, config: WatchConfig) -> bool:
        """The continuous recordings of ``config`` are looked after here (`Ownership.keeps_recordings`)."""
        return self.ownership.keeps_recordings and bool(config.outputs.annotated_video_dir)

    def start_retention(self, config: WatchConfig, clips_dir: Path | None = None) -> RetentionStage | None:
        """Start the retention stage this side runs, or None (retention off, or not this side's).

        `OWNED`/`BORROWED`: rows, logs and media of the config; on a borrowed (or given, prunable)
        store, else on a connection of its own. `GROUP`: the continuous recordings alone.
        """
        if not config.retention.enabled:
            return None
        if self.ownership.runs_retention:
            return start_retention(config, self._prunable, clips_dir=clips_dir, open_own=self._given_store is None)
        if self.keeps_recordings(config):
            return start_retention(config, None, clips_dir=clips_dir, open_own=False, recordings_only=True)
        return None
