"""`read_events`: the latest state of every incident in an events file, a SQLite event store or the
JSON lines an alert sink wrote (``campusguard events``, evaluation, the demo)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.events.types import Event
from campusguard.errors import InvalidInputError

__all__ = ["read_events", "is_sqlite_file"]


def is_sqlite_file(path: str | Path) -> bool:
    """True if ``path`` starts with the SQLite 3 file header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _collapse(events: Iterable[Event]) -> list[Event]:
    """Latest state per ``event_id`` from a sequence of lifecycle updates, in first-seen order."""
    latest: dict[str, Event] = {}
    for ev in events:
        latest[ev.event_id] = ev
    return list(latest.values())


def read_events(path: str | Path) -> list[Event]:
    """Latest state of every incident in a SQLite event store or a JSON-lines file of events.

    Args:
        path: an `SQLiteEventStore` file, or a JSONL file with one `Event.to_dict` per line
            (as `campusguard.app.alerts.JsonlSink` writes; lines may be wrapped as
            ``{"event": {...}}``).

    Raises:
        InvalidInputError: the file is missing or a line is not an event.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"events file {path} does not exist")
    if is_sqlite_file(path):
        store = SQLiteEventStore(path, read_only=True)
        try:
            return store.query()
        finally:
            store.close()
    events: list[Event] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if "event" in data and isinstance(data["event"], dict):
                    data = data["event"]
                events.append(Event.from_dict(data))
            except (ValueError, TypeError) as exc:
                raise InvalidInputError(f"{path}:{lineno}: not an event ({exc})") from exc
    return _collapse(events)
