"""The alerts section: where stored events are sent (stdout, a JSON-lines file, a webhook, an MQTT broker)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Discriminator, Field, Tag, model_validator

from campusguard.app.config.base import ConfigModel
from campusguard.app.events.types import EVENT_PHASES, EventPhase

__all__ = [
    "ALERT_SINK_KINDS",
    "AlertSinkConfig",
    "AnyAlertSinkConfig",
    "MqttSinkConfig",
    "WEBHOOK_BACKOFF_S",
    "WEBHOOK_RETRIES",
    "WEBHOOK_TIMEOUT_S",
]

# the webhook's defaults, here and in `campusguard.app.alerts.webhook.WebhookSink` alike
WEBHOOK_RETRIES = 5
WEBHOOK_BACKOFF_S = 0.5
WEBHOOK_TIMEOUT_S = 5.0

AlertPhase = EventPhase


def _start_and_end() -> list[AlertPhase]:
    return ["start", "end"]


def _all_phases() -> list[AlertPhase]:
    return list(EVENT_PHASES)


class AlertSinkConfig(ConfigModel):
    """Where raised events are sent, after they are stored."""

    kind: Literal["stdout", "jsonl", "webhook"] = Field(
        "stdout", title="Kind", description="`stdout`, `jsonl` (append to a file) or `webhook` (HTTP POST)."
    )
    path: str | None = Field(None, title="Path", description="jsonl: the file to append to.")
    url: str | None = Field(
        None, title="URL", description="webhook: the receiver's http(s) URL.", pattern=r"^https?://"
    )
    timeout_s: float = Field(
        WEBHOOK_TIMEOUT_S, gt=0, le=300, title="Timeout", description="webhook: seconds per request."
    )
    retries: int = Field(
        WEBHOOK_RETRIES,
        ge=0,
        le=100,
        title="Retries",
        description="webhook: attempts after the first before the alert goes to the dead-letter file.",
    )
    backoff_s: float = Field(
        WEBHOOK_BACKOFF_S,
        ge=0,
        le=600,
        title="Back-off",
        description="webhook: first delay between retries, doubled each time.",
    )
    dead_letter: str | None = Field(
        None, title="Dead-letter file", description="webhook: JSON-lines file for alerts that could not be delivered."
    )
    phases: list[AlertPhase] = Field(
        default_factory=_start_and_end,
        title="Phases",
        description="Event lifecycle phases sent to this sink.",
    )

    @model_validator(mode="after")
    def _needs(self) -> AlertSinkConfig:
        if self.kind == "jsonl" and not self.path:
            raise ValueError("a jsonl alert sink needs `path`")
        if self.kind == "webhook" and not self.url:
            raise ValueError("a webhook alert sink needs `url`")
        return self


class MqttSinkConfig(ConfigModel):
    """Publish events and per-camera/rule state to an MQTT broker (topics: docs/mqtt.md)."""

    kind: Literal["mqtt"] = Field("mqtt", title="Kind", description="`mqtt`: publish to an MQTT broker.")
    host: str = Field(
        "127.0.0.1", title="Broker host", description="MQTT broker host name or address.", min_length=1, max_length=253
    )
    port: int = Field(1883, ge=1, le=65535, title="Broker port", description="MQTT broker TCP port.")
    prefix: str = Field(
        "campusguard",
        title="Topic prefix",
        description="First topic level(s): `<prefix>/events`, `<prefix>/<camera>/<rule>`, `<prefix>/available`.",
        min_length=1,
        max_length=128,
        pattern=r"^[^+#]+$",
    )
    client_id: str = Field(
        "", title="Client id", description="MQTT client id; empty lets the broker assign one.", max_length=128
    )
    username: str | None = Field(None, title="User name", description="Broker user name, if it needs one.")
    password: str | None = Field(None, title="Password", description="Broker password.")
    qos: Literal[1, 2] = Field(1, title="QoS", description="MQTT quality of service: 1 (at least once) or 2.")
    keepalive_s: int = Field(30, ge=5, le=3600, title="Keep-alive", description="MQTT keep-alive in seconds.")
    reconnect_min_s: int = Field(
        1, ge=1, le=600, title="First reconnect delay", description="Seconds before the first reconnect attempt."
    )
    reconnect_max_s: int = Field(
        30, ge=1, le=3600, title="Longest reconnect delay", description="Reconnect delays double up to this (seconds)."
    )
    outbox: str | None = Field(
        None,
        title="Outbox file",
        description="SQLite file keeping messages until the broker acknowledges them; default beside the event store.",
    )
    max_outbox: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        title="Outbox size",
        description="Most unacknowledged messages kept; beyond it the oldest are dropped (and logged).",
    )
    pulse_s: float = Field(
        5.0,
        gt=0,
        le=3600,
        title="Pulse",
        description=(
            "Seconds an update of a rule without an end phase (a line crossing) counts in its retained state "
            "topic; the state returns to 0 once this passes without one."
        ),
    )
    phases: list[AlertPhase] = Field(
        default_factory=_all_phases,
        title="Phases",
        description="Event lifecycle phases published.",
    )

    @model_validator(mode="after")
    def _delays(self) -> MqttSinkConfig:
        if self.reconnect_min_s > self.reconnect_max_s:
            raise ValueError("reconnect_min_s must not exceed reconnect_max_s")
        return self


ALERT_SINK_KINDS: tuple[str, ...] = ("stdout", "jsonl", "webhook", "mqtt")


def _alert_sink_tag(value: Any) -> str:
    kind = value.get("kind", "stdout") if isinstance(value, dict) else getattr(value, "kind", "stdout")
    return "mqtt" if kind == "mqtt" else "other"


def _known_alert_sink_kind(value: Any) -> Any:
    kind = value.get("kind", "stdout") if isinstance(value, dict) else None
    if isinstance(value, dict) and kind not in ALERT_SINK_KINDS:
        raise ValueError(f"unknown alert sink kind {kind!r}; expected {', '.join(ALERT_SINK_KINDS)}")
    return value


AnyAlertSinkConfig = Annotated[
    Annotated[AlertSinkConfig, Tag("other")] | Annotated[MqttSinkConfig, Tag("mqtt")],
    Discriminator(_alert_sink_tag),
    BeforeValidator(_known_alert_sink_kind),
]
