"""`EmailSink`: alerts as email over SMTP (stdlib `smtplib`), durable through an outbox.

One email per alert, or one digest for a storm: the first alert goes at once; alerts that come
within ``digest_s`` of the last email wait and go together in one digest when ``digest_s`` has
passed. The header ``X-CampusGuard-Alerts`` lists the updates an email carries
(``event_id:phase:sequence``, comma-separated). The subject names the rule, zone and camera; the body is plain text and HTML (the same
facts, and a link to the incident on the console when its ``public_url`` is known); the incident's
snapshot is attached. Unless the sink's ``role`` is ``operator``, the snapshot is the redacted
variant (`campusguard.app.media.redact.redacted_path`) for a camera whose privacy section blurs;
where that variant is missing, or the camera is unknown, nothing is attached (fail closed).

Delivery goes through the same `campusguard.app.alerts.outbox.Outbox` and delivery ledger as the
webhook: each update is put in once, removed once the SMTP server accepted the message, retried
with back-off while the server is down or refuses, and written to the dead letters after
``max_age_s``; a killed run's alerts go at the next start, once.
"""

from __future__ import annotations

import html
import ipaddress
import json
import logging
import mimetypes
import smtplib
import ssl
import time
from collections.abc import Collection, Mapping, Sequence
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from campusguard.app.alerts.ledger import Ledger
from campusguard.app.alerts.outbox import Outbox, OutboxMessage, OutboxStore
from campusguard.app.alerts.sender import DeadLetters, OutboxSender, Retry
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter
from campusguard.app.infra.secrets import resolve_secret
from campusguard.app.media.redact import redacted_path
from campusguard.errors import InvalidInputError

__all__ = ["EMAIL", "EmailSink", "EmailSinkConfig", "email_subject"]

log = logging.getLogger(__name__)

_ADDRESS = r"^[^@\s<>]+@[^@\s<>]+$"
_WHAT = {"start": "started", "update": "update", "end": "ended", "escalation": "NOT ACKNOWLEDGED"}


class EmailSinkConfig(SinkConfigBase):
    """Send alerts as email through an SMTP server."""

    kind: Literal["email"] = Field("email", title="Kind", description="`email`: send alerts through an SMTP server.")
    host: str = Field("127.0.0.1", title="SMTP host", description="SMTP server host name or address.", min_length=1)
    port: int = Field(587, ge=1, le=65535, title="SMTP port", description="SMTP server port (587 STARTTLS, 465 TLS).")
    security: Literal["starttls", "tls", "none"] = Field(
        "starttls",
        title="Security",
        description="`starttls` (upgrade the connection), `tls` (TLS from the start) or `none` (plain, loopback only).",
    )
    username: str | None = Field(None, title="User name", description="SMTP user name, if the server needs one.")
    password_env: str | None = Field(
        None,
        title="Password variable",
        description="Environment variable holding the SMTP password (never the password itself).",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    password_file: str | None = Field(
        None,
        title="Password file",
        description="File whose first line is the SMTP password (a mounted secret, mode 0600); instead of password_env.",
        min_length=1,
    )
    sender: str | None = Field(None, title="Sender", description="The From address (required).", pattern=_ADDRESS)
    to: list[str] = Field(
        default_factory=list,
        title="Recipients",
        description="Addresses the alerts go to (at least one).",
        max_length=100,
    )
    digest_s: float = Field(
        60.0,
        ge=0,
        le=86400,
        title="Digest window",
        description="Alerts within this many seconds of the last email go together in one digest (0: one email each).",
    )
    role: Literal["viewer", "operator"] = Field(
        "viewer",
        title="Role",
        description="Whose eyes the email is for: `viewer` attaches redacted snapshots where a camera blurs, `operator` the sharp ones.",
    )
    timeout_s: float = Field(10.0, gt=0, le=300, title="Timeout", description="Seconds per SMTP conversation step.")
    backoff_s: float = Field(
        1.0, ge=0, le=600, title="Back-off", description="First delay after a failure, doubled each time."
    )
    backoff_max_s: float = Field(
        300.0, ge=0, le=3600, title="Longest back-off", description="Delays double up to this (seconds)."
    )
    max_age_s: float = Field(
        86400.0,
        gt=0,
        le=30 * 86400,
        title="Maximum age",
        description="Seconds an alert is retried before the dead letters.",
    )
    outbox: str | None = Field(
        None,
        title="Outbox file",
        description="SQLite file keeping alerts until the server accepts them; default beside the store.",
    )
    dead_letter: str | None = Field(
        None, title="Dead-letter file", description="JSON-lines file for alerts given up on; default beside the store."
    )

    @model_validator(mode="after")
    def _addresses(self) -> EmailSinkConfig:
        import re

        if not self.sender or not self.to:
            raise ValueError("an email alert sink needs `sender` and `to`")
        bad = [a for a in self.to if not re.match(_ADDRESS, a)]
        if bad:
            raise ValueError(f"not an email address: {', '.join(bad)}")
        if (self.password_env or self.password_file) and not self.username:
            raise ValueError("`password_env` or `password_file` needs `username`")
        if self.password_env and self.password_file:
            raise ValueError("give the SMTP password one way: `password_env` or `password_file`")
        if self.security == "none" and self.username and not is_loopback_host(self.host):
            raise ValueError(
                f"security: none would send the SMTP login in clear to {self.host}; use starttls or tls "
                "(plain SMTP with a login is accepted only to a loopback host)"
            )
        return self


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); no name lookup."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ComposeError(ValueError):
    """An alert that cannot be made into an email (a header that would be forged, a bad address)."""


def email_subject(events: Sequence[Event]) -> str:
    """``[CampusGuard] intrusion started: rule in zone on camera``, or a digest's count and first few."""
    if len(events) == 1:
        e = events[0]
        return f"[CampusGuard] {e.rule_kind} {_WHAT.get(e.phase, e.phase)}: {e.rule_name} in {e.zone} on {e.camera_id}"
    first = ", ".join(f"{e.rule_name} in {e.zone} on {e.camera_id}" for e in events[:3])
    more = f" and {len(events) - 3} more" if len(events) > 3 else ""
    return f"[CampusGuard] {len(events)} alerts: {first}{more}"


class EmailSink:
    """Send alerts as email (one each, or a digest for a storm) through an SMTP server.

    Args:
        host, port: the SMTP server.
        sender: the From address; to: the recipients.
        outbox_path: the SQLite outbox, unless ``outbox`` is given (`SinkContext.open_outbox`: PostgreSQL's
            shared one); dead_letter_path: the dead-letter JSONL file.
        security: ``starttls``, ``tls`` or ``none``.
        username, password: SMTP login, if the server needs one.
        digest_s: alerts within this of the last email wait and go as one digest.
        role: ``viewer`` (redacted snapshots where a camera blurs) or ``operator`` (sharp ones).
        blur: each camera's ``privacy.blur``; a camera missing here is treated as blurred.
        public_url: the console's address, for a link to each incident (None: no link).
        ssl_context: TLS settings (default: the system's, verifying the server).
        timeout_s, backoff_s, backoff_max_s, max_age_s: as `campusguard.app.alerts.webhook.WebhookSink`.
        max_digest: most alerts in one email.
        phases: lifecycle phases sent; ledger: where deliveries are remembered.

    Attributes:
        sent: emails the server accepted; delivered: alerts in them.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        sender: str,
        to: Sequence[str],
        outbox_path: str | Path | None = None,
        dead_letter_path: str | Path,
        security: str = "starttls",
        username: str | None = None,
        password: str | None = None,
        digest_s: float = 60.0,
        role: str = "viewer",
        blur: Mapping[str, str] | None = None,
        public_url: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
        backoff_s: float = 1.0,
        backoff_max_s: float = 300.0,
        max_age_s: float = 86400.0,
        max_digest: int = 50,
        phases: Collection[str] = EVENT_PHASES,
        ledger: Ledger | None = None,
        outbox: OutboxStore | None = None,
    ) -> None:
        if security not in ("starttls", "tls", "none") or role not in ("viewer", "operator") or not to:
            raise InvalidInputError(
                "email sink: security must be starttls|tls|none, role viewer|operator, `to` not empty"
            )
        if timeout_s <= 0 or digest_s < 0 or max_age_s <= 0 or max_digest < 1:
            raise InvalidInputError("email sink: need timeout_s > 0, digest_s >= 0, max_age_s > 0, max_digest >= 1")
        if security == "none" and username and not is_loopback_host(host):
            raise InvalidInputError(f"email sink: security none would send the SMTP login in clear to {host}")
        self.host, self.port = host, int(port)
        self.sender, self.to = sender, list(to)
        self.security = security
        self.username, self.password = username, password
        self.digest_s = float(digest_s)
        self.role = role
        self.blur = dict(blur or {})
        self.public_url = public_url.rstrip("/") if public_url else None
        self.ssl_context = ssl_context or ssl.create_default_context()
        self.timeout_s = float(timeout_s)
        self.backoff_s, self.backoff_max_s, self.max_age_s = float(backoff_s), float(backoff_max_s), float(max_age_s)
        self.retry = Retry(self.backoff_s, self.backoff_max_s, self.max_age_s)
        self.max_digest = int(max_digest)
        self.phases = PhaseFilter(phases)
        self.ledger = ledger
        if outbox is None:
            if outbox_path is None:
                raise InvalidInputError("email sink: an outbox or its path is needed")
            outbox = Outbox(outbox_path, what="email outbox")
        self.outbox: OutboxStore = outbox
        self.outbox.all_due()  # what an earlier run held back for its back-off goes now
        self.dead = DeadLetters(dead_letter_path, target=f"smtp://{host}:{port}", what="email dead letter")
        self.sent = 0
        self.delivered = 0
        self.last_error: str | None = None
        self._last_sent = float("-inf")  # monotonic time of the last email
        self._closed = False
        self._left: int | None = None  # what the outbox held when closed
        self.outbox_sender = OutboxSender(
            f"email-{host}:{port}", self._step, what=f"email {host}:{self.port}", outbox=self.outbox.path
        )
        self.outbox_sender.start()

    @property
    def pending(self) -> int:
        return self._left if self._left is not None else len(self.outbox)

    def send(self, event: Event) -> None:
        """Commit the alert to the outbox and wake the sender; never waits for the network."""
        self.outbox_sender.put(self.outbox, event, self.phases, self.ledger)

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is due (a waiting digest goes now) within ``timeout_s``; the rest stays in the outbox."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout_s
        self._last_sent = float("-inf")  # a digest waiting for its window goes now
        self.outbox_sender.drain(self._nothing_due, deadline)
        self.outbox_sender.stop(max(0.1, deadline - time.monotonic()) + self.timeout_s)
        self._left = self.outbox_sender.close_files(self.outbox, self.dead, self.ledger)

    def _nothing_due(self) -> bool:
        nxt = self.outbox.next_due()
        return nxt is None or nxt > time.time()

    # sender thread (`OutboxSender`) ---------------------------------------------------------
    def _step(self) -> None:
        """One round: hand what is due to the delivery, or wait for something to be."""
        window = self._last_sent + self.digest_s - time.monotonic()
        if window > 0 and not self._closed:
            self.outbox_sender.wait(min(window, 0.5))
            return
        messages = self.outbox.due(self.max_digest)
        if not messages:
            nxt = self.outbox.next_due()
            self.outbox_sender.wait(0.5 if nxt is None else min(0.5, max(0.01, nxt - time.time())))
            return
        try:
            self._send_batch(messages)
        finally:
            self.outbox.release([m.seq for m in messages])  # those not settled (a shared outbox's claim ends)

    def _send_batch(self, messages: list[OutboxMessage]) -> None:
        events: list[Event] = []
        readable: list[OutboxMessage] = []
        for m in messages:
            try:
                events.append(Event.from_dict(json.loads(m.payload)))
                readable.append(m)
            except (ValueError, TypeError):
                self.dead.add({"raw": m.payload.decode("utf-8", "replace")}, "not an event")
                self.outbox.remove([m.seq])
        messages, events, message = self._composable(readable, events)
        if message is None:
            return
        try:
            self._deliver(message)
        except (OSError, smtplib.SMTPException, ssl.SSLError) as exc:
            error = " ".join(f"{type(exc).__name__}: {exc}".split())
            if self.last_error is None:
                log.warning(
                    "email %s:%d failed (%s); alerts wait in the outbox %s",
                    self.host,
                    self.port,
                    error,
                    self.outbox.path,
                )
            self.last_error = error
            now = time.time()
            for m in messages:
                if self.retry.gives_up(m, now):
                    self.dead.add(json.loads(m.payload), error)
                    self.outbox.remove([m.seq])
                else:
                    self.retry.hold(self.outbox, m, error, now)
            return
        if self.last_error is not None:
            log.warning("email %s:%d accepts mail again", self.host, self.port)
            self.last_error = None
        self.outbox.remove([m.seq for m in messages])
        if self.ledger is not None:
            for e in events:
                self.ledger.record(e)
        self.sent += 1
        self.delivered += len(events)
        self._last_sent = time.monotonic()

    def _composable(
        self, messages: list[OutboxMessage], events: list[Event]
    ) -> tuple[list[OutboxMessage], list[Event], EmailMessage | None]:
        """The email of ``events``; an alert that cannot be composed goes to the dead letters with the
        reason and the others go without it (each is tried alone only when the batch fails)."""
        if not events:
            return [], [], None
        try:
            return messages, events, self.compose(events)
        except (ValueError, TypeError, LookupError) as exc:
            if len(events) == 1:
                reason = f"cannot compose the email: {' '.join(f'{type(exc).__name__}: {exc}'.split())}"
                log.warning(
                    "email %s:%d: alert %s goes to the dead letters (%s)",
                    self.host,
                    self.port,
                    events[0].event_id,
                    reason,
                )
                self.dead.add(json.loads(messages[0].payload), reason)
                self.outbox.remove([messages[0].seq])
                return [], [], None
        kept_messages: list[OutboxMessage] = []
        kept_events: list[Event] = []
        for m, e in zip(messages, events, strict=True):
            _, alone, email = self._composable([m], [e])
            if email is not None:
                kept_messages.append(m)
                kept_events.extend(alone)
        if not kept_events:
            return [], [], None
        return kept_messages, kept_events, self.compose(kept_events)

    def _deliver(self, message: EmailMessage) -> None:
        """One SMTP conversation; raises on any failure (a refused login, recipient or message)."""
        smtp: smtplib.SMTP
        if self.security == "tls":
            smtp = smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout_s, context=self.ssl_context)
        else:
            smtp = smtplib.SMTP(self.host, self.port, timeout=self.timeout_s)
        with smtp:
            if self.security == "starttls":
                smtp.starttls(context=self.ssl_context)
            if self.username:
                smtp.login(self.username, self.password or "")
            refused = smtp.send_message(message)
            if refused:
                raise smtplib.SMTPRecipientsRefused(refused)

    # the message ----------------------------------------------------------------------------
    def link(self, event: Event) -> str | None:
        """The incident's page on the console, or None without a ``public_url``."""
        return f"{self.public_url}/events/{event.event_id}" if self.public_url else None

    def snapshot_for(self, event: Event) -> Path | None:
        """The snapshot file this sink may attach: the sharp one for an ``operator`` sink or a
        camera that does not blur, else its redacted variant; None when that file is missing."""
        if not event.snapshot_path:
            return None
        sharp = Path(event.snapshot_path)
        blurs = self.blur.get(event.camera_id, "unknown") != "none"
        path = redacted_path(sharp) if blurs and self.role != "operator" else sharp
        return path if path.is_file() else None

    def compose(self, events: Sequence[Event]) -> EmailMessage:
        """The email of one alert, or the digest of several."""
        msg = EmailMessage()
        msg["Subject"] = email_subject(events)
        msg["From"] = self.sender
        msg["To"] = ", ".join(self.to)
        msg["Date"] = formatdate(localtime=True)
        msg["Message-ID"] = make_msgid(domain="campusguard")
        # what the email carries, for a machine on the other side: event_id:phase:sequence, comma-separated
        msg["X-CampusGuard-Alerts"] = ", ".join(f"{e.event_id}:{e.phase}:{e.sequence}" for e in events)
        text: list[str] = []
        rows: list[str] = []
        for e in events:
            when = e.started_at.isoformat(timespec="seconds") if e.started_at else f"t={e.start_s:.1f}s"
            what = _WHAT.get(e.phase, e.phase)
            classes = ", ".join(e.class_names) or ", ".join(map(str, e.class_ids))
            link = self.link(e)
            text.append(
                f"{e.rule_kind} {what}: rule {e.rule_name}, zone {e.zone}, camera {e.camera_id}, {when}"
                + (f", objects: {classes}" if classes else "")
                + f"\nincident {e.event_id}"
                + (f": {link}" if link else "")
            )
            cells = [e.rule_kind + " " + what, e.rule_name, e.zone, e.camera_id, when, classes]
            linked = f'<a href="{html.escape(link)}">{html.escape(e.event_id)}</a>' if link else html.escape(e.event_id)
            rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + f"<td>{linked}</td></tr>")
        msg.set_content("\n\n".join(text) + "\n")
        head = "".join(f"<th>{h}</th>" for h in ("Alert", "Rule", "Zone", "Camera", "When", "Objects", "Incident"))
        msg.add_alternative(
            f'<html><body><table border="1" cellpadding="4"><tr>{head}</tr>{"".join(rows)}</table></body></html>',
            subtype="html",
        )
        for e in events:
            path = self.snapshot_for(e)
            if path is None:
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue  # deleted meanwhile (retention): the email goes without it
            ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            maintype, subtype = ctype.split("/", 1)
            msg.add_attachment(
                data, maintype=maintype, subtype=subtype, filename=f"{e.camera_id}_{e.event_id}{path.suffix}"
            )
        return msg


def _files(cfg: EmailSinkConfig, sqlite: Path) -> SinkFiles:
    return SinkFiles(
        outbox=Path(cfg.outbox) if cfg.outbox else sqlite.with_suffix(f".{cfg.sink_name}.outbox.db"),
        dead_letters=Path(cfg.dead_letter)
        if cfg.dead_letter
        else sqlite.with_suffix(f".{cfg.sink_name}.dead-letter.jsonl"),
    )


def _build(cfg: EmailSinkConfig, ctx: SinkContext) -> EmailSink:
    password = resolve_secret(None, cfg.password_env, cfg.password_file, f"email sink {cfg.sink_name}")
    files = _files(cfg, ctx.sqlite)
    assert files.outbox is not None and files.dead_letters is not None and cfg.sender is not None
    return EmailSink(
        cfg.host,
        cfg.port,
        sender=cfg.sender,
        to=cfg.to,
        outbox=ctx.open_outbox(files.outbox, cfg.sink_name, what="email outbox"),
        dead_letter_path=files.dead_letters,
        security=cfg.security,
        username=cfg.username,
        password=password,
        digest_s=cfg.digest_s,
        role=cfg.role,
        blur=ctx.blur,
        public_url=ctx.public_url,
        timeout_s=cfg.timeout_s,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        max_age_s=cfg.max_age_s,
        phases=cfg.phases,
        ledger=ctx.open_ledger(f"email:{cfg.sink_name}"),
    )


EMAIL = SinkEntry(
    EmailSinkConfig, _build, _files, example={"sender": "a@b.example", "to": ["c@d.example"]}, order=50
)
