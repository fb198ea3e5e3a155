"""The `AlertSink` protocol: what the event writer, the escalator and the wiring need of a sink.

A leaf beside the sinks that implement it, so that a sink module, the registry and the writer can
name it without importing one another.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from campusguard.app.events.types import Event

__all__ = ["AlertSink", "SinkHealth"]


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


@runtime_checkable
class SinkHealth(Protocol):
    """A sink that keeps connections (MQTT's broker) reports them itself: the console's ``/readyz`` and
    metrics ask this, never which kind of sink it is."""

    def health(self) -> dict[str, bool]:
        """Each connection the sink keeps (named by its endpoint, ``host:port``) and whether it is up now."""
        ...
