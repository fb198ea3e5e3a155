"""The alerts section: where stored events are sent.

Each sink kind declares its section model next to its class (`campusguard.app.alerts.<kind>`: `WebhookSinkConfig` in `campusguard.app.alerts.webhook`);
the union of an ``alerts`` item and `ALERT_SINK_KINDS` are derived here from the sink registry
(`campusguard.app.alerts.registry.SINKS`). An item without ``kind`` is a ``stdout`` sink.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from campusguard.app.alerts.registry import SINKS
from campusguard.app.alerts.spec import SinkConfigBase

__all__ = ["ALERT_SINK_KINDS", "AnyAlertSinkConfig", "SinkConfigBase"]

ALERT_SINK_KINDS: tuple[str, ...] = SINKS.kinds()
"""Every alert sink kind, in registry order."""

if TYPE_CHECKING:
    AnyAlertSinkConfig = SinkConfigBase
else:
    AnyAlertSinkConfig = SINKS.config_union()
"""One ``alerts`` item: the registry model its ``kind`` names (statically, a `SinkConfigBase`)."""
