"""Two admins editing one camera (issue 32, target 2), through a real uvicorn: conditional saves
(``ETag`` / ``If-Match``), the revisions kept, saves that change nothing, and rules known by name."""

from __future__ import annotations

import json
import stat
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import yaml
from fakes_console import PASSWORDS, ConsoleUnderTest, LiveServer, many_shapes_body, ring, start_server, stop_server

from campusguard.app.console.revisions import REVISIONS_KEPT, revisions_dir

ZONES = "/api/v1/cameras/cam1/zones"
WEST = {"name": "west", "polygon": [[0.0, 0.0], [150.0, 0.0], [150.0, 130.0], [0.0, 130.0]]}


@pytest.fixture
def served(console: ConsoleUnderTest) -> Iterator[LiveServer]:
    """The console (pipeline not started) behind a real uvicorn, with a second admin ``adele``."""
    console.users.add_user("adele", "admin", PASSWORDS["ada"])
    live = start_server(console)
    yield live
    stop_server(live)


def _client(live: LiveServer, user: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, headers=live.console.bearer(user), timeout=30)


def _load(client: httpx.Client) -> tuple[dict[str, Any], str]:
    r = client.get(ZONES)
    assert r.status_code == 200 and r.headers["etag"].startswith('"'), r.headers
    return r.json(), r.headers["etag"]


def test_a_stale_save_gets_409_and_the_other_admins_zone_and_blur_survive(served: LiveServer) -> None:
    console = served.console
    with _client(served, "ada") as ada, _client(served, "adele") as adele:
        mine, etag = _load(ada)
        theirs, etag_b = _load(adele)
        assert etag == etag_b
        mine["zones"].append(WEST)
        mine["privacy"]["blur"] = "persons"
        r = ada.put(ZONES, json=mine, headers={"If-Match": etag})
        assert r.status_code == 200, r.text
        new_etag = r.headers["etag"]
        assert new_etag != etag
        text, audit_before = console.config.read_text(), console.audit_count()
        theirs["zones"][1]["polygon"][0] = [0.0, 150.0]  # adele's edit, on the copy she loaded before
        r = adele.put(ZONES, json=theirs, headers={"If-Match": etag})
        assert r.status_code == 409, r.text
        assert r.json()["revision"] == new_etag.strip('"') and r.headers["etag"] == new_etag
        assert console.config.read_text() == text and console.audit_count() == audit_before  # nothing saved
        now, _ = _load(adele)
        assert [z["name"] for z in now["zones"]] == ["east", "parking", "west"] and now["privacy"]["blur"] == "persons"
        assert console.runtime.camera_blur("cam1") == "persons"
        # reloaded, her edit goes through on top of the other admin's
        now["zones"][1]["polygon"][0] = [0.0, 150.0]
        r = adele.put(ZONES, json=now, headers={"If-Match": new_etag})
        assert r.status_code == 200 and [z["name"] for z in r.json()["zones"]] == ["east", "parking", "west"]
        assert r.json()["privacy"]["blur"] == "persons"


def test_a_save_without_if_match_is_428_and_star_matches_any(served: LiveServer) -> None:
    console = served.console
    with _client(served, "ada") as ada:
        body, _ = _load(ada)
        text = console.config.read_text()
        r = ada.put(ZONES, json=body)
        assert r.status_code == 428 and "If-Match" in r.json()["detail"]
        assert console.config.read_text() == text
        body["zones"].append(WEST)
        assert ada.put(ZONES, json=body, headers={"If-Match": "*"}).status_code == 200


def test_a_save_that_changes_nothing_writes_nothing(served: LiveServer) -> None:
    console = served.console
    bak = console.config.with_name(console.config.name + ".bak")
    with _client(served, "ada") as ada:
        body, etag = _load(ada)
        body["zones"].append(WEST)
        r = ada.put(ZONES, json=body, headers={"If-Match": etag})
        assert r.status_code == 200
        etag, text, kept = r.headers["etag"], console.config.read_bytes(), bak.read_bytes()
        revisions = sorted(revisions_dir(console.config).iterdir())
        audit_before = console.audit_count()
        for _ in range(2):  # the same body again, and what the GET gives back
            r = ada.put(ZONES, json=body if _ == 0 else _load(ada)[0], headers={"If-Match": etag})
            assert r.status_code == 200 and r.headers["etag"] == etag
        assert console.config.read_bytes() == text and bak.read_bytes() == kept
        assert sorted(revisions_dir(console.config).iterdir()) == revisions and console.audit_count() == audit_before


def test_the_last_ten_revisions_are_kept_readable_by_the_owner_only(served: LiveServer) -> None:
    console = served.console
    with _client(served, "ada") as ada:
        body, etag = _load(ada)
        contents = [console.config.read_bytes()]
        for i in range(REVISIONS_KEPT + 2):
            body["zones"][0]["polygon"][0] = [160.0 + i + 1, 0.0]
            r = ada.put(ZONES, json=body, headers={"If-Match": etag})
            assert r.status_code == 200, r.text
            etag = r.headers["etag"]
            contents.append(console.config.read_bytes())
    kept = sorted(revisions_dir(console.config).iterdir())
    assert [p.read_bytes() for p in kept] == contents[-REVISIONS_KEPT - 1 : -1]  # the 10 versions before this one
    bak = console.config.with_name(console.config.name + ".bak")
    for path in [*kept, bak]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(revisions_dir(console.config).stat().st_mode) == 0o700
    assert bak.read_bytes() == contents[-2]


def test_every_rule_has_a_name_and_the_audit_names_rules_added_changed_and_removed(served: LiveServer) -> None:
    console = served.console
    with _client(served, "ada") as ada:
        body, etag = _load(ada)
        assert [r["name"] for r in body["rules"]] == ["intrusion:east", "fire_lane:parking"]  # generated, unique
        intrusion, fire_lane = body["rules"]
        body["rules"] = [
            {**fire_lane, "min_seconds": 3.0},
            {"kind": "loitering", "zone": "east", "min_seconds": 60},
        ]
        r = ada.put(ZONES, json=body, headers={"If-Match": etag})
        assert r.status_code == 200, r.text
        assert [x["name"] for x in r.json()["rules"]] == ["fire_lane:parking", "loitering:east"]
        entry = ada.get("/api/v1/audit?action=zones.update").json()["items"][0]
        details = entry["details"]
        assert details["rules_added"] == ["loitering:east"]
        assert details["rules_changed"] == ["fire_lane:parking"]
        assert details["rules_removed"] == ["intrusion:east"]
        assert [x["name"] for x in details["before"]["rules"]] == ["intrusion:east", "fire_lane:parking"]
        # written with their names: a later change of the zone keeps the rule's name
        saved = yaml.safe_load(console.config.read_text())["cameras"][0]["rules"]
        assert [x["name"] for x in saved] == ["fire_lane:parking", "loitering:east"]
        body = r.json()
        body["zones"].append(WEST)
        body["rules"][1]["zone"] = "west"
        r = ada.put(ZONES, json=body, headers={"If-Match": r.headers["etag"]})
        assert r.status_code == 200 and [x["name"] for x in r.json()["rules"]] == [
            "fire_lane:parking",
            "loitering:east",
        ]
        details = ada.get("/api/v1/audit?action=zones.update").json()["items"][0]["details"]
        assert (details["rules_added"], details["rules_changed"], details["rules_removed"]) == (
            [],
            ["loitering:east"],
            [],
        )


def test_a_save_of_63_zones_and_32_masks_of_256_points(served: LiveServer) -> None:
    """Issue 32's big save (it took 125 s): checked exactly (a zone inside a mask is still found among
    2,016 zone-mask pairs) and saved; the time bound is generous (the benchmark measures it:
    benchmarks/zone_save.py)."""
    console = served.console
    body = many_shapes_body((320, 180))
    assert len(json.dumps(body)) > 350_000
    with _client(served, "ada") as ada:
        _, etag = _load(ada)
        hidden = json.loads(json.dumps(body))
        hidden["zones"][40]["polygon"] = ring(*hidden_centre(hidden["privacy"]["masks"][17]["polygon"]), 3.0, 16, 7)
        r = ada.put(ZONES, json=hidden, headers={"If-Match": etag})
        assert r.status_code == 422 and "zones[40].polygon: zone 'zone-40' lies inside privacy mask 'mask-17'" in r.text
        start = time.monotonic()
        r = ada.put(ZONES, json=body, headers={"If-Match": etag})
        took = time.monotonic() - start
        assert r.status_code == 200, r.text
        assert took < 30, took
    camera = yaml.safe_load(console.config.read_text())["cameras"][0]
    assert len(camera["zones"]) == 63 and len(camera["privacy"]["masks"]) == 32
    assert camera["zones"][62]["polygon"] == body["zones"][62]["polygon"]


def hidden_centre(polygon: list[list[float]]) -> tuple[float, float]:
    xs, ys = zip(*polygon, strict=True)
    return sum(xs) / len(xs), sum(ys) / len(ys)
