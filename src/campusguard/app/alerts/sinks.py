"""`MultiSink`: the fan-out to several sinks (each an `AlertSink`, `campusguard.app.alerts.protocol`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.events.types import Event

__all__ = ["MultiSink"]

log = logging.getLogger(__name__)


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
