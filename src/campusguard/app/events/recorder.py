"""What the event path needs of a store: `EventRecorder` (``record``, ``close``).

The pipeline's event writer, the scan runner, the cluster driver and the console only record
lifecycle updates and close the store at the end; every store (SQLite, PostgreSQL, and the
partial stores of scan, cluster and console) implements this protocol, so the path from a rule to
the database is typed end to end. Queries and review are `EventStore`/`ReviewableEventStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from campusguard.app.events.types import Event

__all__ = ["AlertRelayLoop", "EventRecorder", "RelayingRecorder"]


@runtime_checkable
class EventRecorder(Protocol):
    """Durably records event lifecycle updates (``start``/``update``/``end`` of one ``event_id``)."""

    def record(self, event: Event) -> None:
        """Commit one update (an upsert keyed by ``event.event_id``); raises
        `StoreUnavailableError` when the store cannot commit within its retry budget."""
        ...

    def close(self) -> None:
        """Release the store (connections, files); idempotent."""
        ...


class AlertRelayLoop(Protocol):
    """A thread handing the updates a store queued to the alert sinks (`campusguard.app.events.relay.AlertRelay`)."""

    def start(self) -> AlertRelayLoop:
        """Start the thread; returns the relay."""
        ...

    def wake(self) -> None:
        """Look for queued updates now (one was just committed)."""
        ...

    def close(self, timeout_s: float = 5.0) -> None:
        """Relay what is left within ``timeout_s``, stop, release the connection."""
        ...


@runtime_checkable
class RelayingRecorder(EventRecorder, Protocol):
    """A store that queues each recorded update for the alerts in the update's own transaction (a
    transactional outbox: `PostgresEventStore`). Its updates reach the sinks through `open_relay`, run
    by every process that has sinks open, never by the writer itself: so an update committed by a
    process that died before alerting is alerted by another, and none twice."""

    def open_relay(self, send: Callable[[Event], None]) -> AlertRelayLoop:
        """A relay (not started) handing the queued updates to ``send``."""
        ...
