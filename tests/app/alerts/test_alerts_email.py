"""The email sink (issue 34) against a real SMTP server on loopback (aiosmtpd): STARTTLS on a test
certificate, the (redacted) snapshot attached, a storm as one digest, a refusing server, and the
outbox that keeps every alert across a stop and a restart, once."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts.email import EmailSinkConfig, email_subject
from campusguard.app.config import parse_config

pytest.importorskip("aiosmtpd", reason="aiosmtpd (the dev extra) runs the test SMTP server")


def _snapshot(folder: Path, event_id: str) -> tuple[Path, bytes, bytes]:
    """A sharp snapshot and its redacted variant (different bytes), as the pipeline writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    sharp, redacted = b"\xff\xd8sharp-jpeg\xff\xd9", b"\xff\xd8redacted-jpeg\xff\xd9"
    path = folder / f"cam0_{event_id}.jpg"
    path.write_bytes(sharp)
    (folder / f"cam0_{event_id}.redacted.jpg").write_bytes(redacted)
    return path, sharp, redacted


def test_an_alert_arrives_over_starttls_with_the_redacted_snapshot_and_a_link(tmp_path, make_event, smtp_factory):
    server = smtp_factory(tls=True).start()
    path, sharp, redacted = _snapshot(tmp_path / "snaps", "e1")
    sink = server.sink(tmp_path, blur={"cam0": "persons"}, public_url="https://guard.campus.example/")
    began = time.monotonic()
    sink.send(make_event(snapshot_path=str(path)))
    assert wait_until(lambda: len(server.messages) == 1, 5.0), "no email within 5 s"
    latency = time.monotonic() - began
    sink.close()
    msg = server.messages[0]
    assert msg["Subject"] == "[CampusGuard] intrusion started: no entry in yard on cam0"
    assert latency < 5.0
    text = msg.get_body(("plain",)).get_content()
    html = msg.get_body(("html",)).get_content()
    assert "zone yard, camera cam0" in text and "https://guard.campus.example/events/e1" in text
    assert 'href="https://guard.campus.example/events/e1"' in html
    attachments = [(a.get_filename(), a.get_content()) for a in msg.iter_attachments()]
    assert attachments == [("cam0_e1.jpg", redacted)]  # the redacted variant, never the sharp one
    assert sink.pending == 0 and sink.sent == 1


def test_an_operator_sink_attaches_the_sharp_snapshot_and_a_missing_variant_attaches_nothing(
    tmp_path, make_event, smtp_factory
):
    server = smtp_factory().start()
    path, sharp, _ = _snapshot(tmp_path / "snaps", "e1")
    operator = server.sink(tmp_path / "op", blur={"cam0": "persons"}, role="operator")
    operator.send(make_event(snapshot_path=str(path)))
    operator.close()
    assert [a.get_content() for a in server.messages[0].iter_attachments()] == [sharp]
    assert "events/e1" not in server.messages[0].get_body(("plain",)).get_content()  # no public_url: no link

    lone = tmp_path / "lone" / "cam9_e2.jpg"  # a camera this sink does not know, no redacted variant: fail closed
    lone.parent.mkdir()
    lone.write_bytes(sharp)
    viewer = server.sink(tmp_path / "viewer", blur={"cam0": "none"})
    viewer.send(make_event(event_id="e2", camera_id="cam9", snapshot_path=str(lone)))
    viewer.close()
    assert list(server.messages[1].iter_attachments()) == []


def test_a_storm_becomes_one_digest(tmp_path, make_event, smtp_factory):
    server = smtp_factory().start()
    sink = server.sink(tmp_path, digest_s=1.0)
    sink.send(make_event(event_id="first"))
    assert wait_until(lambda: len(server.messages) == 1, 10)
    for i in range(6):
        sink.send(make_event(event_id=f"storm{i}"))
    assert wait_until(lambda: len(server.messages) == 2, 5.0)
    time.sleep(0.3)
    sink.close()
    assert len(server.messages) == 2  # the storm went as one email
    digest = server.messages[1]
    assert digest["Subject"].startswith("[CampusGuard] 6 alerts: ")
    assert sorted(server.alerts()) == sorted([("first", "start", 0)] + [(f"storm{i}", "start", 0) for i in range(6)])


def test_a_refusing_server_keeps_the_alerts_until_it_accepts_and_sends_each_once(tmp_path, make_event, smtp_factory):
    server = smtp_factory().start()
    server.refuse = True
    sink = server.sink(tmp_path)
    for i in range(3):
        sink.send(make_event(event_id=f"r{i}"))
    assert wait_until(lambda: sink.last_error is not None, 10)
    assert "554" in str(sink.last_error) and server.messages == [] and sink.pending == 3
    sink.close(timeout_s=0.2)
    # the server goes down, then comes back accepting; a new sink on the same outbox sends what was left
    server.stop()
    server.refuse = False
    again = server.sink(tmp_path)
    again.send(make_event(event_id="r1"))  # put in by the first run: not again
    server.start()
    assert wait_until(lambda: len(server.alerts()) == 3, 10.0)
    time.sleep(0.3)
    again.close()
    assert sorted(server.alerts()) == [("r0", "start", 0), ("r1", "start", 0), ("r2", "start", 0)]
    assert again.pending == 0


def test_a_server_without_starttls_is_refused_when_the_sink_asks_for_it(tmp_path, make_event, smtp_factory):
    server = smtp_factory().start()  # plain SMTP: STARTTLS is not offered
    sink = server.sink(tmp_path, security="starttls", ssl_context=ssl.create_default_context())
    sink.send(make_event())
    assert wait_until(lambda: sink.last_error is not None, 10)
    sink.close(timeout_s=0.2)
    assert server.messages == [] and "STARTTLS" in str(sink.last_error) and sink.pending == 1


def test_the_subject_names_rule_zone_and_camera(make_event):
    assert email_subject([make_event(phase="end")]) == "[CampusGuard] intrusion ended: no entry in yard on cam0"
    assert email_subject([make_event(phase="escalation")]).startswith("[CampusGuard] intrusion NOT ACKNOWLEDGED")
    many = [make_event(event_id=str(i), camera_id=f"c{i}") for i in range(5)]
    assert email_subject(many) == (
        "[CampusGuard] 5 alerts: no entry in yard on c0, no entry in yard on c1, no entry in yard on c2 and 2 more"
    )


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("{kind: email, to: [a@b.example]}", "needs `sender` and `to`"),
        ("{kind: email, sender: a@b.example, to: [nobody]}", "not an email address: nobody"),
        ("{kind: email, sender: a@b.example, to: [x@y.example], security: ssl}", "security"),
        ("{kind: email, sender: a@b.example, to: [x@y.example], password_env: PW}", "needs `username`"),
        ("{kind: email, sender: a@b.example, to: [x@y.example], password: hunter2}", "unknown key 'password'"),
    ],
)
def test_bad_email_sections_are_one_line_errors(block, message):
    from campusguard.errors import ConfigError

    with pytest.raises(ConfigError, match=message) as info:
        parse_config(f"cameras: []\nalerts:\n  - {block}\n", "c.yaml")
    assert str(info.value).startswith("c.yaml:3: alerts[0]") and "\n" not in str(info.value)


def test_the_email_section_defaults():
    cfg = EmailSinkConfig(sender="a@b.example", to=["c@d.example"])
    assert (cfg.kind, cfg.port, cfg.security, cfg.role, cfg.digest_s, cfg.sink_name) == (
        "email",
        587,
        "starttls",
        "viewer",
        60.0,
        "email",
    )
