"""`JsonlSink`: one JSON object per event appended to a file, fsync'd, ledgered."""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Collection
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from campusguard.app.alerts.ledger import DeliveryKey, Ledger, delivery_key
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter
from campusguard.app.infra.diskspace import DiskHealth, disk_health
from campusguard.app.infra.durable import AppendLog

__all__ = ["JSONL", "JsonlSink", "JsonlSinkConfig"]

log = logging.getLogger(__name__)

TAIL_BYTES = 1 << 20
"""How much of an existing file's end `JsonlSink` reads at open for the lines already written."""

def written_keys(path: Path, tail_bytes: int = TAIL_BYTES) -> set[DeliveryKey]:
    """The updates whose lines are in the last ``tail_bytes`` of the JSONL file ``path`` (none when
    it is missing or unreadable); a cut or foreign line is skipped."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(0, size - tail_bytes))
            raw = fh.read()
    except OSError:
        return set()
    lines = raw.split(b"\n")
    if size > tail_bytes:
        lines = lines[1:]  # the first one is cut by the seek
    keys: set[DeliveryKey] = set()
    for line in lines:
        try:
            d = json.loads(line)
            keys.add(delivery_key(str(d["event_id"]), str(d["phase"]), int(d["sequence"])))
        except (ValueError, TypeError, KeyError):
            continue
    return keys


class JsonlSinkConfig(SinkConfigBase):
    """Append one JSON object per event to a file."""

    kind: Literal["jsonl"] = Field("jsonl", title="Kind", description="`jsonl`: append to a JSON-lines file.")
    path: str | None = Field(None, title="Path", description="The file to append to (required).", min_length=1)

    @model_validator(mode="after")
    def _needs(self) -> JsonlSinkConfig:
        if not self.path:
            raise ValueError("a jsonl alert sink needs `path`")
        return self


class JsonlSink:
    """Append one JSON object (`Event.to_dict`, ``sequence`` included) per line; each line fsync'd.

    A line the disk has no room for is not lost and not cut: the file is truncated back to its
    last whole line, the line is kept in memory (at most ``max_pending``; beyond that the oldest
    are dropped and counted) and written, in order, before the next one; ``close`` tries once
    more. The full volume is reported to ``disk`` (one rate-limited log line), never raised.
    An update goes into the ``ledger`` only once its line is on disk. The file is its own proof
    too: the lines already at its end (its last `TAIL_BYTES`, read at open) are not written again,
    so a line whose ledger record was lost (the ledger's PostgreSQL went down between the line and
    its record, then the process was killed) is not repeated by the restart; its record is made then.

    Args:
        path: the file; its folder is created. Appends to an existing file.
        phases: lifecycle phases written.
        max_pending: lines kept in memory while the disk is full.
        disk: where full volumes are reported (default: the process's `disk_health()`).
        ledger: where the lines written are remembered (`DeliveryLedger`); an update already in
            it is not written again (a restart, a re-read file). None: every update is written.

    Attributes:
        failed_writes: writes that failed (each retried with the next line).
        dropped: lines dropped because more than ``max_pending`` were waiting.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        phases: Collection[str] = EVENT_PHASES,
        max_pending: int = 10_000,
        disk: DiskHealth | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.path = Path(path)
        self.ledger = ledger
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.phases = PhaseFilter(phases)
        self.max_pending = max_pending
        self.disk = disk or disk_health()
        self.failed_writes = 0
        self.dropped = 0
        self._pending: deque[tuple[Event, bytes]] = deque()
        self._lock = threading.Lock()
        self._log: AppendLog | None = AppendLog(self.path)  # retention may trim it (a new file renamed over)
        self._written = written_keys(self.path) if ledger is not None else set()  # lines of earlier runs

    def send(self, event: Event) -> None:
        if not self.phases.accepts(event):
            return
        if self.ledger is not None and self.ledger.delivered(event):
            return
        if self.ledger is not None and delivery_key(event.event_id, event.phase, event.sequence) in self._written:
            self.ledger.record(event)  # written by an earlier run that could not record it
            return
        line = (json.dumps(event.to_dict(), default=str) + "\n").encode("utf-8")
        with self._lock:
            if self._log is None:
                raise ValueError(f"JsonlSink {self.path} is closed")
            if len(self._pending) >= self.max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append((event, line))
            self._flush()

    def _flush(self) -> None:
        """Write the waiting lines in one append (all or none); they stay waiting on an error."""
        if not self._pending or self._log is None:
            return
        try:
            self._log.append(b"".join(line for _, line in self._pending))
        except OSError as exc:
            self.failed_writes += 1
            self.disk.failed("alert log line", self.path, exc)
            return
        if self.failed_writes:
            self.disk.ok(self.path)
        if self.ledger is not None:
            for event, _ in self._pending:
                self.ledger.record(event)
        self._pending.clear()

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            if self._log is not None:
                self._flush()
                if self._pending:
                    log.error(
                        "%d alert line(s) could not be written to %s before the stop", len(self._pending), self.path
                    )
                self._log.close()
                self._log = None
        if self.ledger is not None:
            self.ledger.close()


def _build(cfg: JsonlSinkConfig, ctx: SinkContext) -> JsonlSink:
    assert cfg.path is not None  # checked by the model
    ledger = ctx.open_ledger(f"jsonl:{Path(cfg.path).resolve()}")
    return JsonlSink(cfg.path, phases=cfg.phases, ledger=ledger)


def _files(cfg: JsonlSinkConfig, sqlite: Path) -> SinkFiles:
    return SinkFiles(log=Path(cfg.path) if cfg.path else None)


JSONL = SinkEntry(JsonlSinkConfig, _build, _files, example={"path": "alerts.jsonl"}, order=20)
