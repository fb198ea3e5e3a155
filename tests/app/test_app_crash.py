"""Crash safety (issue 24): `watch` SIGKILLed twice mid-run, then restarted, with a real Mosquitto
(persistent QoS 1 subscriber) and a loopback webhook receiver: the same incidents as an
uninterrupted run, none left open, no alert sent twice on any sink. And an update the store did
not take is in the spool at once, so a kill while PostgreSQL is down loses none.

The watch runs as a subprocess (``tests/app/fakes_watch.py``) on a synthetic file, its detector
paced (``CG_FAKE_SECONDS_PER_IMAGE``) so the run lasts long enough to be killed and drops no
frame: every run raises the same, deterministic, event ids.
"""

from __future__ import annotations

import getpass
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_walks  # noqa: E402
from webhook_receiver import WebhookReceiver  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
mqtt = pytest.importorskip("paho.mqtt.client", reason="paho-mqtt (the console extra) is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


class Mosquitto:
    """A private Mosquitto with persistence on a free loopback port."""

    def __init__(self, folder: Path) -> None:
        if not os.path.exists(MOSQUITTO):
            pytest.skip("the mosquitto binary is not installed")
        self.port = _free_port()
        folder.mkdir(parents=True)
        conf = folder / "mosquitto.conf"
        conf.write_text(
            f"user {getpass.getuser()}\nlistener {self.port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {folder}/\nlog_dest file {folder}/log.txt\n"
        )
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                return False

        _wait(answers, 10, "mosquitto")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)


class Subscriber:
    """A QoS 1 subscriber with a persistent session, keeping every event message."""

    def __init__(self, port: int) -> None:
        self.events: list[dict[str, Any]] = []
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="cg-crash-sub", clean_session=False)
        subscribed = threading.Event()
        client.on_connect = lambda c, u, f, rc, p: c.subscribe("campusguard/events", qos=1)
        client.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
        client.on_message = lambda c, u, msg: self.events.append(json.loads(msg.payload))
        client.connect("127.0.0.1", port, keepalive=10)
        client.loop_start()
        assert subscribed.wait(10)
        self.client = client

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def _watch(config: Path, pace_s: float) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CG_FAKE_SECONDS_PER_IMAGE": str(pace_s)}
    return subprocess.Popen(
        [sys.executable, str(HERE / "fakes_watch.py"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _kill_after_starts(proc: subprocess.Popen[str], starts: int) -> None:
    """SIGKILL once ``starts`` intrusion start lines were printed, and a little later (mid-incident)."""
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        if line.startswith("[start]") and "intrusion" in line:
            seen += 1
            if seen >= starts:
                break
    time.sleep(0.3)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed: pace it slower"


def _keys(pairs: list[tuple[str, str]]) -> Counter[tuple[str, str]]:
    return Counter(pairs)


def test_sigkill_twice_then_a_restart_gives_the_same_incidents_once_on_every_sink(tmp_path: Path) -> None:
    scene = write_walks(tmp_path / "walks.mp4")
    # the reference: one uninterrupted run of the same file
    ref = tmp_path / "ref"
    ref.mkdir()
    assert WatchService(
        parse_config(scene_config(scene, ref), "ref.yaml"),
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
    ).run()
    expected = {e.event_id: e for e in read_events(ref / "events.db")}
    assert sum(e.rule_kind == "intrusion" for e in expected.values()) == 3
    want = sorted((i, p) for i in expected for p in ("start", "end"))

    broker, receiver = Mosquitto(tmp_path / "mosquitto"), WebhookReceiver()
    sub = Subscriber(broker.port)
    try:
        run = tmp_path / "run"
        run.mkdir()
        text = scene_config(scene, run).replace(
            "alerts:\n",
            f"alerts:\n  - kind: webhook\n    url: {receiver.url}\n"
            f"  - kind: mqtt\n    port: {broker.port}\n    reconnect_max_s: 1\n",
            1,
        )
        config = run / "watch.yaml"
        config.write_text(text)
        _kill_after_starts(_watch(config, 0.04), 1)
        _kill_after_starts(_watch(config, 0.04), 2)
        left_open = [e for e in read_events(run / "events.db") if e.end_s is None]
        assert left_open, "the kills left no incident open: the test does not test the restart"
        last = _watch(config, 0.0)
        _, err = last.communicate(timeout=120)
        assert last.returncode == 0, err

        stored = {e.event_id: e for e in read_events(run / "events.db")}
        assert set(stored) == set(expected)  # the same incidents
        assert all(e.end_s is not None for e in stored.values())  # none left open
        for event_id, event in expected.items():
            assert (stored[event_id].start_s, stored[event_id].end_s) == (event.start_s, event.end_s)

        jsonl = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        _wait(lambda: len(receiver.received) >= len(want), 10, "the webhook deliveries")
        _wait(lambda: sum(e["type"] != "update" for e in sub.events) >= len(want), 20, "the MQTT deliveries")
        time.sleep(1.0)  # anything repeated would arrive now
        mqtt_type = {"new": "start", "update": "update", "end": "end"}
        sinks = {
            "jsonl": [(d["event_id"], d["phase"], d["sequence"]) for d in jsonl],
            "webhook": [(d["event_id"], d["phase"], d["sequence"]) for d in receiver.received],
            "mqtt": [(m["after"]["event_id"], mqtt_type[m["type"]], m["after"]["sequence"]) for m in sub.events],
        }
        for name, deliveries in sinks.items():
            repeated = [k for k, n in Counter(deliveries).items() if n > 1]
            assert not repeated, f"{name} delivered {repeated} more than once"
            ends = sorted((i, p) for i, p, _ in deliveries if p != "update")
            assert ends == want, f"{name}: starts and ends {ends} != {want}"
    finally:
        sub.close()
        broker.stop()
        receiver.stop()


def test_a_kill_while_postgresql_is_down_loses_no_update_it_raised(tmp_path: Path) -> None:
    """The server crashes mid-run and the watch is SIGKILLed while its writer still retries: the
    updates raised since are already in the spool; the next start (the server back, a quiet file)
    commits each, alerts each once, and ends what the dead run left open."""
    pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg")
    sys.path.insert(0, str(HERE / "events"))
    from test_events_postgres_restart import LocalPostgres, write_scene

    server = LocalPostgres()
    try:
        server.start()
        scene = write_walks(tmp_path / "walks.mp4")
        run = tmp_path / "run"
        run.mkdir()
        storage = f"storage:\n  postgresql: {server.url}\n  retry: {{budget_s: 60, initial_s: 0.05, max_s: 0.5}}\n"
        config = run / "watch.yaml"
        config.write_text(scene_config(scene, run).replace("storage:\n", storage))
        proc = _watch(config, 0.04)
        sink = run / "events.jsonl"
        _wait(lambda: sink.exists() and sink.read_text().strip(), 30, "the first alert")
        server.stop("immediate")
        spool = run / "events.spool.jsonl"
        _wait(lambda: spool.exists() and spool.read_text().count("\n") >= 2, 30, "updates in the spool")
        os.kill(proc.pid, signal.SIGKILL)  # no stop: nothing is written on the way out
        proc.communicate(timeout=20)
        spooled = [json.loads(x) for x in spool.read_text().splitlines()]
        before = [json.loads(x) for x in sink.read_text().splitlines()]

        server.start()
        quiet = write_scene(tmp_path / "quiet.mp4", n=5)
        config.write_text(scene_config(quiet, run).replace("storage:\n", storage))
        last = _watch(config, 0.0)
        _, err = last.communicate(timeout=120)
        assert last.returncode == 0, err
        assert not spool.exists() or not spool.read_text().strip()

        import psycopg

        with psycopg.connect(server.url) as conn:
            rows = dict(conn.execute("SELECT event_id, status FROM events").fetchall())
        assert {d["event_id"] for d in spooled} <= set(rows)  # every spooled update was committed
        assert set(rows.values()) == {"closed"}  # and nothing is left open
        lines = [json.loads(x) for x in sink.read_text().splitlines()]
        keys = [(d["event_id"], d["phase"], d["sequence"]) for d in lines]
        assert not [k for k, n in Counter(keys).items() if n > 1]  # each alerted once
        assert {(d["event_id"], d["phase"], d["sequence"]) for d in spooled} <= set(keys)
        assert len(lines) > len(before)
    finally:
        server.remove()
