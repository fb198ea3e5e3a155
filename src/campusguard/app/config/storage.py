"""The storage section: the event store (SQLite file or PostgreSQL server)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from campusguard.app.config.base import ConfigModel
from campusguard.app.config.cameras import ReconnectConfig
from campusguard.app.events.urls import postgres_url_problem

__all__ = ["StorageConfig", "StoreRetryConfig"]


class StoreRetryConfig(ReconnectConfig):
    """How a PostgreSQL store call retries a lost connection (exponential back-off, bounded)."""

    initial_s: float = Field(0.1, gt=0, le=60, title="First delay", description="Seconds before the first retry.")
    max_s: float = Field(
        2.0, gt=0, le=600, title="Longest delay", description="Upper bound of the delay between retries, seconds."
    )
    budget_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        title="Retry budget",
        description=(
            "Seconds one store call keeps retrying before it fails; the pipeline then keeps the "
            "event and tries again, so nothing is dropped (0: one attempt)."
        ),
    )
    connect_timeout_s: float = Field(
        5.0, ge=2, le=300, title="Connect timeout", description="Longest wait for one connection attempt, seconds."
    )


class StorageConfig(ConfigModel):
    """The event store: a SQLite file (default) or a PostgreSQL server."""

    sqlite: str = Field(
        "campusguard-events.db",
        title="SQLite file",
        description=(
            "SQLite database file (WAL mode) where events are committed when `postgresql` is not set; "
            "its folder also holds the MQTT outbox, webhook dead letters, the event spool and the console's media."
        ),
        min_length=1,
    )
    postgresql: str | None = Field(
        None,
        title="PostgreSQL URL",
        description=(
            "Commit events to this PostgreSQL server instead of SQLite: postgresql://user@host:port/database "
            "(add ?options=-csearch_path%3Dname for a schema). Passwords belong in PGPASSWORD or ~/.pgpass, "
            "not in this file."
        ),
        min_length=1,
    )
    media: str | None = Field(
        None,
        title="Media folder",
        description=(
            "Folder of the incidents' snapshots and clips (`serve`); with several nodes, a folder every node mounts "
            "(NFS or SMB) so any node's console serves any incident's media. Default: `media` beside the `sqlite` file."
        ),
        min_length=1,
    )
    retry: StoreRetryConfig = Field(
        default_factory=StoreRetryConfig,
        title="PostgreSQL retries",
        description="Back-off of PostgreSQL calls whose connection was lost.",
    )

    spool: str | None = Field(
        None,
        title="Spool file",
        description=(
            "JSON-lines file where event updates the store could not commit before a stop are kept "
            "(fsync'd) and replayed from at the next start; default: beside the `sqlite` file, "
            "with the suffix .spool.jsonl."
        ),
        min_length=1,
    )

    tracks: str | None = Field(
        None,
        title="Tracks folder",
        description=(
            "Folder of the cameras' track files (what the rules consumed on every processed frame: ids, classes, "
            "boxes, times; a few MB per camera-hour of a busy scene), which `campusguard replay` runs changed "
            "rules over; default: `tracks` beside the `sqlite` file. Kept for `retention.tracks`."
        ),
        min_length=1,
    )
    record_tracks: bool = Field(
        True,
        title="Record tracks",
        description="Keep every camera's tracks for `campusguard replay` (watch and serve); false: keep none.",
    )

    def tracks_path(self) -> Path:
        """The track files' folder: `tracks`, else ``tracks`` beside the `sqlite` file."""
        return Path(self.tracks) if self.tracks else Path(self.sqlite).parent / "tracks"

    def spool_path(self) -> Path:
        """The event spool file: `spool`, else the default beside the `sqlite` file (the folder of
        CampusGuard's local state)."""
        return Path(self.spool) if self.spool else Path(self.sqlite).with_suffix(".spool.jsonl")

    @field_validator("postgresql")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None:
            problem = postgres_url_problem(value)
            if problem is not None:
                raise ValueError(problem)
        return value
