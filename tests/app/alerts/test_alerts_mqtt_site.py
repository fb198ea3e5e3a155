"""Issue 43: the MQTT sink on several nodes sharing PostgreSQL, against a real Mosquitto and the real server.

A "node" here is a process (or, for the survivor, this test) with its own event store, relay and
MQTT sink over one fresh schema: the outbox is the shared ``alert_outbox`` (claimed with
``FOR UPDATE SKIP LOCKED``), and the retained state counts are the site's, published by the one
node holding the sink's advisory lock. The checks: a node SIGKILLed with messages in its outbox and
in flight leaves none unpublished (each ``(event_id, phase, sequence)`` arrives at least once), and
the retained counts equal the open incidents after the leading node dies.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")
pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the console extra) is not installed")

import psycopg  # noqa: E402
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts.mqtt import MqttSink  # noqa: E402
from campusguard.app.alerts.postgres.outbox import PgOutbox  # noqa: E402
from campusguard.app.alerts.postgres.retained import SiteRetainedState  # noqa: E402
from campusguard.app.events.pgsession import RetryPolicy  # noqa: E402
from campusguard.app.events.postgres import PostgresEventStore  # noqa: E402
from campusguard.app.events.types import Event  # noqa: E402

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
pytestmark = pytest.mark.skipif(not os.path.exists(MOSQUITTO), reason="the mosquitto binary is not installed")

FAST = RetryPolicy(budget_s=2.0, initial_s=0.05, max_s=0.2)
SRC = str(Path(__file__).resolve().parents[3] / "src")

_NODE = """
import sys, time
from campusguard.app.alerts.mqtt import MqttSink
from campusguard.app.alerts.postgres.outbox import PgOutbox
from campusguard.app.alerts.postgres.retained import SiteRetainedState
from campusguard.app.events.postgres import PostgresEventStore
from campusguard.app.events.types import Event

pg, port, dead, incidents = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
store = PostgresEventStore(pg)
state = SiteRetainedState(pg, "mqtt", retry_s=0.3)
sink = MqttSink("127.0.0.1", port, outbox_path=dead + ".db", dead_letter_path=dead, outbox=PgOutbox(pg, "mqtt"),
                site_state=state, max_inflight=20, reconnect_max_s=1)
relay = store.open_relay(sink.send).start()
while not (sink.connected and state.leading):
    time.sleep(0.02)
print("ready", flush=True)
sys.stdin.readline()  # the broker is stopped now: nothing is acknowledged
for i in range(incidents):
    base = dict(camera_id="cam0", rule_name="r", rule_kind="intrusion", zone="z", start_s=1.0, event_id=f"k{i}")
    store.record(Event(phase="start", sequence=0, **base))
    store.record(Event(phase="end", sequence=1, end_s=2.0, **base))
while sink.pending < 2 * incidents or len(sink._inflight) == 0:
    time.sleep(0.02)
print("stored", flush=True)
time.sleep(120)
"""


def _node(pg: str, port: int, tmp: Path, incidents: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _NODE, pg, str(port), str(tmp / "node-a.dead-letter.jsonl"), str(incidents)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": SRC},
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise AssertionError(f"the node did not start: {line!r}")
    return proc


def _outbox_rows(pg: str) -> int:
    with psycopg.connect(pg) as conn:
        row = conn.execute("SELECT COUNT(*) FROM alert_outbox WHERE sink = 'mqtt'").fetchone()
    return int(row[0]) if row else 0


def _survivor(pg: str, port: int, tmp: Path, **kw: Any) -> MqttSink:
    return MqttSink(
        "127.0.0.1",
        port,
        outbox_path=tmp / "node-b.db",
        dead_letter_path=tmp / "node-b.dead-letter.jsonl",
        outbox=PgOutbox(pg, "mqtt", retry=FAST),
        site_state=SiteRetainedState(pg, "mqtt", retry_s=0.3, retry=FAST),
        reconnect_max_s=1,
        **kw,
    )


def _keys(sub: Any) -> list[tuple[str, str, int]]:
    return [(e["after"]["event_id"], e["after"]["phase"], int(e["after"]["sequence"])) for e in sub.events()]


def test_a_node_killed_with_messages_in_its_outbox_and_in_flight_leaves_them_to_another(
    postgres_url, broker, subscriber_factory, tmp_path
):
    """Node A claims a window of messages and hands them to paho while the broker is stopped (nothing
    acknowledged), with the rest of 200 updates waiting in the shared outbox; A is SIGKILLed and the
    broker resumes. Its session ends, so its claims go back: node B publishes every update, each at
    least once (a copy A's socket still delivered is dropped by its event_id and sequence)."""
    sub = subscriber_factory(broker.port)
    incidents = 100
    a = _node(postgres_url, broker.port, tmp_path, incidents)
    try:
        assert broker.proc is not None
        broker.proc.send_signal(signal.SIGSTOP)
        try:
            assert a.stdin is not None and a.stdout is not None
            a.stdin.write("go\n")
            a.stdin.flush()
            assert a.stdout.readline().strip() == "stored"
            assert _outbox_rows(postgres_url) == 2 * incidents  # none acknowledged; a window of them claimed
            a.send_signal(signal.SIGKILL)
            a.wait(10)
        finally:
            broker.proc.send_signal(signal.SIGCONT)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(10)
    store = PostgresEventStore(postgres_url, retry=FAST)
    b = _survivor(postgres_url, broker.port, tmp_path)
    relay = store.open_relay(b.send).start()
    expected = {(f"k{i}", p, s) for i in range(incidents) for p, s in (("start", 0), ("end", 1))}
    try:
        assert wait_until(lambda: set(_keys(sub)) >= expected, 30), len(set(_keys(sub)))
        assert wait_until(lambda: _outbox_rows(postgres_url) == 0, 10)
        assert b.published > 0  # B published what A left
    finally:
        relay.close()
        b.close()
        store.close()
    keys = _keys(sub)
    assert set(keys) == expected
    repeated = sum(n - 1 for n in Counter(keys).values())
    assert repeated <= 20, repeated  # at most A's window (max_inflight) twice
    # on nodes the state topics are the leader's, from the database: never one message per update
    assert len(sub.on("campusguard/cam0/r")) < 2 * incidents


_LEADER = """
import sys, time
from campusguard.app.alerts.mqtt import MqttSink
from campusguard.app.alerts.postgres.outbox import PgOutbox
from campusguard.app.alerts.postgres.retained import SiteRetainedState

pg, port, dead = sys.argv[1], int(sys.argv[2]), sys.argv[3]
state = SiteRetainedState(pg, "mqtt", retry_s=0.3)
sink = MqttSink("127.0.0.1", port, outbox_path=dead + ".db", dead_letter_path=dead, outbox=PgOutbox(pg, "mqtt"),
                site_state=state, reconnect_max_s=1)
while not (sink.connected and state.leading):
    time.sleep(0.02)
print("leading", flush=True)
time.sleep(120)
"""


def _incident(event_id: str, camera: str, rule: str, *, end: bool = False) -> Event:
    base = dict(camera_id=camera, rule_name=rule, rule_kind="intrusion", zone="z", start_s=1.0, event_id=event_id)
    return Event(phase="end", sequence=1, end_s=2.0, **base) if end else Event(phase="start", sequence=0, **base)


def _open_counts(pg: str) -> dict[str, bytes]:
    """``campusguard/<camera>/<rule>`` -> the number of open incidents in the store, as the payload."""
    with psycopg.connect(pg) as conn:
        rows = conn.execute(
            "SELECT camera_id, rule_name, COUNT(*) FILTER (WHERE status = 'open') FROM events GROUP BY 1, 2"
        ).fetchall()
    return {f"campusguard/{c}/{r}": str(n).encode() for c, r, n in rows}


def _retained(sub: Any, topics: set[str]) -> dict[str, bytes]:
    return {t: sub.on(t)[-1] for t in topics if sub.on(t)}


def test_the_retained_counts_are_the_sites_and_move_to_the_next_leader_when_it_dies(
    postgres_url, broker, subscriber_factory, tmp_path
):
    """Node A leads the state (the sink's advisory lock) and publishes the open incidents of the whole
    site, stored by any node; node B publishes none while A lives. A is SIGKILLed, incidents end and
    start meanwhile; B takes the lock and the retained counts equal the open incidents again, as a
    consumer connecting afterwards reads them."""
    store = PostgresEventStore(postgres_url, retry=FAST)  # the tables, and the incidents of every node
    sub = subscriber_factory(broker.port)
    a = subprocess.Popen(
        [sys.executable, "-c", _LEADER, postgres_url, str(broker.port), str(tmp_path / "a.dead-letter.jsonl")],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": SRC},
        text=True,
    )
    b: MqttSink | None = None
    try:
        assert a.stdout is not None and a.stdout.readline().strip() == "leading"
        b = _survivor(postgres_url, broker.port, tmp_path)
        assert wait_until(lambda: b is not None and b.connected, 10)
        for event in [
            _incident("g1", "gate", "intrusion:yard"),
            _incident("g2", "gate", "intrusion:yard"),
            _incident("g3", "gate", "intrusion:yard"),
            _incident("h1", "hall", "loitering:door"),
            _incident("h1", "hall", "loitering:door", end=True),
        ]:
            store.record(event)
        topics = {"campusguard/gate/intrusion:yard", "campusguard/hall/loitering:door"}
        assert wait_until(lambda: _retained(sub, topics) == _open_counts(postgres_url), 10), _retained(sub, topics)
        assert _open_counts(postgres_url) == {t: n for t, n in zip(sorted(topics), (b"3", b"0"), strict=True)}
        assert b._site is not None and not b._site.leading  # one publisher: A

        a.send_signal(signal.SIGKILL)
        a.wait(10)
        store.record(_incident("g1", "gate", "intrusion:yard", end=True))
        store.record(_incident("g2", "gate", "intrusion:yard", end=True))
        store.record(_incident("p1", "park", "intrusion:lot"))
        topics.add("campusguard/park/intrusion:lot")
        assert wait_until(lambda: b is not None and b._site is not None and b._site.leading, 10)
        want = {"campusguard/gate/intrusion:yard": b"1", "campusguard/hall/loitering:door": b"0",
                "campusguard/park/intrusion:lot": b"1"}  # fmt: skip
        assert _open_counts(postgres_url) == want
        assert wait_until(lambda: _retained(sub, topics) == want, 10), _retained(sub, topics)
        late = subscriber_factory(broker.port, client_id="cg-test-late", topic="campusguard/#")
        assert wait_until(lambda: _retained(late, topics) == want, 10), _retained(late, topics)
        # A's last will said offline; B, alive, answered: the site publishes
        assert b"offline" in sub.on("campusguard/available")
        assert wait_until(lambda: late.on("campusguard/available")[-1:] == [b"online"], 10)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait(10)
        if b is not None:
            b.close()
        store.close()


def test_a_rule_without_an_end_phase_pulses_in_the_site_counts_and_an_update_is_put_in_once(postgres_url, make_event):
    """The leader's counts: a line crossing (one closed update, no end) counts for ``pulse_s`` and its
    topic then reads 0; an update handed to the outbox twice (two nodes' relays after a crash) is put in once."""
    store = PostgresEventStore(postgres_url, retry=FAST)
    state = SiteRetainedState(postgres_url, "mqtt", pulse_s=1.0, every_s=0.0, retry_s=0.2, retry=FAST)
    outbox = PgOutbox(postgres_url, "mqtt", retry=FAST)
    try:
        state.start()
        assert wait_until(lambda: state.leading, 5)
        crossing = make_event(event_id="x1", camera_id="gate", rule_name="line_crossing:door", end_s=1.0)
        store.record(crossing)
        assert state.changes() == [("gate", "line_crossing:door", 1)]
        state.record([("gate", "line_crossing:door", 1)])
        assert state.changes() == []
        time.sleep(1.1)
        assert state.changes() == [("gate", "line_crossing:door", 0)]

        assert outbox.add_once("campusguard/events", b"{}", crossing) == (True, 0)
        assert outbox.add_once("campusguard/events", b"{}", crossing) == (False, 0)
        assert len(outbox) == 1
    finally:
        outbox.close()
        state.close()
        store.close()
