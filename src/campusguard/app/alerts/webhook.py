"""`WebhookSink`: HTTP POST of events through a persisted outbox, delivered in parallel with
back-off, so a slow or dead receiver never blocks detection and a crash loses no alert.

`send` commits the alert to the sink's outbox (`campusguard.app.alerts.outbox.Outbox`, a SQLite
file beside the event store) and returns; it is on disk then. Delivery threads (at most
``parallel`` requests at once) POST what is due; a 2xx removes it and records it in the delivery
ledger; a failure holds it for a back-off that doubles from ``backoff_s`` up to ``backoff_max_s``.
An incident's updates go in order (its ``start`` before its ``end``); different incidents go in
parallel, so one slow incident's retries do not hold the others.

An alert goes to the dead-letter JSONL file (``{"event": {...}, "url", "error", "failed_at"}`` per
line, fsync'd) when it is older than ``max_age_s``, when the receiver rejects it (a 4xx other than
408 or 429: retrying will not help) or after ``retries`` failed attempts when that is set. After a
successful delivery the dead letters are put back into the outbox (at most once a minute), so a
receiver that comes back gets the backlog without operator action.

Exactly once across crashes: an update is put into the outbox once (the outbox's ledger of the
updates put in, committed with the message), and removed only once answered 2xx; what a killed run
left goes at the next start. A crash between the answer and the removal repeats that one alert;
the body (`Event.to_dict`) carries ``event_id``, ``phase`` and ``sequence``, so a receiver drops it.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from campusguard.app.alerts.ledger import Ledger
from campusguard.app.alerts.outbox import Outbox, OutboxMessage, OutboxStore
from campusguard.app.alerts.sender import DeadLetters, OutboxSender, Retry
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter
from campusguard.app.infra.secrets import (
    redact_text,
    redact_url,
    remember_secret,
    resolve_secret,
    secret_values,
    url_userinfo,
    without_userinfo,
)
from campusguard.errors import ConfigError, InvalidInputError

__all__ = ["WEBHOOK", "WebhookSink", "WebhookSinkConfig"]

log = logging.getLogger(__name__)

WEBHOOK_BACKOFF_S = 0.5
WEBHOOK_BACKOFF_MAX_S = 60.0
WEBHOOK_TIMEOUT_S = 5.0
WEBHOOK_MAX_AGE_S = 86400.0
WEBHOOK_PARALLEL = 4
_REDRIVE_EVERY_S = 60.0


class WebhookSinkConfig(SinkConfigBase):
    """POST each event's JSON to an HTTP receiver, through a persisted outbox."""

    kind: Literal["webhook"] = Field("webhook", title="Kind", description="`webhook`: HTTP POST of the event JSON.")
    url: str | None = Field(
        None,
        title="URL",
        description="The receiver's http(s) URL (this, `url_env` or `url_file` is required); `user:password@` in it "
        "is sent as HTTP Basic authorisation. Logs, dead letters and bundles show it redacted.",
        pattern=r"^https?://",
    )
    url_env: str | None = Field(
        None,
        title="URL variable",
        description="Environment variable holding the URL (when it carries a token or a password).",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    url_file: str | None = Field(
        None, title="URL file", description="File whose first line is the URL (a mounted secret).", min_length=1
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        title="Headers",
        description="Extra HTTP headers sent with each alert; their values count as secrets (shown `***`).",
        max_length=32,
    )
    headers_env: dict[str, str] = Field(
        default_factory=dict,
        title="Headers from the environment",
        description="Header name to the environment variable holding its value, e.g. "
        "`{Authorization: CG_WEBHOOK_AUTH}` with `CG_WEBHOOK_AUTH='Bearer ...'`.",
        max_length=32,
    )
    headers_file: dict[str, str] = Field(
        default_factory=dict,
        title="Headers from files",
        description="Header name to a file whose first line is its value.",
        max_length=32,
    )
    timeout_s: float = Field(WEBHOOK_TIMEOUT_S, gt=0, le=300, title="Timeout", description="Seconds per request.")
    retries: int | None = Field(
        None,
        ge=0,
        le=100,
        title="Retries",
        description="Attempts after the first before the alert goes to the dead-letter file; none: until `max_age_s`.",
    )
    backoff_s: float = Field(
        WEBHOOK_BACKOFF_S,
        ge=0,
        le=600,
        title="Back-off",
        description="First delay between attempts, doubled each time.",
    )
    backoff_max_s: float = Field(
        WEBHOOK_BACKOFF_MAX_S,
        ge=0,
        le=3600,
        title="Longest back-off",
        description="Delays double up to this (seconds).",
    )
    max_age_s: float = Field(
        WEBHOOK_MAX_AGE_S,
        gt=0,
        le=30 * 86400,
        title="Maximum age",
        description="Seconds an alert is retried before it goes to the dead-letter file.",
    )
    parallel: int = Field(
        WEBHOOK_PARALLEL, ge=1, le=64, title="Parallel requests", description="Most requests in flight at once."
    )
    dead_letter: str | None = Field(
        None,
        title="Dead-letter file",
        description="JSON-lines file for alerts given up on; default `<store>.dead-letter.jsonl` beside the event store.",
    )
    outbox: str | None = Field(
        None,
        title="Outbox file",
        description="SQLite file keeping alerts until the receiver answers 2xx; default `<store>.<name>.outbox.db`.",
    )

    @model_validator(mode="after")
    def _needs(self) -> WebhookSinkConfig:
        given = [n for n in ("url", "url_env", "url_file") if getattr(self, n)]
        if len(given) != 1:
            raise ValueError("a webhook alert sink needs one of `url`, `url_env` or `url_file`")
        for field in ("headers", "headers_env", "headers_file"):
            for name, value in getattr(self, field).items():
                if not _HEADER_NAME.match(name):
                    raise ValueError(f"{field}: {name!r} is not an HTTP header name")
                if any(c in value for c in "\r\n\0"):
                    raise ValueError(f"{field}: the value of {name} must be one line")
        twice = set(self.headers) & set(self.headers_env) | set(self.headers_env) & set(self.headers_file)
        if twice or set(self.headers) & set(self.headers_file):
            raise ValueError("a header is given twice among headers, headers_env and headers_file")
        return self


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")


class _Rejected(Exception):
    """The receiver refused this alert for good (a 4xx other than 408/429)."""


class WebhookSink:
    """POST each event's JSON (`Event.to_dict`) to ``url`` through a persisted outbox.

    Args:
        url: ``http://`` or ``https://`` receiver.
        dead_letter_path: JSONL file for alerts given up on.
        outbox_path: SQLite outbox (default: beside the dead-letter file, ``<name>.outbox.db``).
        retries: failed attempts after the first before the dead letters; None: until ``max_age_s``.
        backoff_s: wait after the first failed attempt; doubles each time (seconds, >= 0).
        backoff_max_s: cap on one wait (seconds).
        max_age_s: an alert older than this goes to the dead letters (seconds, > 0).
        timeout_s: HTTP connect/read timeout per attempt (seconds, > 0).
        parallel: most requests in flight at once (>= 1).
        headers: extra HTTP headers (e.g. an authorisation token).
        redrive: put the dead letters back into the outbox after a successful delivery.
        phases: lifecycle phases sent.
        ledger: where deliveries are remembered; updates in it are skipped. None: the outbox's own
            ledger of updates put in still keeps each once.
        outbox: the outbox to use (`SinkContext.open_outbox`: PostgreSQL's shared one); default the
            SQLite file ``outbox_path``.

    Attributes:
        delivered: alerts delivered (re-driven ones included); redriven: dead letters delivered
        later; dead_lettered: alerts written to the dead-letter file.
    """

    def __init__(
        self,
        url: str,
        *,
        dead_letter_path: str | Path,
        outbox_path: str | Path | None = None,
        retries: int | None = None,
        backoff_s: float = WEBHOOK_BACKOFF_S,
        backoff_max_s: float = WEBHOOK_BACKOFF_MAX_S,
        max_age_s: float = WEBHOOK_MAX_AGE_S,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        parallel: int = WEBHOOK_PARALLEL,
        headers: Mapping[str, str] | None = None,
        redrive: bool = True,
        phases: Collection[str] = EVENT_PHASES,
        ledger: Ledger | None = None,
        outbox: OutboxStore | None = None,
    ) -> None:
        shown = redact_url(url)
        if not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"webhook url {shown!r} must start with http:// or https://")
        if (retries is not None and retries < 0) or backoff_s < 0 or backoff_max_s < 0:
            raise InvalidInputError(f"webhook {shown}: need retries >= 0, backoff_s >= 0, backoff_max_s >= 0")
        if timeout_s <= 0 or max_age_s <= 0 or parallel < 1:
            raise InvalidInputError(f"webhook {shown}: need timeout_s > 0, max_age_s > 0, parallel >= 1")
        self.url = url
        self.shown = shown  # what logs, thread names, dead letters and the ledger say: never a password or token
        self.dead_letter_path = Path(dead_letter_path)
        self.dead = DeadLetters(self.dead_letter_path, target=shown, what="webhook dead letter")
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self.max_age_s = float(max_age_s)
        self.retry = Retry(self.backoff_s, self.backoff_max_s, self.max_age_s, retries)
        self.timeout_s = float(timeout_s)
        self.parallel = int(parallel)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        remember_secret(*(headers or {}).values())
        user, password = url_userinfo(url)
        if user is not None and not any(k.lower() == "authorization" for k in self.headers):
            # urllib takes user info as part of the host name: it travels as HTTP Basic instead
            basic = base64.b64encode(f"{user}:{password or ''}".encode()).decode("ascii")
            self.headers["Authorization"] = f"Basic {basic}"
            remember_secret(password, basic)
        self._post_url = without_userinfo(url)
        self.redrive = redrive
        self.phases = PhaseFilter(phases)
        self.ledger = ledger
        self.delivered = 0
        self.redriven = 0
        if outbox is None:
            path = Path(outbox_path) if outbox_path else self.dead_letter_path.with_suffix(".outbox.db")
            outbox = Outbox(path, what="webhook outbox")
        self.outbox: OutboxStore = outbox
        self.outbox.all_due()  # what an earlier run held back for its back-off goes now
        self._busy: set[str] = set()  # topics (incidents) with a request in flight
        self._redriven_keys: set[tuple[str, str, int]] = set()  # updates that came from the dead letters
        self._busy_lock = threading.Lock()
        self._closed = False
        self._left: int | None = None  # what the outbox held when closed
        self._last_redrive = 0.0
        self._outage_since: float | None = None
        self._pool = ThreadPoolExecutor(max_workers=self.parallel, thread_name_prefix="webhook")
        self.outbox_sender = OutboxSender(
            f"webhook-{shown}", self._step, what=f"webhook {shown}", outbox=self.outbox.path
        )
        self.outbox_sender.start()
        left = len(self.outbox)
        if left:
            log.info("webhook %s: %d alert(s) left by an earlier run go out now", shown, left)

    @property
    def dead_lettered(self) -> int:
        return self.dead.written

    @property
    def pending(self) -> int:
        """Alerts in the outbox, not yet delivered."""
        return self._left if self._left is not None else len(self.outbox)

    # caller side ----------------------------------------------------------------------------
    def send(self, event: Event) -> None:
        """Commit the alert to the outbox and wake the delivery; never waits for the network."""
        try:
            dropped = self.outbox_sender.put(self.outbox, event, self.phases, self.ledger)
        except (TypeError, ValueError) as exc:  # an alert that cannot be made into JSON: said, never raised
            self._cannot_compose(event, exc)
            return
        if dropped:
            log.error("webhook %s: outbox full, dropped the %d oldest alert(s)", self.shown, dropped)

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is due now within ``timeout_s`` (not what waits for its back-off: a receiver
        that just failed is not waited for); what is left stays in the outbox for the next run."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self.outbox_sender.drain(self._idle, deadline)
        self.outbox_sender.stop(max(0.1, deadline - time.monotonic()) + 1.0)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._left = self.outbox_sender.close_files(
            self.outbox, self.dead, self.ledger, unsent="alert(s) not delivered"
        )

    def _idle(self) -> bool:
        """Nothing in flight and nothing due now."""
        nxt = self.outbox.next_due()
        with self._busy_lock:
            busy = bool(self._busy)
        return not busy and (nxt is None or nxt > time.time())

    # delivery -------------------------------------------------------------------------------
    def _post(self, body: bytes) -> None:
        """One attempt; raises on anything but a 2xx answer (`_Rejected` for a final 4xx)."""
        request = urllib.request.Request(self._post_url, data=body, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
                if not 200 <= response.status < 300:
                    raise OSError(f"HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500 and exc.code not in (408, 429):
                raise _Rejected(f"HTTP {exc.code}") from None
            raise OSError(f"HTTP {exc.code}") from None

    def _step(self) -> None:
        """One round: hand what is due to the delivery, one message at a time (each its own claim
        of a shared outbox), or wait for something to be."""
        with self._busy_lock:
            room = self.parallel - len(self._busy)
            busy = set(self._busy)
        messages: list[OutboxMessage] = []
        while len(messages) < room:
            claimed = self.outbox.due(1, busy=busy)
            if not claimed:
                break
            message = claimed[0]
            messages.append(message)
            busy.add(message.topic)
            with self._busy_lock:
                self._busy.add(message.topic)
            try:
                self._pool.submit(self._attempt, message)
            except RuntimeError:  # the pool is shut down: closing
                self.outbox.release([message.seq])
                with self._busy_lock:
                    self._busy.discard(message.topic)
                return
        nxt = self.outbox.next_due()
        wait = 0.5 if nxt is None else min(0.5, max(0.0, nxt - time.time()))
        self.outbox_sender.wait(max(wait, 0.01) if not messages else 0.0)

    def _attempt(self, message: OutboxMessage) -> None:
        try:
            try:
                self._post(message.payload)
            except _Rejected as exc:
                self._give_up(message, str(exc))
                return
            except (OSError, ValueError) as exc:
                self._failed(message, _one_line(exc))
                return
            except Exception as exc:  # noqa: BLE001 - whatever an alert holds, the delivery goes on
                self._give_up(message, f"cannot send: {_one_line(exc)}")
                return
            self.outbox.remove([message.seq])
            key = self._record(message.payload)
            with self._busy_lock:
                self.delivered += 1
                if key is not None and key in self._redriven_keys:
                    self._redriven_keys.discard(key)
                    self.redriven += 1
            if self._outage_since is not None:
                log.warning(
                    "webhook %s answers again after %.0f s; %d alert(s) waiting go out now",
                    self.shown,
                    time.monotonic() - self._outage_since,
                    len(self.outbox),
                )
                self._outage_since = None
            if self.redrive and time.monotonic() - self._last_redrive >= _REDRIVE_EVERY_S:
                self._last_redrive = time.monotonic()
                self._redrive()
        finally:
            self.outbox.release([message.seq])  # unless settled above (a claim of a shared outbox ends)
            with self._busy_lock:
                self._busy.discard(message.topic)
            self.outbox_sender.wake()

    def _failed(self, message: OutboxMessage, error: str) -> None:
        now = time.time()
        if self.retry.gives_up(message, now):
            self._give_up(message, error)
            return
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            log.warning("webhook %s failed (%s); alerts wait in the outbox %s", self.shown, error, self.outbox.path)
        self.retry.hold(self.outbox, message, error, now)

    def _give_up(self, message: OutboxMessage, error: str) -> None:
        try:
            payload = json.loads(message.payload)
        except ValueError:
            payload = {"raw": message.payload.decode("utf-8", "replace")}
        log.warning("webhook %s: alert %s goes to the dead letters (%s)", self.shown, payload.get("event_id"), error)
        self.dead.add(payload, error)
        self.outbox.remove([message.seq])

    def _cannot_compose(self, event: Event, exc: BaseException) -> None:
        reason = f"cannot compose: {_one_line(exc)}"
        log.warning("webhook %s: alert %s goes to the dead letters (%s)", self.shown, event.event_id, reason)
        self.dead.add({"event_id": event.event_id, "phase": event.phase, "sequence": event.sequence}, reason)

    def _record(self, body: bytes) -> tuple[str, str, int] | None:
        """Put a delivered body in the ledger; its ``(event_id, phase, sequence)``."""
        try:
            payload = json.loads(body)
            key = (str(payload["event_id"]), str(payload["phase"]), int(payload.get("sequence") or 0))
        except (ValueError, KeyError, TypeError):
            return None
        if self.ledger is not None:
            self.ledger.record_key(*key)
        return key

    def _redrive(self) -> None:
        """Put the dead letters back into the outbox (those not delivered since)."""
        for payload in self.dead.take():
            try:
                event = Event.from_dict(payload)
            except (TypeError, ValueError):
                self.dead.add(payload, "not an event")
                continue
            if self.ledger is not None and self.ledger.delivered(event):
                continue
            body = json.dumps(payload, default=str).encode("utf-8")
            self.outbox.add([(event.event_id, body, False)])
            with self._busy_lock:
                self._redriven_keys.add((event.event_id, event.phase, int(event.sequence)))
        self.outbox_sender.wake()


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        return redact_text(f"{type(exc.reason).__name__}: {exc.reason}")
    return redact_text(" ".join(str(exc).split()) or type(exc).__name__)


def _files(cfg: WebhookSinkConfig, sqlite: Path) -> SinkFiles:
    return SinkFiles(
        outbox=Path(cfg.outbox) if cfg.outbox else sqlite.with_suffix(f".{cfg.sink_name}.outbox.db"),
        dead_letters=Path(cfg.dead_letter) if cfg.dead_letter else sqlite.with_suffix(".dead-letter.jsonl"),
    )


def _headers(cfg: WebhookSinkConfig) -> dict[str, str]:
    """The configured headers, those from the environment and from files resolved (`resolve_secret`)."""
    what = f"webhook sink {cfg.sink_name}"
    out = {name: str(resolve_secret(value, None, None, f"{what} header {name}")) for name, value in cfg.headers.items()}
    out.update({n: str(resolve_secret(None, env, None, f"{what} header {n}")) for n, env in cfg.headers_env.items()})
    out.update({n: str(resolve_secret(None, None, f, f"{what} header {n}")) for n, f in cfg.headers_file.items()})
    for name, value in out.items():
        if any(c in value for c in "\r\n\0"):
            raise ConfigError(f"{what}: the value of header {name} must be one line")
    return out


def _build(cfg: WebhookSinkConfig, ctx: SinkContext) -> WebhookSink:
    files = _files(cfg, ctx.sqlite)
    assert files.dead_letters is not None and files.outbox is not None  # the url: checked by the model
    url = resolve_secret(cfg.url, cfg.url_env, cfg.url_file, f"webhook sink {cfg.sink_name} url", required=True)
    assert url is not None
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"webhook sink {cfg.sink_name}: the url must start with http:// or https://")
    remember_secret(*sorted(secret_values({"url": url})))
    return WebhookSink(
        url,
        dead_letter_path=files.dead_letters,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        max_age_s=cfg.max_age_s,
        timeout_s=cfg.timeout_s,
        parallel=cfg.parallel,
        headers=_headers(cfg),
        phases=cfg.phases,
        ledger=ctx.open_ledger(f"webhook:{redact_url(url)}"),
        outbox=ctx.open_outbox(files.outbox, cfg.sink_name, what="webhook outbox"),
    )


WEBHOOK = SinkEntry(WebhookSinkConfig, _build, _files, example={"url": "http://127.0.0.1:9/hook"}, order=30)
