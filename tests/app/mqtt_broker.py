"""A real Mosquitto broker on a loopback port and a real MQTT subscriber, for the tests of the MQTT
sink (`tests/app/alerts`) and of nodes publishing to one (`tests/app/nodes`)."""

from __future__ import annotations

import getpass
import json
import shutil
import signal
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

from polling import wait_until

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


class Broker:
    """A Mosquitto on 127.0.0.1:``port`` with on-disk persistence, so that a subscriber's
    persistent session (and the QoS 1 messages queued for it) survives a restart."""

    def __init__(self, tmp: Path, port: int) -> None:
        self.port = port
        self.dir = tmp / "mosquitto"
        self.dir.mkdir(exist_ok=True)
        self.conf = self.dir / "mosquitto.conf"
        self.conf.write_text(
            # run as the current user (as root, mosquitto would switch to a user that cannot write here)
            f"user {getpass.getuser()}\nlistener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
            f"persistence_location {self.dir}/\nlog_dest file {self.dir}/log.txt\n"
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

        def answers() -> bool:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                return False

        if not wait_until(answers, 10):
            raise RuntimeError(f"mosquitto did not start on port {self.port}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # saves the persistence file on the way out
            self.proc.wait(10)
        self.proc = None


class Subscriber:
    """A real MQTT client with a persistent session (clean_session=False), recording every message."""

    def __init__(self, port: int, topic: str = "campusguard/#", client_id: str = "cg-test-subscriber") -> None:
        self.messages: list[tuple[str, bytes, bool]] = []
        self._lock = threading.Lock()
        import paho.mqtt.client as mqtt

        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=False)
        client.reconnect_delay_set(1, 1)
        self.subscribed = threading.Event()
        client.on_connect = lambda c, u, f, rc, p: c.subscribe(topic, qos=1)
        client.on_subscribe = lambda c, u, mid, rcs, p: self.subscribed.set()
        client.on_message = self._on_message
        client.connect("127.0.0.1", port, keepalive=10)
        client.loop_start()
        self.client = client
        assert self.subscribed.wait(10), "subscriber did not subscribe"

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        with self._lock:
            self.messages.append((msg.topic, bytes(msg.payload), bool(msg.retain)))

    def on(self, topic: str) -> list[bytes]:
        with self._lock:
            return [p for t, p, _ in self.messages if t == topic]

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(p) for p in self.on("campusguard/events")]

    def event_ids(self, type_: str = "new") -> set[str]:
        return {e["after"]["event_id"] for e in self.events() if e["type"] == type_}

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
