"""Camera health in the console API, on a started runtime with live HTTP cameras (`fakes_health`):
each camera's ``health`` in ``GET /api/v1/cameras``, ``GET /api/v1/health`` with the health incidents of
the store, and accepting a view (admin only, audited; 404 unknown camera; 409 health off or nothing
measured yet), whose note of the zones drawn on the old view lasts until the zones are saved again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from fakes_console import ConsoleUnderTest, make_console, put_zones
from fakes_health import GATE_ZONES, HealthCameras, camera_health, config_with_health, wait_for

from campusguard.app.rules.camera_health import ReferenceStore

pytestmark = pytest.mark.slow  # about 20 s: one console, three cameras, a 2 s learning and a 2 s cover


@pytest.fixture(scope="module")
def health(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConsoleUnderTest, HealthCameras]]:
    tmp = tmp_path_factory.mktemp("console-health")
    for cams, config in config_with_health(tmp):
        console = make_console(config, tmp, start=True)
        try:
            yield console, cams
        finally:
            console.runtime.stop()
            console.users.close()


def test_each_camera_lists_its_health_beside_the_fields_it_had(health):
    console, _ = health
    client, admin = console.client(), console.bearer("ada")
    cameras = client.get("/api/v1/cameras", headers=console.bearer("vera")).json()
    assert [c["name"] for c in cameras] == ["gate", "yard", "lot"]
    assert set(cameras[0]) == {
        "name", "state", "input_fps", "processed_fps", "dropped_frames", "reconnects", "last_frame_time",
        "width", "height", "node", "health",
    }  # fmt: skip
    now = wait_for(lambda: (h := camera_health(client, admin))["gate"]["state"] == "ok" and h, what="gate learned")
    assert now["lot"] is None  # its health is off
    gate = now["gate"]
    assert gate["event_id"] is None and gate["since"] is None
    assert {"brightness", "sharpness", "changed", "covered_area", "similarity"} <= set(gate["measures"])
    assert gate["reference_made_at"] and gate["reference_accepted_by"] is None and gate["zones_on_old_view"] == []
    yard = wait_for(lambda: (y := camera_health(client, admin)["yard"])["state"] == "offline" and y, what="yard offline")
    record = console.runtime.store.get(yard["event_id"])
    assert record is not None and record.rule_kind == "camera_health" and record.zone == "offline"
    since = datetime.fromisoformat(yard["since"])
    assert record.started_at is not None and timedelta(0) <= record.started_at - since <= timedelta(seconds=4)


def test_a_covered_camera_is_marked_with_its_incident_until_it_sees_again(health):
    console, cams = health
    client, viewer = console.client(), console.bearer("vera")
    wait_for(lambda: camera_health(client, viewer)["gate"]["state"] == "ok", what="gate learned")
    cams.gate_scene.effect = "cover"
    try:
        gate = wait_for(
            lambda: (g := camera_health(client, viewer)["gate"])["state"] == "covered" and g["since"] and g,
            what="gate covered",
        )
    finally:
        cams.gate_scene.effect = None
    assert gate["measures"]["covered_area"] >= 0.7
    event = console.runtime.store.get(gate["event_id"])
    assert event is not None and (event.rule_kind, event.zone, event.details["problem"]) == (
        "camera_health",
        "covered",
        "covered",
    )
    page = client.get("/api/v1/health", headers=viewer).json()
    assert page["days"] == 7 and [c["name"] for c in page["cameras"]] == ["gate", "yard", "lot"]
    rows = {c["name"]: c for c in page["cameras"]}
    assert gate["event_id"] in [p["id"] for p in rows["gate"]["problems"]]
    assert rows["yard"]["camera_state"] == "offline" and rows["yard"]["problems"][0]["problem"] == "offline"
    assert rows["yard"]["problems"][0]["measures"]["seconds_without_frames"] >= 2
    assert rows["lot"]["health"] is None and rows["lot"]["problems"] == [] and rows["lot"]["problems_total"] == 0
    wait_for(lambda: camera_health(client, viewer)["gate"]["state"] == "ok", what="gate seeing again")
    ended = next(p for p in client.get("/api/v1/health", headers=viewer).json()["cameras"][0]["problems"])
    assert ended["id"] == gate["event_id"] and not ended["open"] and ended["ended_at"] and ended["duration_s"] >= 2  # its min_s
    assert client.get("/api/v1/health?days=0", headers=viewer).status_code == 422


def test_accepting_a_view_is_for_admins_audited_and_its_old_zones_last_until_the_zones_are_saved(health):
    console, _ = health
    client = console.client()
    url = "/api/v1/cameras/gate/health/accept-view"
    assert client.post(url).status_code == 401
    for name in ("vera", "otto"):
        assert client.post(url, headers=console.bearer(name)).status_code == 403, name
    admin = console.bearer("ada")
    assert client.post("/api/v1/cameras/nope/health/accept-view", headers=admin).status_code == 404
    off = client.post("/api/v1/cameras/lot/health/accept-view", headers=admin)
    assert off.status_code == 409 and "no health check" in off.json()["detail"]
    unmeasured = client.post("/api/v1/cameras/yard/health/accept-view", headers=admin)  # offline from the start
    assert unmeasured.status_code == 409 and "not measured a frame" in unmeasured.json()["detail"]
    wait_for(lambda: camera_health(client, admin)["gate"]["state"] == "ok", what="gate learned")
    audited = console.audit_count()
    answer = client.post(url, headers=admin)
    assert answer.status_code == 200, answer.text
    accepted = answer.json()
    assert accepted["reference_accepted_by"] == "ada" and accepted["zones_on_old_view"] == list(GATE_ZONES)
    assert console.audit_count() == audited + 1
    entries, _ = console.users.audit_entries(limit=1)
    assert (entries[0].user, entries[0].action, entries[0].target) == ("ada", "camera.accept_view", "gate")
    assert entries[0].details["zones_on_old_view"] == list(GATE_ZONES)
    stored = ReferenceStore(console.tmp / "health").load("gate")  # kept for a restart
    assert stored is not None and stored.accepted_by == "ada" and stored.zones_on_old_view == GATE_ZONES
    assert camera_health(client, admin)["gate"]["zones_on_old_view"] == list(GATE_ZONES)  # until a save

    zones = client.get("/api/v1/cameras/gate/zones", headers=admin).json()
    saved = put_zones(client, "gate", zones, admin)  # saved as it was: the admin has looked at them
    assert saved.status_code == 200, saved.text
    after = camera_health(client, admin)["gate"]
    assert after["zones_on_old_view"] == [] and after["reference_accepted_by"] == "ada"
    stored = ReferenceStore(console.tmp / "health").load("gate")
    assert stored is not None and stored.zones_on_old_view == () and stored.accepted_by == "ada"


def test_the_health_page_is_served_to_viewers_with_its_nav_link(health):
    console, _ = health
    client = console.client()
    page = client.get("/health", headers=console.bearer("vera"))
    assert page.status_code == 200 and 'src="/static/js/health.js"' in page.text
    assert '<a href="/health" aria-current=page>Camera health</a>' in page.text
    assert '<a href="/health">Camera health</a>' in client.get("/", headers=console.bearer("vera")).text
    assert client.get("/health", follow_redirects=False).status_code == 303  # to the login page

