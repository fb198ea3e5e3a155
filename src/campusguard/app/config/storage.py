"""The storage section: the event store."""

from __future__ import annotations

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["StorageConfig"]


class StorageConfig(ConfigModel):
    """The event store."""

    sqlite: str = Field(
        "campusguard-events.db",
        title="SQLite file",
        description="SQLite database file (WAL mode) where events are committed.",
        min_length=1,
    )
