"""A rule's `escalate` section and `sop` checklist through the zones route, as the zone editor's form
sends them: saved in the YAML and read back, refused with a 422 naming the field (an unknown sink, a
negative `after_s`, an empty step) with nothing saved and the config revision unchanged; the rule
kinds offer both fields, `escalate.to` with the configured alert sinks' names as its choices."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

EAST = {"name": "east", "polygon": [[160, 0], [320, 0], [320, 180], [160, 180]]}
ESCALATE = {"after_s": 90.0, "to": ["jsonl"]}
SOP = ["Send the patrol, then call", "Check the door"]


def zones_of(c: Any) -> tuple[dict[str, Any], str]:
    r = c.client().get("/api/v1/cameras/cam1/zones", headers=c.bearer("ada"))
    assert r.status_code == 200, r.text
    return r.json(), r.headers["etag"]


def detail_text(body: Any) -> str:
    """The error as the console shows it (`detailText` of api.js): each field's path, dotted, and its message."""
    detail = body["detail"]
    if isinstance(detail, str):
        return detail
    return "; ".join(".".join(str(p) for p in e["loc"] if p != "body") + ": " + e["msg"] for e in detail)


def put(c: Any, body: dict[str, Any], etag: str) -> Any:
    return c.client().put("/api/v1/cameras/cam1/zones", json=body, headers={**c.bearer("ada"), "If-Match": etag})


def test_escalate_and_sop_round_trip_through_the_zones_route(console):
    body, etag = zones_of(console)
    rule = next(r for r in body["rules"] if r["kind"] == "intrusion")
    rule["escalate"], rule["sop"] = ESCALATE, SOP
    saved = put(console, body, etag)
    assert saved.status_code == 200, saved.text
    assert saved.headers["etag"] != etag
    again, etag2 = zones_of(console)
    assert etag2 == saved.headers["etag"]
    back = next(r for r in again["rules"] if r["name"] == rule["name"])
    assert back["escalate"] == ESCALATE and back["sop"] == SOP
    on_disk = next(
        r for r in yaml.safe_load(console.config.read_text())["cameras"][0]["rules"] if r["kind"] == "intrusion"
    )
    assert on_disk["escalate"] == ESCALATE and on_disk["sop"] == SOP
    # the running camera has it too (the escalation watcher reads the live config)
    live = next(r for r in console.runtime.loaded.config.cameras[0].rules if r.kind == "intrusion")
    assert live.escalate is not None and live.escalate.to == ["jsonl"] and live.sop == SOP

    # turning escalation off again (null) is saved as no section
    back["escalate"] = None
    off = put(console, again, etag2)
    assert off.status_code == 200, off.text
    assert next(r for r in zones_of(console)[0]["rules"] if r["name"] == rule["name"])["escalate"] is None


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"escalate": {"after_s": 60, "to": ["pager"]}}, "escalate.to", "no alert sink is named 'pager'"),
        ({"escalate": {"after_s": 60, "to": ["jsonl"], "when": 1}}, "escalate.when", "Extra inputs"),
        ({"escalate": {"after_s": -5, "to": ["jsonl"]}}, "intrusion.escalate.after_s", "greater than 0"),
        ({"escalate": {"after_s": 60, "to": []}}, "intrusion.escalate.to", "at least 1"),
        ({"sop": ["Send the patrol", ""]}, "intrusion.sop.1", "at least 1 character"),
    ],
    ids=["unknown-sink", "unknown-key", "negative-after", "no-sink", "empty-step"],
)
def test_bad_escalate_or_sop_is_a_422_naming_the_field_and_saves_nothing(console, change, field, message):
    before = console.config.read_text()
    body, etag = zones_of(console)
    rule = next(r for r in body["rules"] if r["kind"] == "intrusion")
    rule.update(change)
    r = put(console, body, etag)
    assert r.status_code == 422, r.text
    detail = detail_text(r.json())
    assert field in detail and message in detail, detail
    assert str(console.config) not in detail and str(console.tmp) not in detail
    assert console.config.read_text() == before
    assert zones_of(console)[1] == etag  # the revision did not move: the form's next save still applies


def test_rule_kinds_offer_escalate_with_the_sink_names_and_sop_as_steps(console):
    kinds = console.client().get("/api/v1/rule-kinds", headers=console.bearer("ada")).json()["kinds"]
    fields = {f["name"]: f for f in next(k for k in kinds if k["kind"] == "intrusion")["fields"]}
    escalate = fields["escalate"]
    assert escalate["type"] == "section" and escalate["nullable"] and not escalate["advanced"]
    sub = {f["name"]: f for f in escalate["fields"]}
    assert (sub["after_s"]["type"], sub["after_s"]["minimum"], sub["after_s"]["exclusive_minimum"]) == (
        "number",
        0,
        True,
    )
    assert sub["after_s"]["default"] == 300.0
    assert sub["to"]["type"] == "list" and sub["to"]["choices"] == ["stdout", "jsonl"]
    assert fields["sop"]["type"] == "list" and fields["sop"]["pattern"] is None and not fields["sop"]["advanced"]
