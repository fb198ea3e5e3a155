"""Checklists over the real app and store: a rule's `sop` steps on the incident, ticks audited with who and
when, "2 of 4 steps" in the timeline's list, resolving with steps unticked refused (422) without a note, and
the evidence export route (operator and admin, audited with the reason, the incident kept)."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fakes_console import ConsoleUnderTest, console_yaml, make_console, put_zones

from campusguard.app.events import Event

SOP = ["Send the patrol", "Check the door", "Call the duty officer", "Write the log"]


@pytest.fixture
def sop_console(console_video: Path, tmp_path: Path, make_event: Callable[..., Event]) -> Iterator[ConsoleUnderTest]:
    config = tmp_path / "watch.yaml"
    config.write_text(
        console_yaml(console_video, tmp_path).replace(
            "        min_seconds: 1.0\n", f"        min_seconds: 1.0\n        sop: {json.dumps(SOP)}\n", 1
        )
    )
    c = make_console(config, tmp_path)
    rule = next(r.display_name() for r in c.runtime.loaded.config.cameras[0].rules if r.kind == "intrusion")
    for i in range(3):
        c.runtime.store.add(
            make_event(event_id=f"inc{i}", camera_id="cam1", rule_name=rule, zone="east", start_s=float(i))
        )
    c.runtime.store.add(make_event(event_id="plain", camera_id="cam1", rule_name="fire_lane:parking", zone="parking"))
    yield c
    c.runtime.stop()
    c.users.close()


def tick(c: ConsoleUnderTest, user: str, eid: str, index: int, checked: bool = True):
    return c.client().post(
        f"/api/v1/events/{eid}/checklist", json={"index": index, "checked": checked}, headers=c.bearer(user)
    )


def test_steps_are_ticked_audited_and_counted_in_the_timeline(sop_console: ConsoleUnderTest) -> None:
    c = sop_console
    got = c.client().get("/api/v1/events/inc0", headers=c.bearer("vera")).json()
    assert [s["step"] for s in got["checklist"]["steps"]] == SOP and got["checklist"]["done"] == 0
    assert tick(c, "vera", "inc0", 0).status_code == 403  # viewers only read
    assert tick(c, "otto", "inc0", 0).status_code == 200
    r = tick(c, "ada", "inc0", 2)
    assert r.status_code == 200 and r.json()["checklist"]["done"] == 2
    step = r.json()["checklist"]["steps"][2]
    assert step["checked"] and step["by"] == "ada" and step["at"]
    assert tick(c, "otto", "inc0", 2, checked=False).json()["checklist"]["done"] == 1
    assert tick(c, "otto", "inc0", 1).status_code == 200
    assert tick(c, "otto", "inc0", 4).status_code == 422  # no fifth step
    assert tick(c, "otto", "ghost", 0).status_code == 404
    assert tick(c, "otto", "plain", 0).status_code == 422  # its rule has no checklist
    entries = c.users.audit_entries(action="event.checklist", limit=10)[0]
    assert [(e.user, e.details["step"], e.details["checked"]) for e in reversed(entries)] == [
        ("otto", SOP[0], True),
        ("ada", SOP[2], True),
        ("otto", SOP[2], False),
        ("otto", SOP[1], True),
    ]
    page = c.client().get("/api/v1/events", headers=c.bearer("vera")).json()["items"]
    lists = {e["id"]: e["checklist"] for e in page}
    assert (lists["inc0"]["done"], lists["inc0"]["total"]) == (2, 4) and lists["plain"] is None


def test_resolving_with_steps_unticked_needs_a_note(sop_console: ConsoleUnderTest) -> None:
    c = sop_console
    client = c.client()
    r = client.post("/api/v1/events/inc0/resolve", json={"note": ""}, headers=c.bearer("otto"))
    assert r.status_code == 422 and "4 checklist step(s)" in r.json()["detail"]
    assert c.runtime.store.get_record("inc0").state == "open"  # type: ignore[union-attr]
    assert (
        client.post(
            "/api/v1/events/inc0/resolve", json={"note": "patrol off sick"}, headers=c.bearer("otto")
        ).status_code
        == 200
    )
    for i in range(4):
        tick(c, "otto", "inc1", i)
    assert client.post("/api/v1/events/inc1/resolve", json={}, headers=c.bearer("otto")).status_code == 200
    assert (
        client.post("/api/v1/events/plain/resolve", json={}, headers=c.bearer("otto")).status_code == 200
    )  # no checklist
    bulk = client.post("/api/v1/events/bulk", json={"ids": ["inc2"], "action": "resolve"}, headers=c.bearer("otto"))
    assert bulk.status_code == 422 and "inc2" in bulk.json()["detail"]
    bulk = client.post(
        "/api/v1/events/bulk",
        json={"ids": ["inc2"], "action": "resolve", "note": "duplicate"},
        headers=c.bearer("otto"),
    )
    assert bulk.status_code == 200 and bulk.json()["updated"][0]["state"] == "resolved"


def test_the_console_exports_evidence_for_operators_with_a_reason(sop_console: ConsoleUnderTest) -> None:
    c = sop_console
    client = c.client()
    body = {"ids": ["inc0", "inc1"], "reason": "disciplinary panel 12"}
    assert client.post("/api/v1/evidence", json=body, headers=c.bearer("vera")).status_code == 403
    assert (
        client.post("/api/v1/evidence", json={"ids": ["inc0"]}, headers=c.bearer("otto")).status_code == 422
    )  # no reason
    assert (
        client.post("/api/v1/evidence", json={"ids": ["ghost"], "reason": "x"}, headers=c.bearer("otto")).status_code
        == 404
    )
    tick(c, "otto", "inc0", 0)
    r = client.post("/api/v1/evidence", json=body, headers=c.bearer("otto"))
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(r.content)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        assert manifest["incidents"] == ["inc0", "inc1"] and manifest["created_by"] == "otto"
        incident = json.loads(zf.read("incidents/inc0/incident.json"))
        assert incident["checklist"]["done"] == 1 and any(a["action"] == "event.checklist" for a in incident["audit"])
    entries = c.users.audit_entries(action="evidence.export", limit=10)[0]
    assert {(e.user, e.target, e.details["reason"]) for e in entries} == {
        ("otto", "inc0", "disciplinary panel 12"),
        ("otto", "inc1", "disciplinary panel 12"),
    }
    assert c.runtime.store.get_record("inc0").kept  # type: ignore[union-attr]
    bundle = c.tmp / "case.zip"
    bundle.write_bytes(r.content)
    from campusguard.app.evidence.bundle import verify_bundle

    assert verify_bundle(bundle).ok


def test_the_incident_report_for_operators(sop_console: ConsoleUnderTest) -> None:
    c = sop_console
    client = c.client()
    tick(c, "otto", "inc0", 0)
    tick(c, "otto", "inc0", 3)
    assert client.get("/api/v1/events/inc0/report.html", headers=c.bearer("vera")).status_code == 403
    assert client.get("/api/v1/events/ghost/report.html", headers=c.bearer("otto")).status_code == 404
    page = client.get("/api/v1/events/inc0/report.html", headers=c.bearer("otto"))
    assert page.status_code == 200 and "Checklist: 2 of 4 steps" in page.text and "Incident inc0" in page.text
    pdf = client.get("/api/v1/events/inc0/report.pdf", headers=c.bearer("ada"))
    assert (
        pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf" and pdf.content.startswith(b"%PDF")
    )


def test_the_zone_editor_keeps_a_checklist_and_the_rule_kinds_offer_it(sop_console: ConsoleUnderTest) -> None:
    """Steps go through the editor's save unchanged (commas included) and are a free-text list in its form."""
    c = sop_console
    client = c.client()
    zones = client.get("/api/v1/cameras/cam1/zones", headers=c.bearer("ada")).json()
    assert zones["rules"][0]["sop"] == SOP
    steps = ["Call the patrol, then the duty officer", "Write the log"]
    zones["rules"][0]["sop"] = steps
    assert put_zones(client, "cam1", zones, c.bearer("ada")).status_code == 200
    assert client.get("/api/v1/cameras/cam1/zones", headers=c.bearer("vera")).json()["rules"][0]["sop"] == steps
    assert f"- {steps[0]}" in c.config.read_text()
    kinds = client.get("/api/v1/rule-kinds", headers=c.bearer("vera")).json()
    fields = {f["name"]: f for k in kinds["kinds"] for f in k["fields"] if k["kind"] == "intrusion"}
    assert fields["sop"]["type"] == "list" and fields["sop"]["pattern"] is None
    got = client.get("/api/v1/events/inc0", headers=c.bearer("vera")).json()  # the incident follows the config
    assert [s["step"] for s in got["checklist"]["steps"]] == steps
