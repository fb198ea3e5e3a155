"""`send_each` and `MultiSink`: the fan-out of an update to several sinks (each an `AlertSink`,
`campusguard.app.alerts.protocol`), one failing sink never stopping the others."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.types import Event

__all__ = ["MultiSink", "send_each"]

log = logging.getLogger(__name__)


def send_each(sinks: Sequence[AlertSink], event: Event, *, relaying: bool = False) -> int:
    """Hand ``event`` to every sink; a sink that raises is logged and the others still get it.
    Returns how many raised.

    ``relaying`` (the alert relay of a PostgreSQL store hands the update on): a sink that could not
    take it because its shared outbox is unreachable (`StoreUnavailableError`) raises it at once,
    so the relay keeps the update and hands it on again later (the sinks that took it put it in once).
    """
    errors = 0
    for sink in sinks:
        try:
            sink.send(event)
        except StoreUnavailableError:
            if relaying:
                raise
            errors += 1
            log.exception("alert sink %s failed on event %s", type(sink).__name__, event.event_id)
        except Exception:
            errors += 1
            log.exception("alert sink %s failed on event %s", type(sink).__name__, event.event_id)
    return errors


class MultiSink:
    """Send to several sinks; one raising is logged and does not stop the others."""

    def __init__(self, sinks: Sequence[AlertSink]) -> None:
        self.sinks = list(sinks)
        self.errors = 0

    def send(self, event: Event) -> None:
        self.errors += send_each(self.sinks, event)

    def close(self, timeout_s: float = 5.0) -> None:
        for sink in self.sinks:
            try:
                sink.close(timeout_s)
            except Exception:
                self.errors += 1
                log.exception("alert sink %s failed to close", type(sink).__name__)
