"""`EventSpool`: event updates the store could not take before a stop, kept on local disk until the next start.

When CampusGuard stops while the event store is unavailable (PostgreSQL down), the pipeline's
event worker writes every update it could not commit to this file instead of losing it, and
the next start replays them into the store, in order, before any new update (see
`campusguard.app.engine.writer.EventWorker`).

Format: JSON lines, one `Event.to_dict` object per line (as `JsonlSink` writes them), in the
order the updates were raised. `append` adds lines and fsyncs the file (and, for a new file, its
folder) before it returns, so a spooled update survives a crash or a power cut. A crash in the
middle of an append can leave a cut last line: `read` reports it in one log line and skips it
(that update had not been spooled). `rewrite` replaces the whole file atomically (temporary
file, fsync, ``os.replace``); the worker uses it only to drop the lines an interrupted replay
has already committed, so none is replayed, or alerted, twice. Where the file lives is the storage
section's business (`StorageConfig.spool_path`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from campusguard.app.events.types import Event
from campusguard.app.infra.durable import fsync_dir, replace_durably

__all__ = ["EventSpool"]

log = logging.getLogger("campusguard.app.events.spool")


def _line(event: Event) -> bytes:
    return (json.dumps(event.to_dict(), default=str) + "\n").encode("utf-8")


class EventSpool:
    """An append-only JSON-lines file of event updates waiting for the store.

    Args:
        path: the spool file; its folder is created on the first write.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def exists(self) -> bool:
        """True while a spool file with something in it is on disk."""
        return self.path.is_file() and self.path.stat().st_size > 0

    def append(self, events: Sequence[Event]) -> None:
        """Append ``events`` in order, one line each; durable (fsync'd) when this returns.

        Raises:
            OSError: the file cannot be written (disk full, no permission).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        new = not self.path.exists()
        with open(self.path, "a+b") as fh:
            if fh.tell() > 0:
                fh.seek(-1, os.SEEK_END)
                if fh.read(1) != b"\n":  # a line cut by a crash stays a line of its own
                    fh.write(b"\n")
            fh.write(b"".join(_line(e) for e in events))
            fh.flush()
            os.fsync(fh.fileno())
        if new:
            fsync_dir(self.path.parent)

    def read(self) -> list[Event]:
        """The spooled updates in order (none when there is no file).

        A line that is not an event update (the last one cut by a crash while it was written,
        or a damaged one) is reported in one log line and skipped.

        Raises:
            OSError: the file exists but cannot be read.
        """
        if not self.path.is_file():
            return []
        lines = self.path.read_bytes().split(b"\n")
        events: list[Event] = []
        for lineno, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
                if not isinstance(data, dict):
                    raise TypeError(f"a JSON {type(data).__name__}, not an object")
                events.append(Event.from_dict(data))
            except (ValueError, TypeError) as exc:
                cut = lineno == len(lines)  # no newline after it: the write was cut
                what = "is cut short (CampusGuard stopped while writing it)" if cut else "is not an event update"
                log.error("event spool %s: line %d %s; skipped (%s)", self.path, lineno, what, str(exc).splitlines()[0])
        return events

    def rewrite(self, events: Sequence[Event]) -> None:
        """Replace the spool by ``events`` atomically (none: remove it); durable when this returns."""
        if not events:
            self.remove()
            return
        replace_durably(self.path, b"".join(_line(e) for e in events))

    def truncate(self) -> None:
        """Empty the spool (every line is committed) without removing it; durable when this returns."""
        if self.path.exists():
            with open(self.path, "r+b") as fh:
                fh.truncate(0)
                fh.flush()
                os.fsync(fh.fileno())

    def remove(self) -> None:
        """Delete the spool (every line is committed); durable when this returns."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(self.path.parent)
