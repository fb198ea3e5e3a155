"""The events API against a real `ConsoleRuntime` that watched the scene video to its end.

The pipeline (BlobDetector, tracking, rules, store, snapshots, clips) raises the scene's intrusion
and fire-lane incidents; the API lists, filters, pages, serves their snapshot and clip, and records
acknowledge/resolve with user, time and note (in the store and the audit log).
"""

from __future__ import annotations

import csv
import io
import re
import sqlite3
import time

import cv2
import numpy as np
import pytest
from fakes_console import watched_console


@pytest.fixture(scope="module")
def watched(console_video, tmp_path_factory):
    yield from watched_console(console_video, tmp_path_factory.mktemp("watched"))


def get(c, path, user="vera", **kw):
    r = c.client().get(path, headers=c.bearer(user), **kw)
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r


def test_list_filter_and_page(watched):
    page = get(watched, "/api/v1/events").json()
    kinds = sorted(e["kind"] for e in page["items"])
    assert page["total"] == len(page["items"]) == 2 and kinds == ["fire_lane", "intrusion"]
    intrusion = next(e for e in page["items"] if e["kind"] == "intrusion")
    assert intrusion["camera"] == "cam1" and intrusion["zone"] == "east" and intrusion["state"] == "open"
    assert intrusion["track_id"] is not None and intrusion["started_at"]
    assert intrusion["snapshot_url"] == f"/api/v1/events/{intrusion['id']}/snapshot.jpg"
    # newest first
    assert [e["started_at"] for e in page["items"]] == sorted((e["started_at"] for e in page["items"]), reverse=True)
    assert [e["id"] for e in get(watched, "/api/v1/events", params={"kind": "intrusion"}).json()["items"]] == [
        intrusion["id"]
    ]
    assert get(watched, "/api/v1/events", params={"rule": "nope"}).json() == {"items": [], "total": 0}
    assert get(watched, "/api/v1/events", params={"camera": "cam1", "state": "open"}).json()["total"] == 2
    one = get(watched, "/api/v1/events", params={"limit": 1, "offset": 1}).json()
    assert one["total"] == 2 and [e["id"] for e in one["items"]] == [page["items"][1]["id"]]
    assert get(watched, "/api/v1/events", params={"since": "2100-01-01T00:00:00Z"}).json()["total"] == 0
    assert get(watched, "/api/v1/events", params={"until": "2000-01-01T00:00:00"}).json()["total"] == 0
    assert get(watched, f"/api/v1/events/{intrusion['id']}").json() == intrusion
    assert watched.client().get("/api/v1/events/nope", headers=watched.bearer("vera")).status_code == 404


def test_snapshot_and_clip_of_an_event(watched):
    event = get(watched, "/api/v1/events", params={"kind": "intrusion"}).json()["items"][0]
    jpeg = get(watched, event["snapshot_url"]).content
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None and image.shape[:2] == (180, 320)
    deadline = time.monotonic() + 30  # the clip is written on the recorder's own thread
    while get(watched, f"/api/v1/events/{event['id']}").json()["clip_url"] is None:
        assert time.monotonic() < deadline, "no clip was written"
        time.sleep(0.2)
    r = get(watched, f"/api/v1/events/{event['id']}/clip.mp4")
    assert r.headers["content-type"] == "video/mp4" and r.content[4:8] == b"ftyp"


def test_acknowledge_and_resolve_are_recorded(watched):
    event = get(watched, "/api/v1/events", params={"kind": "fire_lane"}).json()["items"][0]
    eid = event["id"]
    client = watched.client()
    r = client.post(f"/api/v1/events/{eid}/ack", json={"note": "guard on the way"}, headers=watched.bearer("otto"))
    assert r.status_code == 200
    acked = r.json()
    assert (
        acked["state"] == "acknowledged" and acked["acknowledged_by"] == "otto" and acked["note"] == "guard on the way"
    )
    row = (
        sqlite3.connect(watched.runtime.store.path)
        .execute("SELECT state, acknowledged_by, note FROM events WHERE event_id = ?", (eid,))
        .fetchone()
    )
    assert row == ("acknowledged", "otto", "guard on the way")  # committed before it was answered
    assert client.post(f"/api/v1/events/{eid}/ack", json={}, headers=watched.bearer("otto")).status_code == 409
    r = client.post(f"/api/v1/events/{eid}/resolve", json={"note": "car moved"}, headers=watched.bearer("ada"))
    assert r.status_code == 200 and r.json()["resolved_by"] == "ada" and r.json()["state"] == "resolved"
    assert client.post(f"/api/v1/events/{eid}/resolve", json={}, headers=watched.bearer("ada")).status_code == 409
    assert get(watched, "/api/v1/events", params={"state": "resolved"}).json()["items"][0]["id"] == eid
    audit = get(watched, "/api/v1/audit", user="ada").json()["items"]
    actions = [(a["user"], a["action"], a["target"], a["details"].get("note")) for a in audit[:2]]
    assert actions == [
        ("ada", "event.resolve", eid, "car moved"),
        ("otto", "event.acknowledge", eid, "guard on the way"),
    ]
    # the CSV export has the review
    rows = list(csv.DictReader(io.StringIO(get(watched, "/api/v1/events.csv").text)))
    assert len(rows) == 2
    done = next(r for r in rows if r["id"] == eid)
    assert (done["state"], done["acknowledged_by"], done["resolved_by"], done["note"]) == (
        "resolved",
        "otto",
        "ada",
        "car moved",
    )
    assert get(watched, "/api/v1/events.csv").headers["content-disposition"].startswith("attachment")


def test_cameras_metrics_and_health(watched):
    cams = get(watched, "/api/v1/cameras").json()
    assert [c["name"] for c in cams] == ["cam1"] and cams[0]["state"] == "stopped"  # the file ended
    assert (cams[0]["width"], cams[0]["height"]) == (320, 180) and cams[0]["last_frame_time"] is not None
    jpeg = get(watched, "/api/v1/cameras/cam1/snapshot.jpg").content
    assert cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR).shape == (180, 320, 3)
    assert watched.client().get("/api/v1/cameras/nope/snapshot.jpg", headers=watched.bearer("vera")).status_code == 404
    text = get(watched, "/metrics").text
    assert 'campusguard_frames_processed_total{camera="cam1"} 60.0' in text
    assert re.search(r"campusguard_inference_latency_seconds_count\{camera=\"cam1\"\} 60\.0", text), text
    assert "campusguard_store_retries_total 0.0" in text and "campusguard_events_spooled_total 0.0" in text
    client = watched.client()
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").status_code == 503  # the only camera has stopped producing frames


def test_keep_is_for_operators_audited_and_stored(watched):
    event = get(watched, "/api/v1/events", params={"kind": "intrusion"}).json()["items"][0]
    eid = event["id"]
    assert event["kept"] is False
    client = watched.client()
    assert client.post(f"/api/v1/events/{eid}/keep", json={}, headers=watched.bearer("vera")).status_code == 403
    r = client.post(f"/api/v1/events/{eid}/keep", json={"kept": True}, headers=watched.bearer("otto"))
    assert r.status_code == 200 and r.json()["kept"] is True and r.json()["kept_by"] == "otto"
    row = sqlite3.connect(watched.runtime.store.path).execute(
        "SELECT kept, kept_by FROM events WHERE event_id = ?", (eid,)
    )
    assert row.fetchone() == (1, "otto")
    assert client.post("/api/v1/events/nope/keep", json={}, headers=watched.bearer("otto")).status_code == 404
    r = client.post(f"/api/v1/events/{eid}/keep", json={"kept": False}, headers=watched.bearer("ada"))
    assert r.status_code == 200 and r.json()["kept"] is False and r.json()["kept_by"] is None
    audit = get(watched, "/api/v1/audit", user="ada").json()["items"]
    assert [(a["user"], a["action"], a["target"]) for a in audit[:2]] == [
        ("ada", "event.unkeep", eid),
        ("otto", "event.keep", eid),
    ]
