"""Durable delivery across a SIGKILL, with real processes (issues 31 and 34): `watch` runs as a
subprocess (``tests/app/fakes_watch.py``: the real service with a colour-blob detector) on a
synthetic scene while the webhook receiver or the SMTP server is down; it is killed; the next start,
on a quiet scene with the receiver up, delivers every start and end alert of the first run, once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.app.events import read_events
from campusguard.app.media.redact import redacted_path

TESTS_APP = Path(__file__).parents[1]
ROOT = TESTS_APP.parents[1]
sys.path.insert(0, str(TESTS_APP))
from fakes_watch import scene_config, write_walks  # noqa: E402


def _write_quiet(path: Path, frames: int = 15, fps: float = 10.0) -> Path:
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (320, 180))
    for _ in range(frames):
        writer.write(np.full((180, 320, 3), 30, np.uint8))
    writer.release()
    return path


def _watch(config: Path, pace_s: float, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(TESTS_APP / "fakes_watch.py"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "CG_FAKE_SECONDS_PER_IMAGE": str(pace_s), **(env or {})},
        cwd=ROOT,
    )


def _lines_until(proc: subprocess.Popen[str], phase: str, count: int) -> list[str]:
    """Read the run's stdout until ``count`` intrusion lines of ``phase`` were printed; return them."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        if line.startswith(f"[{phase}]") and "intrusion" in line:
            seen.append(line)
            if len(seen) >= count:
                return seen
    raise AssertionError(f"the run ended before {count} intrusion {phase} line(s): {proc.communicate()[1][-2000:]}")


def _kill(proc: subprocess.Popen[str]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed: pace it slower"


def _config(run: Path, scene: Path, sink: str, extra_camera: str = "") -> Path:
    text = scene_config(scene, run).replace("alerts:\n", f"alerts:\n{sink}", 1)
    if extra_camera:
        text = text.replace(f"    source: {scene}\n", f"    source: {scene}\n{extra_camera}", 1)
    path = run / "watch.yaml"
    path.write_text(text)
    return path


def _expected(run: Path) -> list[tuple[str, str]]:
    """Every stored incident's start and end."""
    events = read_events(run / "events.db")
    assert all(e.end_s is not None for e in events), "an incident was left open"
    return sorted((e.event_id, p) for e in events for p in ("start", "end"))


def _once(deliveries: list[tuple[str, str, int]], expected: list[tuple[str, str]]) -> None:
    repeated = [k for k, n in Counter(deliveries).items() if n > 1]
    assert not repeated, f"delivered more than once: {repeated}"
    got = sorted((i, p) for i, p, _ in deliveries if p != "update")
    assert got == expected


def test_a_webhook_refused_for_a_whole_run_then_sigkill_delivers_every_alert_once_at_the_next_start(
    tmp_path, receiver_factory, unused_port
):
    """Issue 31, target 4."""
    run = tmp_path / "run"
    run.mkdir()
    url = f"http://127.0.0.1:{unused_port}/hook"  # nothing listens: refused for the whole first run
    sink = f"  - kind: webhook\n    url: {url}\n    backoff_s: 0.05\n    backoff_max_s: 0.5\n"
    config = _config(run, write_walks(tmp_path / "walks.mp4", walks=3), sink)
    first = _watch(config, 0.03)
    _lines_until(first, "end", 2)
    _kill(first)
    raised = read_events(run / "events.db")
    assert sum(e.rule_kind == "intrusion" for e in raised) >= 2 and any(e.end_s is None for e in raised)

    receiver = receiver_factory(port=unused_port)  # the receiver is up from now on
    _config(run, _write_quiet(tmp_path / "quiet.mp4"), sink)  # the same store and sinks, a quiet scene
    second = _watch(config, 0.0)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    time.sleep(0.5)  # anything repeated would arrive now
    deliveries = [(b["event_id"], b["phase"], b["sequence"]) for b in receiver.received]
    _once(deliveries, _expected(run))
    assert {e.event_id for e in raised} == {i for i, _, _ in deliveries}  # the first run's incidents, no other


def test_an_intrusion_emails_within_5_s_then_smtp_down_sigkill_up_emails_every_alert_once(tmp_path, smtp_factory):
    """Issue 34, target 2: the start reaches the SMTP server (STARTTLS, the test certificate trusted
    through SSL_CERT_FILE) within 5 s with the redacted snapshot; then the server goes down, the
    watch is killed, the server comes back and the next start sends every email left, once."""
    pytest.importorskip("aiosmtpd", reason="aiosmtpd (the dev extra) runs the test SMTP server")
    server = smtp_factory(tls=True).start()
    env = {"SSL_CERT_FILE": str(server.cafile)}
    run = tmp_path / "run"
    run.mkdir()
    sink = (
        f"  - kind: email\n    host: 127.0.0.1\n    port: {server.port}\n    security: starttls\n"
        "    sender: campusguard@campus.example\n    to: [duty@campus.example]\n    digest_s: 0\n"
        "    backoff_s: 0.05\n    backoff_max_s: 0.5\n"
    )
    config = _config(run, write_walks(tmp_path / "walks.mp4", walks=3), sink, "    privacy:\n      blur: persons\n")
    first = _watch(config, 0.05, env)
    (line,) = _lines_until(first, "start", 1)
    printed = time.monotonic()
    event_id = line.rsplit("id=", 1)[1].strip()

    def arrived() -> bool:
        return any(i == event_id and p == "start" for i, p, _ in server.alerts())

    while not arrived() and time.monotonic() - printed < 5.0:
        time.sleep(0.02)
    assert arrived(), "the intrusion start was not emailed within 5 s"
    print(f"intrusion start emailed {time.monotonic() - printed:.2f} s after the watch printed it")
    email = next(m for m in server.messages if event_id in str(m["X-CampusGuard-Alerts"]))
    assert email["Subject"].startswith("[CampusGuard] intrusion started: intrusion:east in east on cam1")
    (stored,) = [e for e in read_events(run / "events.db") if e.event_id == event_id]
    assert stored.snapshot_path, "the incident has no snapshot"
    attached = [a.get_content() for a in email.iter_attachments()]
    assert attached == [redacted_path(Path(stored.snapshot_path)).read_bytes()]  # the redacted variant
    assert attached[0] != Path(stored.snapshot_path).read_bytes()

    server.stop()  # SMTP down
    _lines_until(first, "end", 2)
    _kill(first)
    assert any(e.end_s is None for e in read_events(run / "events.db"))
    server.start()  # SMTP up again, on the same port
    _config(run, _write_quiet(tmp_path / "quiet.mp4"), sink, "    privacy:\n      blur: persons\n")
    second = _watch(config, 0.0, env)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err[-3000:]
    time.sleep(0.5)
    _once(server.alerts(), _expected(run))
