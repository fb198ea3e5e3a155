"""Live push and live view over a real uvicorn: SSE carries pipeline events (committed before they are sent) and
acknowledge updates; MJPEG carries JPEG frames; readiness and metrics while the camera runs."""

from __future__ import annotations

import json
import sqlite3
import time

import httpx
from fakes_console import mjpeg_frames


def next_event(lines, deadline_s: float) -> dict | None:
    """The next ``event: event`` message from an iterator of SSE lines (``None`` past the deadline)."""
    event = None
    end = time.monotonic() + deadline_s
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "event":
            return json.loads(line[6:])
        if time.monotonic() > end:
            return None
    return None


def test_sse_pushes_committed_events_and_acknowledgements(live_server):
    c = live_server.console
    auth = {"Authorization": f"Bearer {c.token('otto')}"}
    with (
        httpx.Client(base_url=live_server.url, headers=auth, timeout=30) as client,
        httpx.Client(base_url=live_server.url, headers=auth, timeout=30) as other,
    ):
        assert other.get("/api/v1/events/stream", headers={"Authorization": "Bearer nope"}).status_code == 401
        with client.stream("GET", "/api/v1/events/stream") as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            event = next_event(lines, 30)
            assert event is not None, "no event pushed within 30 s"
            # what was shown is already in the database
            row = (
                sqlite3.connect(c.runtime.store.path)
                .execute("SELECT camera_id, rule_kind FROM events WHERE event_id = ?", (event["id"],))
                .fetchone()
            )
            assert row == (event["camera"], event["kind"]) == ("cam1", event["kind"])
            r = other.post(f"/api/v1/events/{event['id']}/ack", json={"note": "seen on the wall"})
            assert r.status_code == 200
            deadline = time.monotonic() + 20
            update = None
            while update is None and time.monotonic() < deadline:
                got = next_event(lines, 20)
                if got is not None and got["id"] == event["id"] and got["state"] == "acknowledged":
                    update = got
    assert update is not None, "the acknowledgement was not pushed"
    deadline = time.monotonic() + 5
    while c.runtime.bus.subscriber_count():
        assert time.monotonic() < deadline, "the subscription was not closed after the client left"
        time.sleep(0.1)
    assert update["acknowledged_by"] == "otto" and update["note"] == "seen on the wall"
    assert "snapshot_url" in update and "clip_url" in update


def test_mjpeg_live_view_sends_jpeg_frames(live_server):
    token = live_server.console.token("vera")
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        assert client.get("/api/v1/cameras/cam9/live.mjpeg").status_code == 404
        with client.stream("GET", "/api/v1/cameras/cam1/live.mjpeg") as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "multipart/x-mixed-replace; boundary=frame"
            frames = mjpeg_frames(response, 3)
    assert len(frames) >= 3 and all(image.shape == (180, 320, 3) for image in frames)
    hub = live_server.console.runtime.hub
    deadline = time.monotonic() + 5  # the server notices the closed connection and closes the viewer
    while hub.viewer_count("cam1"):
        assert time.monotonic() < deadline, "the viewer was not closed after the client left"
        time.sleep(0.1)


def test_ready_status_and_metrics_while_live(live_server):
    c = live_server.console
    api_token = c.users.create_api_token("vera", label="prometheus")
    with httpx.Client(base_url=live_server.url, timeout=10) as client:
        deadline = time.monotonic() + 20
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "never ready"
            time.sleep(0.2)
        assert client.get("/readyz").json() == {"ready": True}
        assert client.get("/metrics").status_code == 401
        text = client.get("/metrics", headers={"Authorization": f"Bearer {api_token}"}).text
        assert 'campusguard_frames_read_total{camera="cam1"}' in text
        cams = client.get("/api/v1/cameras", headers={"Authorization": f"Bearer {api_token}"}).json()
        assert cams[0]["state"] == "live" and cams[0]["input_fps"] >= 0
        # a login over the real server sets the cookie a browser keeps
        r = client.post("/api/v1/auth/login", json={"username": "vera", "password": "viewer-pass-1"})
        assert r.status_code == 200 and "cg_session" in r.cookies


def test_streams_end_when_the_runtime_stops(live_server):
    """After `runtime.stop()` the live view and the event stream end (the server can shut down)."""
    c = live_server.console
    auth = {"Authorization": f"Bearer {c.token('vera')}"}
    with (
        httpx.Client(base_url=live_server.url, headers=auth, timeout=20) as client,
        client.stream("GET", "/api/v1/cameras/cam1/live.mjpeg") as mjpeg,
        client.stream("GET", "/api/v1/events/stream") as sse,
    ):
        assert mjpeg.status_code == sse.status_code == 200
        chunks = mjpeg.iter_bytes()
        next(chunks)
        c.runtime.stop()
        started = time.monotonic()
        for _ in chunks:  # drains what was sent, then the server ends the response
            pass
        for _ in sse.iter_lines():
            pass
        assert time.monotonic() - started < 10
