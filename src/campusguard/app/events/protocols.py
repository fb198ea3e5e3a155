"""What the app asks of an event store: the protocols every store implements, and its one outage error.

A reader of this module learns what a store promises without reading a store: `EventStore` (the
lifecycle writes and plain reads; every write durable when it returns), `ReviewableEventStore` (the
operators' review), `PrunableStore` (what retention needs), `EventDatabase` (all of them: the store
`open_event_store` opens), `RecordQuery` (one page of incidents), `InterruptibleStore` (a store
whose retries can be cut short) and `StoreUnavailableError` (a call that committed nothing).
The implementations are `campusguard.app.events.sqlite` and `campusguard.app.events.postgres`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol, runtime_checkable

from campusguard.app.events.recorder import EventRecorder
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction
from campusguard.app.events.types import Event
from campusguard.errors import CampusGuardError

__all__ = [
    "EventStore",
    "InterruptibleStore",
    "StoreUnavailableError",
    "RecordQuery",
    "ReviewableEventStore",
    "PrunableStore",
    "EventDatabase",
]


@runtime_checkable
class EventStore(EventRecorder, Protocol):
    """Where events are kept: `EventRecorder` (``record``, ``close``) and reads. Every write is
    durable when it returns."""

    def add(self, event: Event) -> None:
        """Store a new incident (its ``start``)."""
        ...

    def update(self, event: Event) -> None:
        """Replace the stored state of an incident with this update."""
        ...

    def end(self, event: Event) -> None:
        """Mark an incident ended with this final state."""
        ...

    def get(self, event_id: str) -> Event | None:
        """The latest state of one incident, or ``None``."""
        ...

    def query(
        self,
        *,
        camera_id: str | None = None,
        since: datetime | None = None,
        rule: str | None = None,
        kind: str | None = None,
        limit: int | None = None,
    ) -> list[Event]:
        """Incidents matching every given filter, oldest first.

        ``since`` compares with the wall-clock start (``started_at``) or, when the event has
        none, the time it was recorded. ``rule`` matches the rule name.
        """
        ...


@runtime_checkable
class InterruptibleStore(Protocol):
    """A store whose calls retry a lost connection (`PostgresEventStore`), and can be told to stop."""

    def stop_retrying(self) -> None:
        """A call retrying now gives up (`StoreUnavailableError`) and later ones try once; safe from any thread."""
        ...


class StoreUnavailableError(CampusGuardError):
    """The event store's server could not be reached, or a write or read could not be completed
    within the store's retry budget; nothing was committed by the failed call (retry it)."""


class RecordQuery(Protocol):
    """What `query_events` reads through: one page of matching incidents and their number."""

    def query_records(
        self, where: EventFilter = ..., *, limit: int | None = 50, offset: int = 0, newest_first: bool = True
    ) -> tuple[list[EventRecord], int]: ...


@runtime_checkable
class ReviewableEventStore(EventStore, Protocol):
    """An `EventStore` that also keeps the operators' review of each incident (the console's store)."""

    def get_record(self, event_id: str) -> EventRecord | None:
        """One incident with its review state, or ``None``."""
        ...

    def query_records(
        self, where: EventFilter = ..., *, limit: int | None = 50, offset: int = 0, newest_first: bool = True
    ) -> tuple[list[EventRecord], int]:
        """One page of matching incidents and the number of all matching incidents."""
        ...

    def review(
        self,
        event_id: str,
        action: ReviewAction,
        *,
        user: str,
        note: str | None = None,
        outcome: str | None = None,
    ) -> EventRecord:
        """Acknowledge or resolve an incident (resolving may record its ``outcome``); committed when this returns."""
        ...


@runtime_checkable
class PrunableStore(Protocol):
    """What retention (`campusguard.app.retention.Pruner`) needs of an event store."""

    def expired(self, before: datetime, *, limit: int = ...) -> list[tuple[str, str, str | None, str]]: ...

    def delete_events(self, event_ids: Iterable[str], *, batch: int = ...) -> int: ...

    def clear_snapshots(self, event_ids: Iterable[str], *, batch: int = ...) -> int: ...

    def media_rows(self) -> list[tuple[str, str, str, bool, bool, str]]: ...

    def protected_ids(self) -> set[str]: ...

    def reclaim_space(self, *, force: bool = ...) -> int: ...


@runtime_checkable
class EventDatabase(ReviewableEventStore, PrunableStore, Protocol):
    """The event store as `open_event_store` opens it (`SQLiteEventStore`, `PostgresEventStore`):
    lifecycle writes, reads and review (`ReviewableEventStore`) and retention (`PrunableStore`).

    One process shares one: ``serve`` lends the console's store to its `WatchService`
    (`campusguard.app.event_side.EventSide.borrowed`), typed by this protocol, so a wrapper that
    drops a capability (retention's, say) fails the type check instead of running retention
    without a store.
    """
