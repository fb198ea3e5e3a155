"""`open_event_store`: the one place an event store is chosen and opened (watch, serve, events, scan)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from campusguard.app.events.protocols import EventDatabase
from campusguard.app.events.settings import StorageSettings
from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.events.urls import is_postgres_url, postgres_url_problem
from campusguard.errors import InvalidInputError

if TYPE_CHECKING:
    from campusguard.app.events.postgres import RetryPolicy

__all__ = ["open_event_store", "storage_backend"]


def storage_backend(storage: StorageSettings) -> Literal["sqlite", "postgresql"]:
    """The field of the storage section that names the store in use (for error locations)."""
    return "postgresql" if storage.postgresql else "sqlite"


def open_event_store(storage: StorageSettings | str | Path, *, read_only: bool = False) -> EventDatabase:
    """Open the event store a storage section (or a SQLite path or PostgreSQL URL) names.

    Args:
        storage: the ``storage`` config section (PostgreSQL when ``postgresql`` is set, with its
            ``retry`` settings; else the SQLite file), or a path / ``postgresql://`` URL as
            ``campusguard events --db`` takes it.
        read_only: only read (no migration; a missing or outdated store is refused).

    Raises:
        InvalidInputError: bad URL or file, a schema newer than this CampusGuard.
        StoreUnavailableError: the PostgreSQL server does not answer.
        MissingDependencyError: PostgreSQL without psycopg installed (the ``postgres`` extra).
    """
    if isinstance(storage, str | Path):
        target = str(storage)
        if is_postgres_url(target):
            return _postgres(target, read_only=read_only)
        return SQLiteEventStore(target, read_only=read_only)
    if storage.postgresql:
        from campusguard.app.events.postgres import RetryPolicy

        return _postgres(storage.postgresql, read_only=read_only, retry=RetryPolicy.of(storage.retry))
    return SQLiteEventStore(storage.sqlite, read_only=read_only)


def _postgres(url: str, *, read_only: bool, retry: RetryPolicy | None = None) -> EventDatabase:
    problem = postgres_url_problem(url)
    if problem is not None:
        raise InvalidInputError(f"PostgreSQL URL {problem}")
    from campusguard.app.events.postgres import PostgresEventStore

    return PostgresEventStore(url, read_only=read_only, retry=retry)
