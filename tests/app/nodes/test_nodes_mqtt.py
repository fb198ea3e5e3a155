"""MQTT on a site of two `serve --node` processes over the real PostgreSQL and a real Mosquitto: the
node that leads the retained state counts is SIGKILLed while an incident is open on its camera; the
other node takes the camera, ends the incident as interrupted, takes the lead of the counts, and the
retained counts equal the site's open incidents again. Every stored update reaches the broker."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import psycopg
import pytest
from mqtt_broker import MOSQUITTO, Broker, Subscriber

from campusguard.app.alerts.mqtt import topic_level
from conftest import Node, Site, add_admin, free_port, login, wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(MOSQUITTO).exists(), reason="the mosquitto binary is not installed"),
]

_LEADS = "publishes the site's retained state"


def _rows(pg: str, sql: str) -> list[tuple]:
    with psycopg.connect(pg) as conn:
        return list(conn.execute(sql).fetchall())


def _open_counts(pg: str) -> dict[str, bytes]:
    """``campusguard/<camera>/<rule>`` -> the site's open incidents of it, as the state payload."""
    rows = _rows(pg, "SELECT camera_id, rule_name, COUNT(*) FILTER (WHERE status = 'open') FROM events GROUP BY 1, 2")
    return {f"campusguard/{topic_level(c)}/{topic_level(r)}": str(n).encode() for c, r, n in rows}


def _stored_updates(pg: str) -> set[tuple[str, str]]:
    """Every incident's start, and the end of every closed one: ``(event_id, phase)``."""
    rows = _rows(pg, "SELECT event_id, status FROM events")
    return {(e, "start") for e, _ in rows} | {(e, "end") for e, s in rows if s == "closed"}


def _leads(node: Node) -> bool:
    return node.log.exists() and _LEADS in node.log.read_text(errors="replace")


def test_a_killed_state_leader_hands_the_counts_to_the_survivor(site: Site, tmp_path: Path) -> None:
    broker = Broker(tmp_path, free_port())
    broker.start()
    sub: Subscriber | None = None
    try:
        text = site.config.read_text()
        site.config.write_text(text.replace("alerts:\n", f"alerts:\n  - kind: mqtt\n    port: {broker.port}\n", 1))
        sub = Subscriber(broker.port)
        add_admin(site)
        a, b = site.node("alpha"), site.node("beta")
        a.start()
        b.start()
        wait_for(lambda: a.up() and b.up(), 90, "both nodes' consoles", step_s=0.3)
        h = login(a.base)

        def spread() -> dict[str, str] | None:
            cams = {k: v["node"] for k, v in a.cameras(h).items() if v["state"] == "live"}
            return cams if len(cams) == 4 and set(cams.values()) == {"alpha", "beta"} else None

        placed = wait_for(spread, 60, "4 live cameras over both nodes", 0.25)
        leader = wait_for(lambda: next((n for n in (a, b) if _leads(n)), None), 20, "a node leading the MQTT state")
        survivor = b if leader is a else a
        assert not _leads(survivor)  # one publisher of the counts

        # an incident open on the leader's camera when the leader dies
        cam = sorted(c for c, n in placed.items() if n == leader.name)[0]
        camera = site.cameras[int(cam.removeprefix("cam")) - 1]
        camera.down()
        incident = wait_for(
            lambda: _rows(site.pg_url, f"SELECT event_id, rule_name FROM events WHERE camera_id = '{cam}' AND status = 'open'"),
            40, "the offline incident",
        )[0]  # fmt: skip
        topic = f"campusguard/{cam}/{topic_level(incident[1])}"
        wait_for(lambda: sub is not None and sub.on(topic)[-1:] == [b"1"], 20, f"{topic} = 1")
        wait_for(lambda: sub is not None and incident[0] in sub.event_ids("new"), 20, "the incident's start on MQTT")

        leader.kill(signal.SIGKILL)
        camera.up()  # the taker finds it live: no new offline incident
        wait_for(
            lambda: not _rows(site.pg_url, f"SELECT 1 FROM events WHERE event_id = '{incident[0]}' AND status = 'open'"),
            60, "the dead node's incident ended by the taker",
        )  # fmt: skip
        wait_for(lambda: _leads(survivor), 20, f"{survivor.name} leading the MQTT state\n{survivor.tail()}")
        wait_for(lambda: sub is not None and sub.on(topic)[-1:] == [b"0"], 20, f"{topic} = 0")

        # every stored update on the broker (at least once), and the retained counts are the site's
        def published() -> bool:
            assert sub is not None
            got = {(e["after"]["event_id"], e["after"]["phase"]) for e in sub.events()}
            return _stored_updates(site.pg_url) <= got

        wait_for(published, 30, "every stored update on MQTT")
        late = Subscriber(broker.port, topic="campusguard/#", client_id="cg-test-late")
        try:
            wait_for(
                lambda: {t: late.on(t)[-1] for t in _open_counts(site.pg_url) if late.on(t)} == _open_counts(site.pg_url),
                20, "the retained counts equal the open incidents",
            )  # fmt: skip
            wait_for(lambda: late.on("campusguard/available")[-1:] == [b"online"], 10, "the site available")
        finally:
            late.close()
        time.sleep(0.1)
    finally:
        if sub is not None:
            sub.close()
        broker.stop()
