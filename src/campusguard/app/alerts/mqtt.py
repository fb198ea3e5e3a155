"""`MqttSink`: events and per-camera/rule state published to an MQTT broker (paho-mqtt 2.x).

Topic layout (``prefix`` defaults to ``campusguard``), modelled on Frigate's:

- ``<prefix>/available``: ``online`` / ``offline``, retained; ``offline`` is also the broker's
  last will, so consumers see a crashed process as unavailable.
- ``<prefix>/events``: one JSON object per lifecycle update,
  ``{"type": "new"|"update"|"end", "before": <previous event JSON or null>, "after": <event JSON>}``
  where the event JSON is `Event.to_dict`.
- ``<prefix>/<camera>/<rule>``: the number of open incidents of that rule on that camera as a
  decimal string, retained (``"1"`` while an intrusion is open, ``"0"`` after it ends). A rule
  without an end phase (``line_crossing``: each crossing is one instantaneous update) counts
  its updates of the last ``pulse_s`` seconds instead, so its state returns to ``"0"`` once
  ``pulse_s`` passes without one (a pulse; never a count that only goes up).

Topic levels are the camera id and the rule name with ``/``, ``+``, ``#`` replaced by ``_``.

Delivery is at least once (QoS 1 by default). Every message is first committed to an outbox
(a SQLite file) and removed only when the broker acknowledges it, so an alert survives a broker
restart, a network outage and a restart of this process (the next `MqttSink` on the same outbox
publishes what is left). The outbox is bounded: past ``max_outbox`` messages the oldest are
dropped with an error in the log and counted in ``dropped``. ``send`` never waits for the network;
paho's network thread reconnects with exponential back-off between ``reconnect_min_s`` and
``reconnect_max_s``. A broker not reachable within ``connect_wait_s`` of the start is one warning
line (the messages wait in the outbox); `MqttSink.connected` tells the console (``/readyz``,
``campusguard_mqtt_connected``).

On several nodes sharing PostgreSQL (``storage.postgresql``), the outbox is the site's: the rows of
the shared ``alert_outbox`` table (`campusguard.app.alerts.postgres.outbox.PgOutbox`), claimed in
batches of half the in-flight window with ``FOR UPDATE SKIP LOCKED`` while the node is connected to
the broker, deleted as the broker acknowledges them, given back on a disconnect; a node that dies
ends its session and its claims with it, so any live node publishes what it left (at least once:
the copies a dead node's socket still delivered are dropped by ``event_id`` and ``sequence``). The
state topics are then the site's counts, read from the database by the one node holding the sink's
advisory lock (`campusguard.app.alerts.postgres.retained.SiteRetainedState`), and ``available`` is
answered ``online`` by the live nodes when another's last will says ``offline``.

Each update is published once: the outbox file also holds the ledger of the updates put into it
(``event_id``, ``phase``, ``sequence``, committed in the same transaction as their messages), so a
restart or a re-read file that raises an update again does not publish it again. The event JSON
carries ``sequence`` (`Event`), so a consumer drops the copy QoS 1 may deliver twice.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from campusguard.app.alerts.outbox import Outbox, OutboxStore
from campusguard.app.alerts.sender import DeadLetters, OutboxSender
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles, all_phases
from campusguard.app.events.types import EVENT_PHASES, Event, LifecyclePhase, PhaseFilter
from campusguard.app.infra.configmodel import ConfigModel
from campusguard.app.infra.secrets import redact_text, resolve_secret
from campusguard.app.infra.throttle import OutageLog
from campusguard.errors import InvalidInputError, require

if TYPE_CHECKING:
    from campusguard.app.alerts.postgres.retained import SiteRetainedState

__all__ = ["MQTT", "MqttSink", "MqttSinkConfig", "topic_level"]

log = logging.getLogger(__name__)

_EVENT_TYPES = {"start": "new", "update": "update", "end": "end", "escalation": "escalation"}
_MAX_BEFORE_KEPT = 10_000
"""On nodes, the most incidents whose last published JSON is kept for ``before``: another node may
publish an incident's end, so this node never hears of it; the oldest are forgotten past this."""


class MqttTlsConfig(ConfigModel):
    """TLS to the broker (port 8883 by convention): the CA that signed its certificate, and this
    client's certificate and key when the broker asks for one."""

    ca: str | None = Field(
        None,
        title="CA file",
        description="PEM file of the CA(s) to trust; none: the system's trust store.",
        min_length=1,
    )
    cert: str | None = Field(None, title="Client certificate", description="PEM client certificate file.", min_length=1)
    key: str | None = Field(None, title="Client key", description="PEM private key file of `cert`.", min_length=1)

    @model_validator(mode="after")
    def _pair(self) -> MqttTlsConfig:
        if (self.cert is None) != (self.key is None):
            raise ValueError("give both `cert` and `key` for a client certificate, or neither")
        return self


class MqttSinkConfig(SinkConfigBase):
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
    password: str | None = Field(
        None, title="Password", description="Broker password (prefer `password_env` or `password_file`)."
    )
    password_env: str | None = Field(
        None,
        title="Password variable",
        description="Environment variable holding the broker password.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    password_file: str | None = Field(
        None, title="Password file", description="File whose first line is the broker password.", min_length=1
    )
    tls: MqttTlsConfig | None = Field(
        None,
        title="TLS",
        description="Connect over TLS (`{}` trusts the system's CAs; `ca`, `cert`, `key` are PEM files).",
    )
    dead_letter: str | None = Field(
        None,
        title="Dead-letter file",
        description="JSON-lines file for alerts that cannot be published; default beside the event store.",
    )
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
    phases: list[LifecyclePhase] = Field(
        default_factory=all_phases,
        title="Phases",
        description="Event lifecycle phases published.",
    )

    @model_validator(mode="after")
    def _delays(self) -> MqttSinkConfig:
        if self.reconnect_min_s > self.reconnect_max_s:
            raise ValueError("reconnect_min_s must not exceed reconnect_max_s")
        ways = [n for n in ("password", "password_env", "password_file") if getattr(self, n)]
        if len(ways) > 1:
            raise ValueError(f"give the broker password one way, not {' and '.join(ways)}")
        if ways and not self.username:
            raise ValueError(f"`{ways[0]}` needs `username`")
        return self


def topic_level(name: str) -> str:
    """``name`` made safe as one MQTT topic level: ``/``, ``+``, ``#`` and NUL become ``_``."""
    return "".join("_" if c in "/+#\0" else c for c in name) or "_"


class MqttSink:
    """Publish events and per-camera/rule state to an MQTT broker (topic layout in the module doc).

    Args:
        host: broker host name or address.
        port: broker TCP port.
        outbox_path: SQLite file holding messages until the broker acknowledges them.
        prefix: first topic level.
        client_id: MQTT client id (empty: the broker assigns one).
        username: broker user name, if it needs one.
        password: broker password.
        qos: 1 (at least once) or 2 (exactly once between this client and the broker).
        keepalive_s: MQTT keep-alive (seconds).
        reconnect_min_s: first reconnect delay (whole seconds); doubles up to ``reconnect_max_s``.
        reconnect_max_s: longest reconnect delay (seconds).
        max_outbox: most messages kept unacknowledged; the oldest beyond it are dropped and logged.
        max_inflight: most messages handed to the client library at once.
        phases: lifecycle phases published.
        pulse_s: how long an update of a rule without an end phase counts in its state topic.
        connect_wait_s: how long the start waits for the broker before warning that it is not
            reachable (the sink then goes on: messages wait in the outbox).
        outbox: the outbox to use (`SinkContext.open_outbox`: PostgreSQL's, shared by the nodes);
            default the SQLite file ``outbox_path``.
        site_state: the site's retained state counts, read from PostgreSQL and published by the
            one node that leads them (`SiteRetainedState`); None: counted here from what this sink sends.

    Attributes:
        published: messages acknowledged by the broker.
        dropped: messages dropped because the outbox was full.
        skipped: updates not published again because the outbox ledger had them.
        last_error: why the broker could not be reached last, or None.
    """

    def __init__(
        self,
        host: str,
        port: int = 1883,
        *,
        outbox_path: str | Path,
        prefix: str = "campusguard",
        client_id: str = "",
        username: str | None = None,
        password: str | None = None,
        qos: int = 1,
        keepalive_s: int = 30,
        reconnect_min_s: int = 1,
        reconnect_max_s: int = 30,
        max_outbox: int = 100_000,
        max_inflight: int = 100,
        phases: Collection[str] = EVENT_PHASES,
        pulse_s: float = 5.0,
        connect_wait_s: float = 2.0,
        tls: MqttTlsConfig | None = None,
        dead_letter_path: str | Path | None = None,
        outbox: OutboxStore | None = None,
        site_state: SiteRetainedState | None = None,
    ) -> None:
        mqtt = require("paho.mqtt.client", "console")
        if qos not in (1, 2):
            raise InvalidInputError(f"mqtt sink: qos must be 1 or 2, got {qos}")
        if not 0 < reconnect_min_s <= reconnect_max_s or max_outbox < 1 or max_inflight < 1 or keepalive_s < 1:
            raise InvalidInputError(
                "mqtt sink: need 0 < reconnect_min_s <= reconnect_max_s, max_outbox >= 1, max_inflight >= 1, keepalive_s >= 1"
            )
        self.host, self.port = host, int(port)
        self._outage = OutageLog(log, f"mqtt {host}:{int(port)}")  # one line when the broker goes, one when it is back
        self.prefix = "/".join(topic_level(p) for p in prefix.strip("/").split("/")) or "campusguard"
        self.qos = qos
        self.max_inflight = max_inflight
        self.phases = PhaseFilter(phases)
        self.published = 0
        self.dropped = 0
        self.skipped = 0
        self.pulse_s = float(pulse_s)
        self.last_error: str | None = None
        self._outbox: OutboxStore = (
            outbox if outbox is not None else Outbox(outbox_path, max_outbox, what="mqtt outbox")
        )
        self._site = site_state
        dead_path = Path(dead_letter_path) if dead_letter_path else Path(outbox_path).with_suffix(".dead-letter.jsonl")
        self.dead = DeadLetters(dead_path, target=f"mqtt://{host}:{int(port)}", what="mqtt dead letter")
        self._open: dict[str, dict[str, Any]] = {}  # event id -> last published event JSON
        self._active: dict[str, set[str]] = {}  # state topic -> open event ids
        self._pulses: dict[str, list[float]] = {}  # state topic -> monotonic expiry of instantaneous updates
        self._state_lock = threading.Lock()
        self._acks: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._inflight: dict[int, int] = {}  # paho mid -> outbox seq (worker thread only)
        self._cursor = 0  # highest outbox seq handed to paho (worker thread only)
        self._connected = threading.Event()
        self._reassert = threading.Event()  # set on a reconnect: re-publish the state once the backlog is out
        self._ever_connected = False  # network thread only
        self._closed = False
        self.outbox_sender = OutboxSender(  # made before paho's thread, whose callbacks wake it
            f"mqtt-{host}:{port}",
            self._round,
            what=f"mqtt {host}:{self.port}",
            outbox=self._outbox.path,
            after_stop=self._take_acks,
        )
        self._dropped_claims = False  # set on a disconnect: a shared outbox's in-flight claims go back

        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True)
        if username is not None:
            client.username_pw_set(username, password)
        if tls is not None:
            import ssl

            try:
                context = ssl.create_default_context(cafile=tls.ca)
                if tls.cert is not None:
                    context.load_cert_chain(tls.cert, tls.key)
            except (OSError, ssl.SSLError) as exc:
                raise InvalidInputError(f"mqtt sink: TLS files cannot be used: {type(exc).__name__}: {exc}") from None
            client.tls_set_context(context)
        client.will_set(self.availability_topic, b"offline", qos=qos, retain=True)
        client.reconnect_delay_set(min_delay=reconnect_min_s, max_delay=reconnect_max_s)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_publish = self._on_publish
        client.on_connect_fail = self._on_connect_fail
        client.on_message = self._on_message
        self._client = client
        client.connect_async(host, self.port, keepalive=keepalive_s)
        client.loop_start()  # paho's network thread: connects, retries with back-off, resends unacked QoS>0
        self.outbox_sender.start()
        if site_state is not None:
            site_state.start()
        if connect_wait_s > 0 and not self._connected.wait(connect_wait_s):
            self._outage.down(
                f"broker not reachable ({self.last_error or f'no connection within {connect_wait_s:g} s'}); "
                f"alerts wait in the outbox {outbox_path} ({self.pending} pending) and go out when it is, "
                f"retrying every {reconnect_min_s}-{reconnect_max_s} s"
            )

    @classmethod
    def from_config(
        cls,
        cfg: MqttSinkConfig,
        *,
        default_outbox: str | Path,
        outbox: OutboxStore | None = None,
        site_state: SiteRetainedState | None = None,
    ) -> MqttSink:
        """Build from the config block; ``default_outbox`` is used when the config names none and
        no ``outbox`` is given."""
        return cls(
            cfg.host,
            cfg.port,
            outbox_path=cfg.outbox or default_outbox,
            prefix=cfg.prefix,
            client_id=cfg.client_id,
            username=cfg.username,
            password=resolve_secret(cfg.password, cfg.password_env, cfg.password_file, f"mqtt sink {cfg.sink_name}"),
            tls=cfg.tls,
            dead_letter_path=cfg.dead_letter,
            qos=cfg.qos,
            keepalive_s=cfg.keepalive_s,
            reconnect_min_s=cfg.reconnect_min_s,
            reconnect_max_s=cfg.reconnect_max_s,
            max_outbox=cfg.max_outbox,
            phases=cfg.phases,
            pulse_s=cfg.pulse_s,
            outbox=outbox,
            site_state=site_state,
        )

    # topics ---------------------------------------------------------------------------------
    @property
    def availability_topic(self) -> str:
        return f"{self.prefix}/available"

    @property
    def events_topic(self) -> str:
        return f"{self.prefix}/events"

    def state_topic(self, camera: str, rule: str) -> str:
        return f"{self.prefix}/{topic_level(camera)}/{topic_level(rule)}"

    @property
    def connected(self) -> bool:
        """True while the client holds a connection to the broker."""
        return self._connected.is_set()

    def health(self) -> dict[str, bool]:
        """`SinkHealth`: the broker (``host:port``) and whether the client is connected to it now."""
        return {f"{self.host}:{self.port}": self.connected}

    @property
    def pending(self) -> int:
        """Messages in the outbox, i.e. not yet acknowledged by the broker."""
        return len(self._outbox)

    # caller side ----------------------------------------------------------------------------
    def send(self, event: Event) -> None:
        """Commit the event's messages to the outbox and wake the publisher; never waits for the network."""
        if not self.phases.accepts(event):
            return
        if self._closed:
            raise InvalidInputError("mqtt sink is closed")
        try:
            self._put(event)
        except (ValueError, TypeError) as exc:  # an alert that cannot be made into messages: said, never raised
            reason = f"cannot compose: {redact_text(' '.join(f'{type(exc).__name__}: {exc}'.split()))}"
            log.warning(
                "mqtt %s:%d: alert %s goes to the dead letters (%s)", self.host, self.port, event.event_id, reason
            )
            self.dead.add({"event_id": event.event_id, "phase": event.phase, "sequence": event.sequence}, reason)
            return
        self.outbox_sender.wake()

    def _put(self, event: Event) -> None:
        """The event's messages (its JSON and its state topic) into the outbox, once."""
        if self._site is not None:
            self._put_event_only(event)
            return
        after = event.to_dict()
        topic = self.state_topic(event.camera_id, event.rule_name)
        instant = event.phase != "end" and not event.is_open  # a rule without an end phase (a line crossing)
        with self._state_lock:
            before = self._open.pop(event.event_id, None)
            active = self._active.setdefault(topic, set())
            if event.phase == "escalation":  # about the incident, not a change of it: the state stays
                if before is not None:
                    self._open[event.event_id] = before
            elif instant:
                self._pulses.setdefault(topic, []).append(time.monotonic() + self.pulse_s)
            elif event.phase == "end":
                active.discard(event.event_id)
            else:
                self._open[event.event_id] = after
                active.add(event.event_id)
            state = (topic, str(self._state(topic)).encode("ascii"), True)
            if self._outbox.published(event):  # put into the outbox by an earlier run: only the state
                self.skipped += 1
                dropped = self._outbox.add([state])
            else:
                body = {"type": _EVENT_TYPES[event.phase], "before": before, "after": after}
                messages = [(self.events_topic, json.dumps(body, default=str).encode("utf-8"), False), state]
                dropped = self._outbox.add(messages, event)
        if dropped:
            self.dropped += dropped
            log.error("mqtt outbox full: dropped the %d oldest unacknowledged message(s)", dropped)

    def _put_event_only(self, event: Event) -> None:
        """The event's JSON into the (shared) outbox, once; the state topics are the site's, published
        by its leader (`SiteRetainedState`). ``before`` is what this node published last of the
        incident: null when another node published the previous update."""
        after = event.to_dict()
        with self._state_lock:
            before = self._open.pop(event.event_id, None)
            if event.phase == "escalation" and before is not None:
                self._open[event.event_id] = before
            elif event.phase != "end" and event.is_open:
                self._open[event.event_id] = after
                while len(self._open) > _MAX_BEFORE_KEPT:
                    del self._open[next(iter(self._open))]
        body = {"type": _EVENT_TYPES[event.phase], "before": before, "after": after}
        payload = json.dumps(body, default=str).encode("utf-8")
        # one transaction under the incident's lock: two nodes handing on one update put it in once
        added, dropped = self._outbox.add_once(self.events_topic, payload, event)
        if not added:  # put in before, by this node or another
            self.skipped += 1
        if dropped:
            self.dropped += dropped
            log.error("mqtt outbox full: dropped the %d oldest unacknowledged message(s)", dropped)

    def _state(self, topic: str) -> int:
        """Open incidents plus live pulses of a state topic (``_state_lock`` held)."""
        return len(self._active.get(topic, ())) + len(self._pulses.get(topic, ()))

    def _expire_pulses(self) -> None:
        """Publish the state of every topic whose pulses ran out (publisher thread)."""
        now = time.monotonic()
        with self._state_lock:
            changed = []
            for topic, ends in self._pulses.items():
                live = [t for t in ends if t > now]
                if len(live) != len(ends):
                    self._pulses[topic] = live
                    changed.append(topic)
            if changed:
                self._outbox.add([(t, str(self._state(t)).encode("ascii"), True) for t in changed])
        if changed:
            self.outbox_sender.wake()

    def close(self, timeout_s: float = 5.0) -> None:
        """Wait up to ``timeout_s`` for the outbox to drain, mark the sink offline and disconnect.
        Messages still unacknowledged stay in the outbox for the next sink on the same file."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self.outbox_sender.drain(lambda: not self.pending, deadline)
        self.outbox_sender.stop(max(0.1, deadline - time.monotonic()) + 1.0)
        if self.connected:
            info = self._client.publish(self.availability_topic, b"offline", qos=self.qos, retain=True)
            info.wait_for_publish(timeout=max(0.1, min(2.0, deadline - time.monotonic())))
        self._client.disconnect()
        self._client.loop_stop()
        self._take_acks()  # acknowledgements that came in after the publisher thread ended
        if self._site is not None:
            self._site.close()
        self.outbox_sender.close_files(self._outbox, self.dead, None, unsent="message(s) not acknowledged")

    # paho callbacks (network thread: never block, never take the outbox lock) ---------------
    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any) -> None:
        if reason_code.is_failure:
            self.last_error = f"refused: {reason_code}"
            if not self._outage.down(f"the broker refused the connection: {reason_code}"):
                log.debug("mqtt %s:%d refused the connection again: %s", self.host, self.port, reason_code)
            return
        if not self._outage.up("connected again; the outbox is sent"):
            log.info("mqtt connected to %s:%d", self.host, self.port)
        self.last_error = None
        self._connected.set()
        client.publish(self.availability_topic, b"online", qos=self.qos, retain=True)
        if self._site is not None:  # one of several nodes: another's last will is not the site's
            client.subscribe(self.availability_topic, qos=1)
        if self._ever_connected:
            self._reassert.set()
        self._ever_connected = True
        self.outbox_sender.wake()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        """On nodes: another node's ``offline`` (its last will, or its clean stop) while this one is up
        is answered with ``online``, so ``available`` says whether any node of the site publishes."""
        if message.topic == self.availability_topic and bytes(message.payload) == b"offline" and not self._closed:
            client.publish(self.availability_topic, b"online", qos=self.qos, retain=True)

    def _on_connect_fail(self, client: Any, userdata: Any) -> None:
        self.last_error = "connection refused or timed out"

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason_code: Any, properties: Any) -> None:
        if self._connected.is_set():
            self._outage.down(f"disconnected ({reason_code}); alerts wait in the outbox")
        self._connected.clear()
        self._dropped_claims = True
        self.outbox_sender.wake()

    def _on_publish(self, client: Any, userdata: Any, mid: int, reason_code: Any, properties: Any) -> None:
        self._acks.put(mid)
        self.outbox_sender.wake()

    # publisher thread -----------------------------------------------------------------------
    def _round(self) -> None:
        """Wait for a wake-up (an alert, an acknowledgement), then take the acknowledgements,
        expire pulses, hand paho the next messages and re-assert the state after a reconnect."""
        self.outbox_sender.wait(0.5)
        self._take_acks()
        self._let_go_of_claims()
        if self._site is None:
            self._expire_pulses()
        self._hand_over()
        self._reassert_state()
        self._publish_site_state()

    def _take_acks(self) -> None:
        done: list[int] = []
        while True:
            try:
                mid = self._acks.get_nowait()
            except queue.Empty:
                break
            seq = self._inflight.pop(mid, None)
            if seq is not None:
                done.append(seq)
        if done:
            self._outbox.remove(done)
            self.published += len(done)

    def _let_go_of_claims(self) -> None:
        """After a disconnect, give a shared outbox back what this node had in flight: another node
        connected to the broker publishes it rather than waiting for this one (paho may still resend
        it here after the reconnect: a consumer drops the copy by ``event_id`` and ``sequence``)."""
        if not (self._dropped_claims and self._outbox.shared) or self._connected.is_set():
            return
        self._dropped_claims = False
        seqs, self._inflight = list(self._inflight.values()), {}
        self._outbox.release(seqs)

    def _publish_site_state(self) -> None:
        """While this node leads the site's state, publish the counts that changed (retained; not
        through the outbox: a count is read again at any time, see `SiteRetainedState`)."""
        if self._site is None or not self._connected.is_set():
            return
        changes = self._site.changes()
        for camera, rule, count in changes:
            self._client.publish(self.state_topic(camera, rule), str(count).encode("ascii"), qos=self.qos, retain=True)
        self._site.record(changes)

    def _reassert_state(self) -> None:
        """After a reconnect, once the backlog is acknowledged, publish every state topic's current
        count again (retained): paho resends unacknowledged messages after a reconnect while newer
        ones go out, so the broker may have kept an older count last (seen: 14 retained with 15 open)."""
        if not (self._reassert.is_set() and self._connected.is_set()) or self._inflight:
            return
        if self._site is not None:  # the site's counts, once this node's backlog is out
            self._reassert.clear()
            self._site.republish()
            return
        if len(self._outbox):
            return
        self._reassert.clear()
        with self._state_lock:
            topics = set(self._active) | set(self._pulses)
            messages = [(topic, str(self._state(topic)).encode("ascii"), True) for topic in sorted(topics)]
            if messages:
                self._outbox.add(messages)
        if messages:
            self.outbox_sender.wake()

    def _hand_over(self) -> None:
        """Give paho the next outbox messages, up to ``max_inflight`` unacknowledged at once; paho
        keeps them across reconnects and resends them when the connection is back."""
        room = self.max_inflight - len(self._inflight)
        # a shared outbox is claimed while connected only (a node cut from the broker leaves the
        # messages to the others), in batches of half the window (each claim holds a connection)
        waits = not self._connected.is_set() or (room < max(1, self.max_inflight // 2) and bool(self._inflight))
        if self._outbox.shared and waits:
            return
        if room <= 0:
            return
        for message in self._outbox.next_batch(self._cursor, room):
            seq, topic, payload, retain = message.seq, message.topic, message.payload, message.retain
            self._cursor = seq
            try:
                info = self._client.publish(topic, payload, qos=self.qos, retain=retain)
            except (ValueError, TypeError) as exc:  # a topic or payload paho refuses: to the dead letters
                reason = f"cannot publish: {' '.join(f'{type(exc).__name__}: {exc}'.split())}"
                log.warning(
                    "mqtt %s:%d: a message to %r goes to the dead letters (%s)", self.host, self.port, topic, reason
                )
                self.dead.add({"topic": topic, "payload": payload.decode("utf-8", "replace")}, reason)
                self._outbox.remove([seq])
                continue
            self._inflight[info.mid] = seq


def _files(cfg: MqttSinkConfig, sqlite: Path) -> SinkFiles:
    return SinkFiles(
        outbox=Path(cfg.outbox) if cfg.outbox else sqlite.with_suffix(".mqtt-outbox.db"),
        dead_letters=Path(cfg.dead_letter) if cfg.dead_letter else sqlite.with_suffix(".mqtt.dead-letter.jsonl"),
    )


def _build(cfg: MqttSinkConfig, ctx: SinkContext) -> MqttSink:
    files = _files(cfg, ctx.sqlite)
    assert files.outbox is not None
    outbox = ctx.open_outbox(files.outbox, cfg.sink_name, what="mqtt outbox", max_messages=cfg.max_outbox)
    site_state = ctx.open_site_state(cfg.sink_name, pulse_s=cfg.pulse_s)  # PostgreSQL: the site's counts
    return MqttSink.from_config(
        cfg.model_copy(update={"dead_letter": str(files.dead_letters)}),
        default_outbox=files.outbox,
        outbox=outbox,
        site_state=site_state,
    )


MQTT = SinkEntry(MqttSinkConfig, _build, _files, order=40)
