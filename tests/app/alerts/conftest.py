"""Test helpers for alerts: `make_event`, a real loopback HTTP receiver, a free port, a real
Mosquitto broker on a free port (`broker`) and MQTT subscribers (`subscriber_factory`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/app: the MQTT broker, the webhook receiver

from mqtt_broker import MOSQUITTO, Broker, Subscriber  # noqa: E402
from webhook_receiver import WebhookReceiver  # noqa: E402

from campusguard.app.alerts.email import EmailSink  # noqa: E402


@pytest.fixture
def receiver_factory():
    made: list[WebhookReceiver] = []

    def make(**kwargs: Any) -> WebhookReceiver:
        r = WebhookReceiver(**kwargs)
        made.append(r)
        return r

    yield make
    for r in made:
        r.stop()


def free_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def unused_port() -> int:
    return free_port()


class SmtpServer:
    """A real SMTP server (aiosmtpd) on 127.0.0.1 keeping every message it accepts.

    ``tls``: offer STARTTLS with a self-signed certificate for 127.0.0.1 (made with `cryptography`;
    ``cafile`` is its PEM, for the client to trust) and require it before mail. ``refuse``: answer
    every message ``554`` (the server is up but will not take mail). `start` / `stop` may repeat on
    the same port: the server goes down and comes back.
    """

    def __init__(self, folder: Any, *, tls: bool = False, port: int = 0) -> None:
        import ssl

        self.port = port or free_port()
        self.messages: list[Any] = []
        self.refuse = False
        self.tls_context: ssl.SSLContext | None = None
        self.cafile = None
        if tls:
            cert, key = _self_signed(folder)
            self.cafile = cert
            self.tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.tls_context.load_cert_chain(cert, key)
        self.controller: Any = None

    def client_context(self) -> Any:
        import ssl

        return ssl.create_default_context(cafile=str(self.cafile)) if self.cafile else None

    def sink(self, folder: Path, **options: Any) -> EmailSink:
        """An `EmailSink` to this server, its outbox and dead letters in ``folder``, with short back-offs and
        timeout (STARTTLS trusting this server's certificate when it has one); ``options`` override."""
        settings: dict[str, Any] = {
            "sender": "campusguard@campus.example",
            "to": ["security@campus.example"],
            "outbox_path": folder / "email.outbox.db",
            "dead_letter_path": folder / "email.dead.jsonl",
            "security": "starttls" if self.cafile else "none",
            "ssl_context": self.client_context(),
            "digest_s": 0.0,
            "backoff_s": 0.05,
            "backoff_max_s": 0.2,
            "timeout_s": 5.0,
            **options,
        }
        return EmailSink("127.0.0.1", self.port, **settings)

    def start(self) -> SmtpServer:
        from email import message_from_bytes, policy

        from aiosmtpd.controller import Controller

        outer = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 - aiosmtpd API
                if outer.refuse:
                    return "554 5.7.1 refused by the test server"
                outer.messages.append(message_from_bytes(envelope.original_content, policy=policy.default))
                return "250 OK"

        kwargs: dict[str, Any] = {"hostname": "127.0.0.1", "port": self.port}
        if self.tls_context is not None:
            kwargs.update(tls_context=self.tls_context, require_starttls=True)
        self.controller = Controller(Handler(), **kwargs)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    def alerts(self) -> list[tuple[str, str, int]]:
        """Every ``(event_id, phase, sequence)`` the accepted emails carry (their X-CampusGuard-Alerts)."""
        out = []
        for m in self.messages:
            for item in str(m["X-CampusGuard-Alerts"]).split(","):
                event_id, phase, sequence = item.strip().split(":")
                out.append((event_id, phase, int(sequence)))
        return out


def _self_signed(folder: Any) -> tuple[Any, Any]:
    """A self-signed certificate and key for 127.0.0.1 / localhost, written as PEM files in ``folder``."""
    import datetime
    import ipaddress
    from pathlib import Path

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "campusguard test smtp")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = folder / "smtp-cert.pem", folder / "smtp-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture
def smtp_factory(tmp_path):
    made: list[SmtpServer] = []

    def make(**kwargs: Any) -> SmtpServer:
        server = SmtpServer(tmp_path / f"smtp{len(made)}", **kwargs)
        made.append(server)
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def broker_factory(tmp_path: Path):
    """``make(port)``: a started `Broker` on ``port`` (its files under the test's folder), stopped after the test."""
    made: list[Broker] = []

    def make(port: int) -> Broker:
        if not Path(MOSQUITTO).exists():
            pytest.skip("the mosquitto binary is not installed")
        b = Broker(tmp_path, port)
        made.append(b)
        b.start()
        return b

    yield make
    for b in made:
        b.stop()


@pytest.fixture
def broker(broker_factory: Any, unused_port: int) -> Broker:
    """A Mosquitto started on a free loopback port."""
    return broker_factory(unused_port)


@pytest.fixture
def subscriber_factory():
    made: list[Subscriber] = []

    def make(port: int, **kw: Any) -> Subscriber:
        s = Subscriber(port, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
