"""The `AlertSink` protocol and the fan-out to several sinks (`MultiSink`); the stdout and JSON-lines
sinks live in their own modules (`stdout`, `jsonl`) and are re-exported here."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from campusguard.app.alerts.jsonl import JsonlSink
from campusguard.app.alerts.stdout import StdoutSink, format_event
from campusguard.app.events.types import Event

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
