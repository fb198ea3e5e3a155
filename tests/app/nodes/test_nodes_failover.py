"""Failover: two `serve --node` processes over the real PostgreSQL share 4 live HTTP cameras; one is
SIGKILLed, the other takes its cameras, ends its open incidents, delivers its alerts once, accepts its
sessions and serves every live view; the killed node returns and takes its share back, once."""

from __future__ import annotations

import signal
import time
from collections import Counter

import httpx
import pytest

from campusguard.app.events import open_event_store
from campusguard.app.events.records import EventFilter
from conftest import Site, add_admin, login, wait_for

pytestmark = pytest.mark.slow






def _incidents(url: str, **query: object) -> list:
    store = open_event_store(url, read_only=True)
    try:
        records, _ = store.query_records(EventFilter(**query), limit=None)  # type: ignore[attr-defined]
        return [r.event for r in records]
    finally:
        store.close()


def test_two_nodes_share_cameras_and_take_over_a_killed_one(site: Site) -> None:
    add_admin(site)
    a, b = site.node("alpha"), site.node("beta")
    started = time.monotonic()
    a.start()
    b.start()
    wait_for(lambda: a.up() and b.up(), 90, "both nodes' consoles", step_s=0.3)
    h = login(a.base)
    names = {f"cam{i}" for i in range(1, 5)}

    def placed() -> dict[str, dict]:
        cams = a.cameras(h)
        assert set(cams) == names
        return cams

    # 1. every camera live, each node runs at least one
    t0 = time.monotonic()
    def spread() -> dict[str, dict] | None:
        c = placed()
        live = all(v["state"] == "live" for v in c.values())
        return c if live and {v["node"] for v in c.values()} == {"alpha", "beta"} else None

    cams = wait_for(spread, 60, "4 live cameras over both nodes", 0.25)
    print(f"all 4 live over both nodes {time.monotonic() - t0:.1f} s after the consoles answered, "
          f"{time.monotonic() - started:.1f} s after the processes started")
    hb = login(b.base)
    wait_for(lambda: {k: v["node"] for k, v in b.cameras(hb).items()} == {k: v["node"] for k, v in cams.items()}, 30,
             "beta listing every camera with the node that runs it")
    on_beta = sorted(c for c, v in cams.items() if v["node"] == "beta")
    on_alpha = sorted(c for c, v in cams.items() if v["node"] == "alpha")

    # a zone saved on beta's console for a camera alpha runs reaches alpha (its file and its pipeline)
    zone = {"name": "gate", "polygon": [[10, 10], [150, 10], [150, 120], [10, 120]]}
    etag = httpx.get(f"{b.base}/api/v1/cameras/{on_alpha[0]}/zones", headers=hb, timeout=10).headers["ETag"]
    r = httpx.put(f"{b.base}/api/v1/cameras/{on_alpha[0]}/zones", json={"zones": [zone]},
                  headers={**hb, "If-Match": etag}, timeout=30)
    assert r.status_code == 200, r.text
    wait_for(lambda: [z["name"] for z in httpx.get(f"{a.base}/api/v1/cameras/{on_alpha[0]}/zones", headers=h,
                                                      timeout=10).json()["zones"]] == ["gate"], 15, "the edit on alpha")
    assert "name: gate" in a.config.read_text()
    down = site.cameras[int(on_beta[0].removeprefix("cam")) - 1]

    # alpha's console serves the view of a camera beta runs: fetched from beta with the caller's session
    r = httpx.get(f"{a.base}/api/v1/cameras/{on_beta[0]}/snapshot.jpg", headers=h, timeout=10)
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8", r.status_code
    with httpx.stream("GET", f"{a.base}/api/v1/cameras/{on_beta[0]}/live.mjpeg", headers=h, timeout=10) as live:
        assert live.status_code == 200 and live.headers["content-type"].startswith("multipart/x-mixed-replace")
        first = next(live.iter_bytes())
        assert first.startswith(b"--frame"), first[:40]
    assert httpx.get(f"{a.base}/api/v1/cameras/{on_beta[0]}/snapshot.jpg", timeout=10).status_code == 401

    # an incident open on beta when it dies: its camera goes offline
    down.down()
    offline = wait_for(
        lambda: [e for e in _incidents(site.pg_url, camera_id=on_beta[0], status="open") if e.zone == "offline"],
        40, "beta's offline incident",
    )
    wait_for(lambda: (offline[0].event_id, "start") in {(k[0], k[1]) for k in site.receiver.deliveries()}, 20, "its alert")
    beta_token = login(b.base)

    # 2. SIGKILL beta: alpha runs all 4 within 15 s
    b.kill(signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: all(v["node"] == "alpha" for v in placed().values()), 25, f"alpha taking over\n{a.tail()}", 0.25)
    took = time.monotonic() - killed
    print(f"alpha ran all 4 cameras {took:.1f} s after beta was killed")
    assert took <= 15.0 + 5.0  # the target is 15 s; 5 s of slack for a loaded CI machine

    wait_for(  # the site view
        lambda: 'campusguard_site_node_cameras{node="alpha"} 4.0' in httpx.get(f"{a.base}/metrics", headers=h).text,
        10, "the site view in alpha's metrics",
    )

    # 5. beta's session works on alpha, whose console serves every live camera's view
    down.up()
    wait_for(lambda: all(v["state"] == "live" for v in a.cameras(beta_token).values()), 40, "4 live on alpha")
    for name in sorted(names):
        r = httpx.get(f"{a.base}/api/v1/cameras/{name}/snapshot.jpg", headers=beta_token, timeout=10)
        assert r.status_code == 200 and r.content[:2] == b"\xff\xd8", (name, r.status_code)

    # 4. beta's open incident was ended (as interrupted) by the taker
    ended = wait_for(
        lambda: [e for e in _incidents(site.pg_url, camera_id=on_beta[0]) if e.event_id == offline[0].event_id
                 and not e.is_open], max(1.0, 60 - (time.monotonic() - killed)), "beta's incident ended",
    )
    assert ended[0].details.get("interrupted") is True

    # 6. beta returns: within 60 s both run cameras, all live, no camera moves more than once
    before = {k: v["node"] for k, v in placed().items()}
    b.start()
    history: dict[str, list[str]] = {k: [v] for k, v in before.items()}

    def rebalanced() -> bool:
        now = placed()
        for k, v in now.items():
            if v["node"] and v["node"] != history[k][-1]:
                history[k].append(v["node"])
        return {v["node"] for v in now.values()} == {"alpha", "beta"} and all(v["state"] == "live" for v in now.values())

    wait_for(rebalanced, 60, f"beta back with its share\n{b.tail()}", 0.25)
    end = time.monotonic() + 8  # nothing moves again once settled
    while time.monotonic() < end:
        rebalanced()
        time.sleep(0.25)
    assert all(len(h_) <= 2 for h_ in history.values()), history

    # 3. no alert twice; every stored incident's start alert delivered
    stored = _incidents(site.pg_url)
    wait_for(lambda: {e.event_id for e in stored} <= {k[0] for k in site.receiver.deliveries() if k[1] == "start"}, 30,
             "every start alert")
    counts = Counter(site.receiver.deliveries())
    assert not [k for k, n in counts.items() if n > 1], counts

    # a clean stop (SIGTERM) hands beta's cameras over at once: no wait for its leases to run out
    stopped = time.monotonic()
    b.kill(signal.SIGTERM)
    assert b.proc is not None and b.proc.returncode == 0, b.tail()
    print(f"beta stopped cleanly in {time.monotonic() - stopped:.1f} s")
    wait_for(lambda: all(v["node"] == "alpha" and v["state"] == "live" for v in placed().values()), 20,
             "alpha taking over from the stopped beta", 0.25)
    print(f"alpha ran all 4 cameras {time.monotonic() - stopped:.1f} s after beta was told to stop")
    assert {k for k, n in Counter(site.receiver.deliveries()).items() if n > 1} == set()
