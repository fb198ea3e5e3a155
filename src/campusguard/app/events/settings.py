"""What `open_event_store` reads of a ``storage`` section: the store's own view of its settings.

Structural protocols, so that the event store needs nothing of the config package (which imports
the rule and sink registries, and through them this package): `campusguard.app.config.storage`'s
`StorageConfig` satisfies `StorageSettings` as it is.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["RetrySettings", "StorageSettings"]


class RetrySettings(Protocol):
    """How a PostgreSQL store call retries a lost connection (seconds; ``factor``: the back-off's growth)."""

    @property
    def budget_s(self) -> float: ...
    @property
    def initial_s(self) -> float: ...
    @property
    def max_s(self) -> float: ...
    @property
    def factor(self) -> float: ...
    @property
    def connect_timeout_s(self) -> float: ...


class StorageSettings(Protocol):
    """The event store a storage section names: a PostgreSQL URL with its retries, else a SQLite file."""

    @property
    def sqlite(self) -> str: ...
    @property
    def postgresql(self) -> str | None: ...
    @property
    def retry(self) -> RetrySettings: ...
