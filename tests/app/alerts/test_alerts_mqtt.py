"""MQTT sink against a real Mosquitto broker started by the test on a free loopback port: topic
layout, retained state, last will, and no alert lost across broker and process restarts."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from campusguard.errors import InvalidInputError

mqtt = pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the console extra) is not installed")

from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts.mqtt import MqttSink, topic_level  # noqa: E402 - after the importorskip

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
pytestmark = pytest.mark.skipif(not os.path.exists(MOSQUITTO), reason="the mosquitto binary is not installed")


def _sink(port: int, tmp_path: Path, **kw: Any) -> MqttSink:
    kw.setdefault("reconnect_max_s", 1)
    return MqttSink("127.0.0.1", port, outbox_path=tmp_path / "outbox.db", **kw)


def test_topic_layout_state_and_availability(broker, subscriber_factory, tmp_path, make_event):
    sub = subscriber_factory(broker.port)
    sink = _sink(broker.port, tmp_path)
    start = make_event(event_id="e1", camera_id="gate", rule_name="no entry/night")
    sink.send(start)
    state_topic = "campusguard/gate/no entry_night"
    assert wait_until(lambda: sub.on(state_topic) == [b"1"])
    sink.send(make_event(event_id="e1", phase="end", end_s=20.0, camera_id="gate", rule_name="no entry/night"))
    assert wait_until(lambda: sub.on(state_topic) == [b"1", b"0"])
    assert wait_until(lambda: len(sub.events()) == 2)
    new, end = sub.events()
    assert new["type"] == "new" and new["before"] is None and new["after"] == start.to_dict()
    assert end["type"] == "end" and end["before"] == start.to_dict() and end["after"]["end_s"] == 20.0
    assert wait_until(lambda: sink.pending == 0) and sink.published == 4
    sink.close()
    assert wait_until(lambda: sub.on("campusguard/available")[-1:] == [b"offline"])
    assert b"online" in sub.on("campusguard/available")

    # retained: a consumer that connects later still learns the state and the availability
    late = subscriber_factory(broker.port, client_id="cg-test-late")
    assert wait_until(lambda: late.on(state_topic) == [b"0"] and late.on("campusguard/available") == [b"offline"])


def test_no_alert_lost_when_the_broker_restarts(broker, subscriber_factory, tmp_path, make_event):
    sub = subscriber_factory(broker.port)
    sink = _sink(broker.port, tmp_path)
    before = [f"up-{i}" for i in range(5)]
    during = [f"down-{i}" for i in range(5)]
    after = [f"back-{i}" for i in range(5)]
    for eid in before:
        sink.send(make_event(event_id=eid))
    assert wait_until(lambda: sub.event_ids() >= set(before))

    broker.stop()
    assert wait_until(lambda: not sink.connected, 10)
    for eid in during:
        sink.send(make_event(event_id=eid))
    time.sleep(0.5)
    assert sink.pending >= 2 * len(during)  # committed to the outbox, not acknowledged
    assert not sub.event_ids() & set(during)

    broker.start()
    for eid in after:
        sink.send(make_event(event_id=eid))
    assert wait_until(lambda: sub.event_ids() >= set(before + during + after), 30), sorted(sub.event_ids())
    # 15 incidents open: the retained state ends right even when resent messages arrived out of
    # order (the sink re-publishes the current counts once its backlog is acknowledged)
    assert wait_until(lambda: sink.pending == 0 and sub.on("campusguard/cam0/no entry")[-1:] == [b"15"])
    sink.close()


def test_outbox_survives_a_process_that_never_reached_the_broker(
    tmp_path, unused_port, broker_factory, subscriber_factory, make_event
):
    port = unused_port  # nothing listens there yet
    sink = _sink(port, tmp_path)
    for i in range(3):
        sink.send(make_event(event_id=f"offline-{i}"))
    sink.close(timeout_s=0.3)
    assert sink.published == 0

    broker = broker_factory(port)
    try:
        sub = subscriber_factory(port)
        again = _sink(port, tmp_path)  # same outbox file: delivers what the first one left
        assert wait_until(lambda: sub.event_ids() == {"offline-0", "offline-1", "offline-2"})
        assert wait_until(lambda: again.pending == 0)
        again.close()
    finally:
        broker.stop()


def _child_sink(port: int, outbox: Path, event_id: str, *, wait_connected: bool) -> subprocess.Popen[str]:
    """A separate Python process holding a sink: it sends one event, prints ``sent`` (after the
    broker acknowledged it when ``wait_connected``) and then waits to be killed."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from campusguard.app.alerts.mqtt import MqttSink
        from campusguard.app.events import Event
        sink = MqttSink("127.0.0.1", {port}, outbox_path={str(outbox)!r}, reconnect_max_s=1)
        while {wait_connected!r} and not sink.connected:
            time.sleep(0.02)
        sink.send(Event({event_id!r}, "start", "cam0", "no entry", "intrusion", "yard", 1.0))
        while {wait_connected!r} and sink.pending:
            time.sleep(0.02)
        print("sent", flush=True)
        sys.stdin.readline()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "sent":
        proc.kill()
        raise AssertionError(f"child sink did not send: {line!r}")
    return proc


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def test_killed_process_last_will_and_outbox(broker, subscriber_factory, tmp_path, make_event):
    """SIGKILL a connected process: the broker publishes its last will (``offline``). SIGKILL one
    that queued an alert while the broker was away: the next sink on its outbox delivers it."""
    sub = subscriber_factory(broker.port)
    outbox = tmp_path / "outbox.db"
    first = _child_sink(broker.port, outbox, "k1", wait_connected=True)
    assert wait_until(lambda: sub.event_ids() == {"k1"})
    assert wait_until(lambda: sub.on("campusguard/available")[-1:] == [b"online"])
    _kill(first)
    assert wait_until(lambda: sub.on("campusguard/available")[-1:] == [b"offline"], 10)

    broker.stop()
    second = _child_sink(broker.port, outbox, "k2", wait_connected=False)
    _kill(second)
    broker.start()
    again = MqttSink("127.0.0.1", broker.port, outbox_path=outbox, reconnect_max_s=1)
    assert wait_until(lambda: sub.event_ids() == {"k1", "k2"}, 30), sorted(sub.event_ids())
    assert wait_until(lambda: again.pending == 0)
    again.close()


def test_bounded_outbox_drops_the_oldest_and_counts_them(tmp_path, unused_port, make_event):
    sink = _sink(unused_port, tmp_path, max_outbox=3)
    for i in range(3):
        sink.send(make_event(event_id=f"e{i}"))  # two messages each: the event and the state
    assert sink.pending == 3 and sink.dropped == 3
    sink.close(timeout_s=0.1)


def test_phase_filter_and_bad_arguments(tmp_path, unused_port, make_event):
    sink = _sink(unused_port, tmp_path, phases=("start",))
    sink.send(make_event(phase="update"))
    assert sink.pending == 0
    sink.close(timeout_s=0.1)
    with pytest.raises(InvalidInputError, match="qos"):
        MqttSink("127.0.0.1", 1, outbox_path=tmp_path / "o.db", qos=0)
    with pytest.raises(InvalidInputError, match="reconnect"):
        MqttSink("127.0.0.1", 1, outbox_path=tmp_path / "o.db", reconnect_min_s=5, reconnect_max_s=1)


@pytest.mark.parametrize(
    ("name", "level"),
    [("gate", "gate"), ("a/b", "a_b"), ("x+y#z", "x_y_z"), ("", "_"), ("intrusion:yard", "intrusion:yard")],
)
def test_topic_level(name, level):
    assert topic_level(name) == level


def test_watch_config_with_an_mqtt_sink_publishes_the_pipeline_events(broker, subscriber_factory, tmp_path):
    """`alerts: [{kind: mqtt}]` in a watch config: the real pipeline on the synthetic scene reports
    its intrusion and fire-lane incidents on the broker, with the per-rule state back at 0 after."""
    import io
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from fakes_watch import BlobDetector, scene_config, write_scene

    from campusguard.app.config import parse_config
    from campusguard.app.events import read_events
    from campusguard.app.service import WatchService

    sub = subscriber_factory(broker.port)
    video = write_scene(tmp_path / "scene.mp4")
    text = scene_config(video, tmp_path).replace(
        "alerts:\n", f"alerts:\n  - kind: mqtt\n    port: {broker.port}\n    reconnect_max_s: 1\n", 1
    )
    service = WatchService(
        parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO()
    )
    assert service.run()
    stored = {e.event_id: e for e in read_events(tmp_path / "events.db")}
    assert {e.rule_kind for e in stored.values()} == {"intrusion", "fire_lane"}
    assert wait_until(lambda: sub.event_ids("new") == set(stored) and sub.event_ids("end") == set(stored))
    for event in stored.values():
        assert sub.on(f"campusguard/cam1/{topic_level(event.rule_name)}")[-1] == b"0"
    assert _outbox_rows(tmp_path / "events.mqtt-outbox.db") == 0  # the default outbox, beside the event store


def _outbox_rows(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0])


# issue 24: a state that returns to idle, an unreachable broker said at start, each update once -----
def test_a_rule_without_an_end_phase_pulses_its_state_back_to_idle(broker, subscriber_factory, tmp_path, make_event):
    """Line crossings (one instantaneous update each, no end): the retained state counts the
    crossings of the last ``pulse_s`` and returns to 0, instead of counting up forever."""
    sub = subscriber_factory(broker.port)
    sink = _sink(broker.port, tmp_path, pulse_s=0.5)
    try:
        for k in range(3):
            sink.send(
                make_event(
                    event_id=f"x{k}", rule_name="gate", rule_kind="line_crossing", start_s=float(k), end_s=float(k)
                )
            )
        topic = "campusguard/cam0/gate"
        assert wait_until(lambda: sub.on(topic)[-1:] == [b"0"] and len(sub.on(topic)) >= 4, 10), sub.on(topic)
        assert sub.on(topic)[:3] == [b"1", b"2", b"3"]
        assert not sink._open  # nothing is kept per crossing
    finally:
        sink.close()


def test_an_unreachable_broker_at_start_is_one_warning_and_the_outbox_keeps_the_messages(
    tmp_path, unused_port, make_event, caplog
):
    with caplog.at_level(logging.WARNING, logger="campusguard.app.alerts.mqtt"):
        sink = _sink(unused_port, tmp_path, connect_wait_s=0.5)
    try:
        (line,) = [r.getMessage() for r in caplog.records if "not reachable" in r.getMessage()]
        assert f"127.0.0.1:{unused_port}" in line and "outbox" in line
        assert not sink.connected
        sink.send(make_event())
    finally:
        sink.close(timeout_s=0.2)
    assert _outbox_rows(tmp_path / "outbox.db") == 2  # the event and the state, for the next start


def test_an_update_already_in_the_outbox_is_not_published_again_by_the_next_sink(
    broker, subscriber_factory, tmp_path, make_event
):
    """A restart (or a re-read file) raises the same updates again: the outbox's ledger publishes
    each (event id, phase, sequence) once; the state topic is still kept right. Payloads carry the sequence."""
    sub = subscriber_factory(broker.port)
    updates = [
        make_event(phase="start"),
        make_event(phase="update", sequence=1, count=3),
        make_event(phase="end", sequence=2, end_s=20.0),
    ]
    for _ in range(2):  # two runs of the same incident
        sink = _sink(broker.port, tmp_path)
        for ev in updates:
            sink.send(ev)
        sink.close()
    assert wait_until(lambda: len(sub.events()) >= 3)
    time.sleep(0.5)
    assert [(e["type"], e["after"]["sequence"]) for e in sub.events()] == [("new", 0), ("update", 1), ("end", 2)]
    assert sub.on("campusguard/cam0/no entry")[-1] == b"0"


def test_pulse_s_comes_from_the_config(tmp_path) -> None:
    """`pulse_s:` in an `mqtt` alert section reaches the sink (validated: positive, at most an hour)."""
    from campusguard.app.alerts.mqtt import MqttSink, MqttSinkConfig
    from campusguard.app.config import parse_config
    from campusguard.errors import ConfigError

    def config(extra: str) -> str:
        return f"cameras:\n  - {{id: a, source: x.mp4}}\nalerts:\n  - {{kind: mqtt, host: 127.0.0.1{extra}}}\n"

    cfg = parse_config(config(", pulse_s: 2.5"), "c.yaml").config.alerts[0]
    assert isinstance(cfg, MqttSinkConfig)
    sink = MqttSink.from_config(cfg, default_outbox=tmp_path / "o.db")
    try:
        assert sink.pulse_s == 2.5
    finally:
        sink.close(timeout_s=0.1)
    with pytest.raises(ConfigError, match=r"c\.yaml:4: alerts\[0\]\.pulse_s"):
        parse_config(config(", pulse_s: 0"), "c.yaml")
