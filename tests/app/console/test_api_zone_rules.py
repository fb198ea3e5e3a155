"""Rules and privacy masks through the zones route: validated by the config models (a clean 422 that
names the field of the body and never the server's paths), admin only, audited, saved in the YAML,
and applied live without splitting an ongoing incident of a rule the edit did not change."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from fakes_console import console_yaml, put_zones, served_console

from campusguard.app.events.records import EventFilter

EAST = {"name": "east", "polygon": [[160, 0], [320, 0], [320, 180], [160, 180]]}
PARKING = {"name": "parking", "polygon": [[0, 140], [100, 140], [100, 180], [0, 180]]}
INTRUSION = {"kind": "intrusion", "zone": "east", "classes": ["person"], "min_seconds": 1.0}
FIRE_LANE = {"kind": "fire_lane", "zone": "parking", "classes": ["car"], "min_seconds": 2.0}
MASK = {"name": "windows", "polygon": [[0, 0], [0.5, 0], [0.5, 0.1], [0, 0.1]], "units": "fraction"}


def put(c: Any, body: dict[str, Any], user: str = "ada") -> Any:
    return put_zones(c.client(), "cam1", body, c.bearer(user))


def saved_camera(c: Any) -> dict[str, Any]:
    return yaml.safe_load(c.config.read_text())["cameras"][0]


def assert_no_server_path(c: Any, text: str) -> None:
    for path in (c.config, c.config.resolve(), c.tmp, c.tmp.resolve()):
        assert str(path) not in text, text


def test_rules_and_masks_are_saved_applied_and_audited(console):
    body = {
        "zones": [EAST, PARKING],
        "lines": [{"name": "gate", "points": [[0.5, 0], [0.5, 1]], "units": "fraction"}],
        "rules": [
            INTRUSION,
            {"kind": "loitering", "zone": "parking", "classes": ["person", "car"], "min_seconds": 30},
            {"kind": "line_crossing", "line": "gate", "direction": "both"},
        ],
        "privacy": {"masks": [MASK], "blur": "persons"},
    }
    r = put(console, body)
    assert r.status_code == 200, r.text
    cam = saved_camera(console)
    assert [(x["kind"], x.get("zone") or x.get("line")) for x in cam["rules"]] == [
        ("intrusion", "east"),
        ("loitering", "parking"),
        ("line_crossing", "gate"),
    ]
    assert cam["rules"][1]["min_seconds"] == 30 and cam["rules"][1]["classes"] == ["person", "car"]
    assert cam["privacy"] == {"masks": [MASK], "blur": "persons"}
    got = console.client().get("/api/v1/cameras/cam1/zones", headers=console.bearer("vera")).json()
    assert got == r.json() and got["privacy"]["masks"][0]["name"] == "windows"
    assert [x["kind"] for x in got["rules"]] == ["intrusion", "loitering", "line_crossing"]
    actions = [
        e["action"] for e in console.client().get("/api/v1/audit", headers=console.bearer("ada")).json()["items"]
    ]
    assert actions[:2] == ["privacy.update", "zones.update"]
    # a body without rules or privacy keeps them
    assert put(console, {"zones": [EAST, PARKING], "lines": body["lines"]}).status_code == 200
    assert len(saved_camera(console)["rules"]) == 3 and saved_camera(console)["privacy"]["blur"] == "persons"
    # removing a rule removes it; an empty privacy section leaves the file
    assert put(console, {"zones": [EAST, PARKING], "rules": [INTRUSION], "privacy": {}}).status_code == 200
    cam = saved_camera(console)
    assert [x["kind"] for x in cam["rules"]] == ["intrusion"] and "privacy" not in cam


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"zones": [EAST], "rules": [{"kind": "teleport", "zone": "east"}]}, "teleport"),
        ({"zones": [EAST], "rules": [{**INTRUSION, "min_seconds": -1}]}, "greater than or equal to 0"),
        ({"zones": [EAST], "rules": [{**INTRUSION, "zone": "west"}]}, "rules[0].zone: rule names unknown zone 'west'"),
        ({"zones": [{**EAST, "name": "east-side"}, PARKING]}, "rules[0].zone: rule names unknown zone 'east'"),
        ({"zones": [EAST, PARKING], "rules": [INTRUSION, INTRUSION]}, "is used twice"),
        ({"zones": [EAST], "rules": [{"kind": "line_crossing", "line": "gate"}]}, "unknown line 'gate'"),
        ({"zones": [EAST], "rules": [{**INTRUSION, "frobnicate": 1}]}, "Extra inputs are not permitted"),
        (
            {"zones": [EAST], "privacy": {"masks": [{"name": "m", "polygon": [[0, 0], [9, 9], [9, 0], [0, 9]]}]}},
            "self-intersecting",
        ),
        ({"zones": [EAST], "privacy": {"masks": [MASK, MASK]}}, "used twice"),
        ({"zones": [EAST], "privacy": {"blur": "everything"}}, "blur"),
    ],
)
def test_invalid_rules_and_masks_get_a_clean_422(console, body, message):
    text, audit_before = console.config.read_text(), console.audit_count()
    r = put(console, body)
    assert r.status_code == 422, r.text
    assert message in r.text
    assert_no_server_path(console, r.text)
    assert console.config.read_text() == text and console.audit_count() == audit_before


def test_a_zone_outside_the_running_frame_is_named_without_the_path(live_server):
    c = live_server.console
    wide = {**EAST, "polygon": [[0, 0], [900, 0], [900, 90]]}
    r = put(c, {"zones": [wide, PARKING], "rules": [INTRUSION, FIRE_LANE]})
    assert r.status_code == 422 and r.json()["detail"].startswith("zones[0].polygon: "), r.text
    assert_no_server_path(c, r.text)
    r = put(c, {"zones": [EAST, PARKING], "rules": [{**INTRUSION, "classes": ["unicorn"]}, FIRE_LANE]})
    assert r.status_code == 422 and r.json()["detail"].startswith("rules[0].classes[0]: unknown class 'unicorn'")
    assert_no_server_path(c, r.text)


@pytest.mark.parametrize("user", ["vera", "otto"])
@pytest.mark.parametrize(
    "body",
    [
        {"zones": [EAST, PARKING], "rules": [INTRUSION]},
        {"zones": [EAST, PARKING], "privacy": {"masks": [MASK]}},
    ],
    ids=["rules", "masks"],
)
def test_viewers_and_operators_cannot_change_rules_or_masks(console, user, body):
    text, audit_before = console.config.read_text(), console.audit_count()
    assert put(console, body, user).status_code == 403
    assert console.config.read_text() == text and console.audit_count() == audit_before


def test_an_unreadable_config_file_is_a_500_without_the_path(console):
    console.config.unlink()
    r = put(console, {"zones": [EAST, PARKING]})
    assert r.status_code == 500 and "could not be saved" in r.text
    assert_no_server_path(console, r.text)


# an intrusion that lasts: the parked blue 'car' of the scene video stands in the 'parking' zone all along
CAR_IN_LOT = {"kind": "intrusion", "name": "car-in-lot", "zone": "parking", "classes": ["car"], "min_seconds": 0.5}


@pytest.fixture
def parked_car_server(console_video: Path, tmp_path: Path) -> Any:
    config = tmp_path / "watch.yaml"
    text = console_yaml(console_video, tmp_path, live=True)
    fire_lane = "      - kind: fire_lane\n        zone: parking\n        classes: [car]\n        min_seconds: 2.0\n"
    assert fire_lane in text
    config.write_text(
        text.replace(fire_lane, "      " + yaml.safe_dump([CAR_IN_LOT]).replace("\n", "\n      ").rstrip() + "\n")
    )
    yield from served_console(config, tmp_path)


def car_incidents(store: Any) -> list[Any]:
    records, _ = store.query_records(EventFilter(rule="car-in-lot"), limit=None)
    return [r.event for r in records]


def wait_for(predicate: Any, timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return value


def test_saves_elsewhere_do_not_split_an_ongoing_incident(parked_car_server):
    """The real pipeline raises the parked car's intrusion; two saves that leave its rule and zone as
    they were (renaming another zone with its rule, adding a rule elsewhere) keep it one open incident.
    Changing the rule itself then ends it and starts another."""
    c = parked_car_server.console
    store = c.runtime.store
    first = wait_for(lambda: car_incidents(store))
    assert len(first) == 1 and first[0].end_s is None
    renamed = {**EAST, "name": "east-side"}
    assert (
        put(c, {"zones": [renamed, PARKING], "rules": [{**INTRUSION, "zone": "east-side"}, CAR_IN_LOT]}).status_code
        == 200
    )
    time.sleep(1.0)
    loiter = {"kind": "loitering", "zone": "east-side", "min_seconds": 60}
    body = {"zones": [renamed, PARKING], "rules": [{**INTRUSION, "zone": "east-side"}, CAR_IN_LOT, loiter]}
    assert put(c, body).status_code == 200
    time.sleep(1.5)  # several frames under the new rules
    incidents = car_incidents(store)
    assert [(e.event_id, e.end_s) for e in incidents] == [(first[0].event_id, None)]
    # the control: a changed rule restarts, so its incident ends and a new one starts
    body["rules"][1] = {**CAR_IN_LOT, "min_seconds": 0.6}
    assert put(c, body).status_code == 200
    incidents = wait_for(lambda: (got := car_incidents(store)) and len(got) == 2 and got)
    ended = next(e for e in incidents if e.event_id == first[0].event_id)
    assert ended.end_s is not None and sum(e.end_s is None for e in incidents) == 1
