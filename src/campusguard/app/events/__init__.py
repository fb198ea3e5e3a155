"""Incident events: the typed `Event` rules emit, and the durable event store.

Public API:
    `Event`: one immutable lifecycle update of an incident (``phase``: one of `EVENT_PHASES`),
        ``to_dict()`` / ``Event.from_dict()`` for JSON, ``with_snapshot(path)``.
    `RuleKind`: a rule kind, one of the rule registry's (`campusguard.app.rules.registry`).
    `EventRecorder`: what the event path needs of a store (``record``, ``close``); the writer
        (`campusguard.app.engine.writer.EventWorker`: commit, then alert sinks) takes one.
    `EventStore`: an `EventRecorder` with the phases' writes by name (``add``, ``update``,
        ``end``: each the one upsert ``record`` is) and reads (``query``, ``get``).
    `PhaseFilter(phases)`: the phases a consumer (an alert sink) takes; an unknown one raises.
    `SQLiteEventStore(path)`: the embedded default, WAL mode, ``synchronous=FULL``; an event is
        committed when ``record``/``add`` returns, so report it as raised only after that.
    `PostgresEventStore(url)` (`campusguard.app.events.postgres`, the ``postgres`` extra): the same
        protocols on a PostgreSQL server, for many writers; lost connections are retried.
    `open_event_store(storage)`: the store a ``storage`` config section, a SQLite path or a
        ``postgresql://`` URL names (the one place a store is chosen).
    `StoreUnavailableError`: a store call could not complete within its retry budget.
    `read_events(path)`: the latest state of every event in a SQLite store or a JSONL file.

Lifecycle: a rule emits ``phase="start"`` once, any number of ``"update"`` (new objects,
counts), then one ``"end"``; all share one ``event_id``. Instantaneous events (line
crossings) are emitted once with ``phase="start"`` and ``end_s == start_s``; the store
records them as closed.
"""

from campusguard.app.events.factory import open_event_store
from campusguard.app.events.protocols import EventStore, ReviewableEventStore, StoreUnavailableError
from campusguard.app.events.reader import read_events
from campusguard.app.events.recorder import EventRecorder
from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.events.types import EVENT_PHASES, Event, EventPhase, PhaseFilter, RuleKind

__all__ = [
    "Event",
    "EventPhase",
    "EVENT_PHASES",
    "PhaseFilter",
    "EventRecorder",
    "RuleKind",
    "EventStore",
    "ReviewableEventStore",
    "SQLiteEventStore",
    "StoreUnavailableError",
    "open_event_store",
    "read_events",
]
