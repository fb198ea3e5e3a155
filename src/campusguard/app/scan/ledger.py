"""`ScanLedger`: which recordings a scan has finished, so a killed scan restarts where it stopped.

A recording is marked done (keyed by resolved path, size, modification time and camera) only
after every event it raised is committed to the event store; a recording that was running when
the scan died is simply run again, and its deterministic event ids upsert the same rows. A file
that changed since (another size or mtime) is scanned again.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from campusguard.app.infra.sqlitedb import (
    SQLiteFile,
    apply_migrations,
    connect_durable,
    schema_version,
    write_transaction,
)
from campusguard.app.scan.recordings import Recording
from campusguard.errors import InvalidInputError

__all__ = ["ScanLedger", "LedgerEntry"]

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS scanned (
    path        TEXT NOT NULL,
    size        INTEGER NOT NULL,
    mtime_ns    INTEGER NOT NULL,
    camera_id   TEXT NOT NULL,
    frames      INTEGER NOT NULL,
    events      INTEGER NOT NULL,
    finished_at TEXT NOT NULL,
    PRIMARY KEY (path, size, mtime_ns, camera_id)
)
"""
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}


@dataclass(frozen=True)
class LedgerEntry:
    """A finished recording: frames processed and event updates committed."""

    path: str
    camera_id: str
    frames: int
    events: int
    finished_at: str


class ScanLedger(SQLiteFile):
    """The scan state file (SQLite, WAL, ``synchronous=FULL``): one row per finished recording.

    Raises:
        InvalidInputError: the file cannot be opened, is not a ledger, or is from a newer version.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self._conn = connect_durable(self.path)
            current = schema_version(self._conn)
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables - {"scanned"}:
                raise InvalidInputError(
                    f"{self.path}: not a scan state file (it holds other tables); choose another --state"
                )
            if current > max(_MIGRATIONS):
                raise InvalidInputError(f"{self.path}: scan state of a newer campusguard (schema {current})")
            if current < max(_MIGRATIONS):
                apply_migrations(self._conn, _MIGRATIONS, current)
        except sqlite3.DatabaseError as exc:
            self._close_quietly()
            raise InvalidInputError(f"{self.path}: cannot open the scan state file: {exc}") from None
        except InvalidInputError:
            self._close_quietly()
            raise

    def _close_quietly(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            conn.close()
            self._conn = None  # type: ignore[assignment]

    def is_done(self, recording: Recording, camera_id: str) -> bool:
        """True if this recording, unchanged, was finished for ``camera_id``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT 1 FROM scanned WHERE path = ? AND size = ? AND mtime_ns = ? AND camera_id = ?",
                (recording.key, recording.size, recording.mtime_ns, camera_id),
            ).fetchone()
        return row is not None

    def mark_done(self, recording: Recording, camera_id: str, frames: int, events: int) -> None:
        """Record a finished recording (durable when this returns); call after its events are committed."""
        now = datetime.now(UTC).isoformat(timespec="seconds")
        with self._lock, write_transaction(self._conn):
            self._conn.execute(
                "INSERT OR REPLACE INTO scanned VALUES (?, ?, ?, ?, ?, ?, ?)",
                (recording.key, recording.size, recording.mtime_ns, camera_id, int(frames), int(events), now),
            )

    def entries(self) -> list[LedgerEntry]:
        """Every finished recording, oldest first."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT path, camera_id, frames, events, finished_at FROM scanned ORDER BY finished_at, path"
            ).fetchall()
        return [LedgerEntry(*row) for row in rows]
