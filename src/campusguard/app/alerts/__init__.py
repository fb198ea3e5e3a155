"""Alert sinks: where raised events are reported, after the event store has committed them.

Public API:
    `AlertSink`: protocol, ``send(event) -> None`` (never blocks on the network) and
        ``close(timeout_s=5.0)`` (flush what it can; nothing is dropped silently).
    `StdoutSink(stream=sys.stdout)`: one line per event.
    `JsonlSink(path)`: one `Event.to_dict` JSON object per line, flushed and fsync'd per event.
    `WebhookSink(url, retries=5, backoff_s=0.5, dead_letter_path=..., timeout_s=5.0, ...)`: HTTP
        POST of the event JSON from a background thread with a bounded queue; after the retries
        fail (or when the queue is full) the alert goes to a dead-letter JSONL file; dead letters
        are re-driven after the next successful delivery.
    `MultiSink(sinks)`: sends to several sinks, isolating a failing one.
    `format_event(event) -> str`: the one-line text form.

`campusguard.app.alerts.ledger.DeliveryLedger`: what a sink delivered (event id, phase,
sequence), on disk, so a restart repeats nothing; the JSONL and webhook sinks take one as
``ledger``, the MQTT sink keeps its own in the outbox file.

Every sink takes ``phases`` (default all of ``start``, ``update``, ``end``) to choose which
lifecycle updates it reports.
"""

from campusguard.app.alerts.sinks import AlertSink, JsonlSink, MultiSink, StdoutSink, format_event
from campusguard.app.alerts.webhook import WebhookSink

__all__ = ["AlertSink", "StdoutSink", "JsonlSink", "WebhookSink", "MultiSink", "format_event"]
