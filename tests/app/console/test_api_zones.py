"""Zones and lines over the API: validated by the config models (422 otherwise), saved atomically with a backup,
audited, and applied to the running rules."""

from __future__ import annotations

import time

import pytest
import yaml
from fakes_console import put_zones

from campusguard.app.config import load_config

NEW = {
    "zones": [
        {"name": "east", "polygon": [[200, 0], [320, 0], [320, 180], [200, 180]]},
        {"name": "parking", "polygon": [[0, 140], [100, 140], [100, 180], [0, 180]]},
    ],
    "lines": [{"name": "gate", "points": [[0.5, 0], [0.5, 1]], "units": "fraction"}],
}


def put(c, body, user="ada"):
    return put_zones(c.client(), "cam1", body, c.bearer(user))


def test_get_and_put_zones(console):
    before_text = console.config.read_text()
    got = console.client().get("/api/v1/cameras/cam1/zones", headers=console.bearer("vera")).json()
    assert [z["name"] for z in got["zones"]] == ["east", "parking"] and got["lines"] == []
    r = put(console, NEW)
    assert r.status_code == 200, r.text
    assert r.json()["zones"][0]["polygon"][0] == [200.0, 0.0] and r.json()["lines"][0]["name"] == "gate"
    # the file: rewritten, valid, previous version kept
    saved = yaml.safe_load(console.config.read_text())
    assert saved["cameras"][0]["zones"][0]["polygon"][0] == [200, 0]
    assert (console.config.parent / (console.config.name + ".bak")).read_text() == before_text
    assert load_config(console.config).config.cameras[0].lines[0].name == "gate"
    assert console.client().get("/api/v1/cameras/cam1/zones", headers=console.bearer("vera")).json() == r.json()
    entry = console.client().get("/api/v1/audit", headers=console.bearer("ada")).json()["items"][0]
    assert (entry["user"], entry["action"], entry["target"]) == ("ada", "zones.update", "cam1")
    assert entry["details"]["before"]["zones"][0]["polygon"][0] == [160.0, 0.0]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"zones": [{"name": "east", "polygon": [[0, 0], [100, 100], [100, 0], [0, 100]]}]}, "self-intersecting"),
        ({"zones": [{"name": "east", "polygon": [[0, 0], [1, 1]]}]}, "at least 3 points"),
        ({"zones": [{"name": "parking", "polygon": [[0, 0], [9, 0], [9, 9]]}]}, "unknown zone 'east'"),
        ({"zones": [{"name": "east", "polygon": [[0, 0], [9, 0], [9, 9]], "colour": "red"}]}, "extra"),
        ({"zones": [{"name": "east", "polygon": [[0, 0], [2, 0], [2, 2]], "units": "fraction"}]}, "must be in 0..1"),
        ({"lines": [{"name": "l", "points": [[1, 1], [1, 1]]}]}, "same point"),
        ({"zones": "east"}, "list"),
        ({"cameras": []}, "extra"),
    ],
)
def test_invalid_zones_get_422_and_change_nothing(console, body, message):
    text, audit_before = console.config.read_text(), console.audit_count()
    r = put(console, body)
    assert r.status_code == 422, r.text
    assert message in r.text
    assert console.config.read_text() == text and console.audit_count() == audit_before
    assert not (console.config.parent / (console.config.name + ".bak")).exists()


def test_nan_coordinates_get_422(console):
    text = console.config.read_text()
    r = console.client().put(
        "/api/v1/cameras/cam1/zones",
        content=b'{"zones": [{"name": "east", "polygon": [[NaN, 0], [9, 0], [9, 9]]}]}',
        headers={**console.bearer("ada"), "content-type": "application/json"},
    )
    assert r.status_code == 422 and console.config.read_text() == text


def test_unknown_camera_is_404(console):
    assert console.client().get("/api/v1/cameras/cam9/zones", headers=console.bearer("vera")).status_code == 404
    assert (
        console.client().put("/api/v1/cameras/cam9/zones", json=NEW, headers=console.bearer("ada")).status_code == 404
    )


def test_zone_edit_applies_to_the_running_pipeline(live_server):
    """An intrusion zone moved away from the walker's path raises no new intrusion; moved back, it does."""
    c = live_server.console
    store = c.runtime.store
    deadline = time.monotonic() + 30
    while store.query_records()[1] == 0:  # the first loop of the video raises the intrusion
        assert time.monotonic() < deadline, "no event from the live pipeline"
        time.sleep(0.2)
    # a zone beyond the camera's 320x180 frame is refused while it runs
    outside = {"zones": [{"name": "east", "polygon": [[0, 0], [900, 0], [900, 90]]}, NEW["zones"][1]]}
    r = put(c, outside)
    assert r.status_code == 422 and "outside" in r.text, r.text
    # move 'east' to the top-left corner, where nobody walks (the walker is at y 100..140)
    far = {"zones": [{"name": "east", "polygon": [[0, 0], [40, 0], [40, 30], [0, 30]]}, NEW["zones"][1]]}
    assert put(c, far).status_code == 200
    time.sleep(0.5)
    intrusions = lambda: store.query_records(limit=None)[1]  # noqa: E731
    seen = {r.event.event_id for r in store.query_records(limit=None)[0] if r.event.rule_kind == "intrusion"}
    time.sleep(7)  # more than one loop of the 6 s video
    later = {r.event.event_id for r in store.query_records(limit=None)[0] if r.event.rule_kind == "intrusion"}
    assert later - seen == set(), "the moved zone still raised intrusions"
    assert put(c, {"zones": NEW["zones"]}).status_code == 200  # back on the path (x >= 200)
    deadline = time.monotonic() + 15
    while True:
        now = {r.event.event_id for r in store.query_records(limit=None)[0] if r.event.rule_kind == "intrusion"}
        if now - later:
            break
        assert time.monotonic() < deadline, f"no intrusion after the zone came back ({intrusions()} events)"
        time.sleep(0.2)


@pytest.mark.parametrize(
    "body",
    [
        {"zones": [{"name": "east", "polygon": [[True, 1], [100, 0], [100, 100]]}]},
        {"zones": [{"name": "east", "polygon": [["10", 0], [100, 0], [100, 100]]}]},
        {"lines": [{"name": "gate", "points": [[0, False], [100, 100]]}]},
        {"privacy": {"masks": [{"name": "m", "polygon": [[0, 0], [True, 0], [1, 1]]}]}},
        {"privacy": {"fill_bgr": [True, 0, 0]}},
    ],
    ids=["bool-x", "string-x", "line-bool", "mask-bool", "colour-bool"],
)
def test_booleans_and_strings_are_not_numbers(console, body):
    text, audit_before = console.config.read_text(), console.audit_count()
    r = put(console, {"zones": NEW["zones"], **body} if "zones" not in body else body)
    assert r.status_code == 422, r.text
    assert "valid number" in r.text or "valid integer" in r.text
    assert console.config.read_text() == text and console.audit_count() == audit_before


@pytest.mark.parametrize("kept", ["yes", 1, "true", None])
def test_kept_is_a_json_boolean_only(console, kept):
    r = console.client().post("/api/v1/events/e1/keep", json={"kept": kept}, headers=console.bearer("otto"))
    assert r.status_code == 422 and "valid boolean" in r.text, r.text
