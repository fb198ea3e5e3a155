"""Issue 44 for the alert sinks: every sink survives whatever an alert holds (an alert that cannot be
composed goes to the dead letters with the reason, the next one is delivered, the sender never dies),
webhook credentials that work (user info as HTTP Basic, headers from the environment) and never show,
email refuses a login in clear to a remote host, MQTT has TLS and its password from the environment.
Real receivers: a loopback HTTP server, aiosmtpd, Mosquitto (skipped where missing)."""

from __future__ import annotations

import base64
import io
import json
import logging
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts.jsonl import JsonlSink
from campusguard.app.alerts.ledger import DeliveryLedger
from campusguard.app.alerts.stdout import StdoutSink
from campusguard.app.alerts.webhook import WebhookSink
from campusguard.app.config import parse_config, validate_config
from campusguard.app.engine import wiring
from campusguard.cli.main import main
from campusguard.errors import ConfigError

CRLF_ZONE = "Gate\r\nBcc: x@example.org"


class AuthReceiver:
    """A loopback HTTP receiver that wants HTTP Basic ``hook:pw`` and answers 400 to alerts whose zone has a line break."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.hosts: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                outer.auth.append(self.headers.get("Authorization"))
                outer.hosts.append(self.headers.get("Host"))
                good = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"hook:W3bhook-pw").decode()
                code = 401 if not good else 400 if "\n" in str(body.get("zone")) else 200
                if code == 200:
                    outer.received.append(body)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_webhook_url_credentials_go_as_basic_auth_and_never_show(tmp_path: Path, make_event: Any, caplog: Any) -> None:
    receiver = AuthReceiver()
    url = f"http://hook:W3bhook-pw@127.0.0.1:{receiver.port}/in"
    ledger = DeliveryLedger(tmp_path / "events.delivered.db", "webhook:x")
    caplog.set_level(logging.DEBUG, logger="campusguard")
    try:
        # no re-drive: it would put the refused alert back once "good" is delivered, and count it twice
        sink = WebhookSink(url, dead_letter_path=tmp_path / "dead.jsonl", backoff_s=0.01, ledger=ledger, redrive=False)
        assert (
            "W3bhook-pw" not in sink.outbox_sender.thread.name
            and sink.shown == f"http://hook:***@127.0.0.1:{receiver.port}/in"
        )
        sink.send(make_event(event_id="bad", zone=CRLF_ZONE))  # the receiver refuses this one for good
        sink.send(make_event(event_id="good"))
        assert wait_until(lambda: [r["event_id"] for r in receiver.received] == ["good"], 10)
        assert wait_until(lambda: sink.dead_lettered == 1, 10)
        sink.close()
    finally:
        receiver.stop()
    assert receiver.hosts[0] == f"127.0.0.1:{receiver.port}"  # the user info is not part of the host any more
    dead = [json.loads(line) for line in (tmp_path / "dead.jsonl").read_text().splitlines()]
    assert dead[0]["event"]["event_id"] == "bad" and dead[0]["error"] == "HTTP 400"
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert b"W3bhook-pw" not in written and b"hook:***@" in written  # dead letters, outbox, ledger key
    assert "W3bhook-pw" not in caplog.text


def test_webhook_headers_come_from_the_environment(tmp_path: Path, make_event: Any, monkeypatch: Any) -> None:
    seen: list[str | None] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.headers.get("Authorization"))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("CG_TEST_HOOK_AUTH", "Bearer tok-from-env-123")
    block = {
        "kind": "webhook",
        "url": f"http://127.0.0.1:{server.server_address[1]}/in",
        "headers_env": {"Authorization": "CG_TEST_HOOK_AUTH"},
        "backoff_s": 0.01,
    }
    loaded = validate_config(
        {"cameras": [], "alerts": [block], "storage": {"sqlite": str(tmp_path / "events.db")}}, "c.yaml"
    )
    try:
        sinks = wiring.open_alert_sinks(loaded, io.StringIO())
        sinks[0].send(make_event())
        assert wait_until(lambda: seen == ["Bearer tok-from-env-123"], 10)
        sinks[0].close()
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.delenv("CG_TEST_HOOK_AUTH")
    with pytest.raises(
        ConfigError,
        match=r"alerts\[0\]: webhook sink webhook header Authorization: the environment variable CG_TEST_HOOK_AUTH is not set",
    ):
        wiring.open_alert_sinks(loaded, io.StringIO())


def test_email_with_security_none_and_a_login_to_a_remote_host_exits_2_with_one_line(
    tmp_path: Path, capsys: Any
) -> None:
    config = tmp_path / "watch.yaml"
    config.write_text(
        "cameras: []\nalerts:\n  - kind: email\n    host: smtp.example.org\n    port: 25\n    security: none\n"
        "    username: alerts\n    password_env: CG_SMTP_PW\n    sender: cg@example.org\n    to: [sec@example.org]\n"
        f"storage:\n  sqlite: {tmp_path / 'events.db'}\n"
    )
    assert main(["watch", str(config)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "security: none would send the SMTP login in clear" in err
    assert err.startswith(f"error: {config}:3: alerts[0]")
    # to a loopback relay it is allowed
    ok = config.read_text().replace("smtp.example.org", "127.0.0.1")
    parse_config(ok, "w.yaml")


def test_email_an_alert_whose_subject_cannot_be_composed_is_dead_lettered_and_the_next_goes(
    tmp_path: Path, make_event: Any, smtp_factory: Any
) -> None:
    pytest.importorskip("aiosmtpd")
    server = smtp_factory().start()
    sink = server.sink(tmp_path)
    sink.send(make_event(event_id="forged", zone=CRLF_ZONE))
    sink.send(make_event(event_id="fine"))
    assert wait_until(lambda: len(server.messages) == 1, 10), "the good alert did not arrive"
    sink.send(make_event(event_id="later"))  # the sender is alive
    assert wait_until(lambda: len(server.messages) == 2, 10)
    sink.close()
    assert [m["Subject"] for m in server.messages][0].startswith("[CampusGuard] intrusion started: no entry in yard")
    assert all("Bcc" not in str(m) for m in server.messages)
    dead = [json.loads(line) for line in (tmp_path / "email.dead.jsonl").read_text().splitlines()]
    assert [d["event"]["event_id"] for d in dead] == ["forged"] and "cannot compose the email" in dead[0]["error"]
    assert sink.pending == 0


def test_email_a_digest_with_one_unsendable_alert_sends_the_others(
    tmp_path: Path, make_event: Any, smtp_factory: Any
) -> None:
    pytest.importorskip("aiosmtpd")
    server = smtp_factory().start()
    sink = server.sink(tmp_path, digest_s=0.5)
    sink.send(make_event(event_id="first"))
    assert wait_until(lambda: len(server.messages) == 1, 10)
    for eid, zone in (("a", "yard"), ("b", CRLF_ZONE), ("c", "gate")):
        sink.send(make_event(event_id=eid, zone=zone))
    assert wait_until(lambda: len(server.messages) == 2, 5)
    sink.close()
    assert sorted(e for e, _, _ in server.alerts()) == ["a", "c", "first"]


def test_stdout_and_jsonl_survive_an_alert_with_line_breaks_and_a_lone_surrogate(
    tmp_path: Path, make_event: Any
) -> None:
    out = io.StringIO()
    stdout = StdoutSink(out)
    jsonl = JsonlSink(tmp_path / "alerts.jsonl")
    for sink in (stdout, jsonl):
        sink.send(make_event(event_id="odd", zone=CRLF_ZONE, rule_name="r\ud800"))
        sink.send(make_event(event_id="next"))
    jsonl.close()
    lines = out.getvalue().splitlines()
    assert (
        len(lines) == 2 and "zone=Gate\\r\\nBcc" in lines[0] and "r\\ud800" in lines[0] and lines[1].endswith("id=next")
    )
    rows = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [r["event_id"] for r in rows] == ["odd", "next"] and rows[0]["zone"] == CRLF_ZONE


def test_mqtt_config_takes_tls_and_the_password_from_env_or_file(tmp_path: Path, monkeypatch: Any) -> None:
    base = {"kind": "mqtt", "host": "broker.example.org", "port": 8883, "username": "cg"}
    store = {"sqlite": str(tmp_path / "events.db")}
    pw = tmp_path / "mqtt.pw"
    pw.write_text("Mq77-secret\n")
    loaded = validate_config(
        {
            "cameras": [],
            "alerts": [{**base, "password_file": str(pw), "tls": {"ca": "/etc/ssl/x.pem"}}],
            "storage": store,
        },
        "c.yaml",
    )
    assert loaded.config.alerts[0].tls.ca == "/etc/ssl/x.pem"  # type: ignore[union-attr]
    for bad, message in (
        ({"password": "a", "password_env": "B"}, "give the broker password one way"),
        ({"tls": {"cert": "c.pem"}}, "give both `cert` and `key`"),
    ):
        with pytest.raises(ConfigError, match=message):
            validate_config({"cameras": [], "alerts": [{**base, **bad}], "storage": store}, "c.yaml")
    from campusguard.app.infra.secrets import resolve_secret

    assert resolve_secret(None, None, str(pw), "mqtt") == "Mq77-secret"
    monkeypatch.setenv("CG_MQTT_PW", "from-env-pw")
    assert resolve_secret(None, "CG_MQTT_PW", None, "mqtt") == "from-env-pw"


MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def test_mqtt_an_alert_that_cannot_be_composed_is_dead_lettered_and_the_next_is_published(
    tmp_path: Path, make_event: Any, unused_port: int
) -> None:
    mqtt = pytest.importorskip("paho.mqtt.client")
    if not Path(MOSQUITTO).exists():
        pytest.skip("mosquitto is not installed")
    import getpass
    import subprocess

    conf = tmp_path / "m.conf"
    conf.write_text(f"user {getpass.getuser()}\nlistener {unused_port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from campusguard.app.alerts.mqtt import MqttSink

    got: list[str] = []
    try:
        sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="cg-hardening-sub")
        ready = threading.Event()
        sub.on_connect = lambda c, u, f, rc, p: c.subscribe("campusguard/events", qos=1)
        sub.on_subscribe = lambda *a: ready.set()
        sub.on_message = lambda c, u, m: got.append(json.loads(m.payload)["after"]["event_id"])

        def connects() -> bool:
            try:
                return sub.connect("127.0.0.1", unused_port) == 0
            except OSError:
                return False

        assert wait_until(connects, 10), "mosquitto did not start"
        sub.loop_start()
        assert ready.wait(10)
        sink = MqttSink("127.0.0.1", unused_port, outbox_path=tmp_path / "outbox.db", reconnect_max_s=1)
        sink.send(make_event(event_id="odd", rule_name="r\ud800"))  # a lone surrogate: no UTF-8, no topic
        sink.send(make_event(event_id="next"))
        assert wait_until(lambda: got == ["next"], 10), got
        sink.send(make_event(event_id="after"))
        assert wait_until(lambda: got == ["next", "after"], 10), got
        sink.close()
        sub.disconnect()
        sub.loop_stop()
    finally:
        broker.terminate()
        broker.wait(10)
    dead = [json.loads(line) for line in (tmp_path / "outbox.dead-letter.jsonl").read_text().splitlines()]
    assert dead[0]["event"]["event_id"] == "odd" and dead[0]["error"].startswith("cannot compose: UnicodeEncodeError")
