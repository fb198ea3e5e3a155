"""Alert sinks: where raised events are reported, after the event store has committed them.

Public API:
    `AlertSink` (`protocol`): protocol, ``send(event) -> None`` (never blocks on the network) and
        ``close(timeout_s=5.0)`` (flush what it can; nothing is dropped silently).
    `StdoutSink(stream=sys.stdout)`: one line per event.
    `JsonlSink(path)`: one `Event.to_dict` JSON object per line, flushed and fsync'd per event.
    `WebhookSink(url, dead_letter_path=..., backoff_s=0.5, max_age_s=86400, parallel=4, ...)`: HTTP
        POST of the event JSON through a persisted outbox (`outbox.Outbox`), in parallel, with
        back-off; dead letters after ``max_age_s``, re-driven after a later successful delivery.
    `EmailSink(host, port, sender=..., to=[...], ...)`: email over SMTP (one each, or a digest
        for a storm) with the (redacted) snapshot attached, through the same outbox.
    `MqttSink` (`mqtt`): MQTT, through the same outbox.
    `MultiSink(sinks)`: sends to several sinks, isolating a failing one.
    `format_event(event) -> str`: the one-line text form.

`campusguard.app.alerts.registry.SINKS`: the sink registry, one `spec.SinkEntry` per kind (its
section model, builder and files), declared in the sink's own module; the config's ``alerts``
union, the wiring and retention's files are derived from it. A new sink is its module and one
line in the registry.

`campusguard.app.alerts.ledger.DeliveryLedger`: what a sink delivered (event id, phase,
sequence), on disk, so a restart repeats nothing; the JSONL and webhook sinks take one as
``ledger``; the outbox of the MQTT, webhook and email sinks also keeps the updates put into it.

Every sink takes ``phases`` (default all of ``start``, ``update``, ``end``) to choose which
lifecycle updates it reports.
"""

from campusguard.app.alerts.jsonl import JsonlSink
from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.alerts.sinks import MultiSink
from campusguard.app.alerts.stdout import StdoutSink, format_event
from campusguard.app.alerts.webhook import WebhookSink

__all__ = ["AlertSink", "StdoutSink", "JsonlSink", "WebhookSink", "MultiSink", "format_event"]
