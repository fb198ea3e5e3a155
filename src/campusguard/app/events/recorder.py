"""What the event path needs of a store: `EventRecorder` (``record``, ``close``).

The pipeline's event writer, the scan runner, the cluster driver and the console only record
lifecycle updates and close the store at the end; every store (SQLite, PostgreSQL, and the
partial stores of scan, cluster and console) implements this protocol, so the path from a rule to
the database is typed end to end. Queries and review are `EventStore`/`ReviewableEventStore`.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from campusguard.app.events.types import Event

__all__ = ["EventRecorder"]


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
