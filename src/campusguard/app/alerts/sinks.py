"""The `AlertSink` protocol and the local sinks: stdout, JSON lines, fan-out."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

from campusguard.app.alerts.ledger import DeliveryLedger
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter

__all__ = ["AlertSink", "StdoutSink", "JsonlSink", "MultiSink", "format_event"]

log = logging.getLogger(__name__)


@runtime_checkable
class AlertSink(Protocol):
    """Somewhere to report events. ``send`` must return quickly and never raise on delivery
    problems (those are the sink's to handle); ``close`` flushes."""

    def send(self, event: Event) -> None:
        """Report one lifecycle update (ignored if its phase is not one the sink reports)."""
        ...

    def close(self, timeout_s: float = 5.0) -> None:
        """Flush pending alerts, waiting at most ``timeout_s`` seconds, and release resources."""
        ...


def format_event(event: Event) -> str:
    """One line: ``[phase] camera rule(kind) zone t=start..end ids=[..] classes=[..]``."""
    end = "" if event.end_s is None else f"..{event.end_s:.2f}"
    classes = ",".join(event.class_names) if event.class_names else ",".join(map(str, event.class_ids))
    extra = ""
    if event.count is not None:
        extra += f" count={event.count}"
    if event.direction is not None:
        extra += f" direction={event.direction}"
    return (
        f"[{event.phase}] {event.camera_id} {event.rule_name}({event.rule_kind}) zone={event.zone} "
        f"t={event.start_s:.2f}{end}s ids={list(event.tracker_ids)} classes=[{classes}]{extra} id={event.event_id}"
    )


class StdoutSink:
    """Print one line per event (`format_event`).

    Args:
        stream: text stream (default ``sys.stdout``, looked up at each send).
        phases: lifecycle phases reported.
    """

    def __init__(self, stream: TextIO | None = None, *, phases: Collection[str] = EVENT_PHASES) -> None:
        self.stream = stream
        self.phases = PhaseFilter(phases)
        self._lock = threading.Lock()

    def send(self, event: Event) -> None:
        if not self.phases.accepts(event):
            return
        stream = self.stream or sys.stdout
        with self._lock:
            print(format_event(event), file=stream, flush=True)

    def close(self, timeout_s: float = 5.0) -> None:
        return None


class JsonlSink:
    """Append one JSON object (`Event.to_dict`, ``sequence`` included) per line; each line flushed and fsync'd.

    Args:
        path: the file; its folder is created. Appends to an existing file.
        phases: lifecycle phases written.
        ledger: where the lines written are remembered (`DeliveryLedger`); an update already in
            it is not written again (a restart, a re-read file). None: every update is written.
    """

    def __init__(
        self, path: str | Path, *, phases: Collection[str] = EVENT_PHASES, ledger: DeliveryLedger | None = None
    ) -> None:
        self.path = Path(path)
        self.ledger = ledger
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.phases = PhaseFilter(phases)
        self._lock = threading.Lock()
        self._fh: TextIO | None = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open across sends

    def send(self, event: Event) -> None:
        if not self.phases.accepts(event):
            return
        if self.ledger is not None and self.ledger.delivered(event):
            return
        line = json.dumps(event.to_dict(), default=str) + "\n"
        with self._lock:
            if self._fh is None:
                raise ValueError(f"JsonlSink {self.path} is closed")
            self._fh.write(line)
            self._fh.flush()
            os.fsync(self._fh.fileno())
        if self.ledger is not None:
            self.ledger.record(event)

    def close(self, timeout_s: float = 5.0) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None
        if self.ledger is not None:
            self.ledger.close()


class MultiSink:
    """Send to several sinks; one raising is logged and does not stop the others."""

    def __init__(self, sinks: Sequence[AlertSink]) -> None:
        self.sinks = list(sinks)
        self.errors = 0

    def send(self, event: Event) -> None:
        for sink in self.sinks:
            try:
                sink.send(event)
            except Exception:
                self.errors += 1
                log.exception("alert sink %s failed on event %s", type(sink).__name__, event.event_id)

    def close(self, timeout_s: float = 5.0) -> None:
        for sink in self.sinks:
            try:
                sink.close(timeout_s)
            except Exception:
                self.errors += 1
                log.exception("alert sink %s failed to close", type(sink).__name__)
