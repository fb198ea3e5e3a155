"""`GET /api/v1/rule-kinds`: the rule registry's kinds and labels and the event phases, for the pages' filters."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from campusguard.app.config import ZoneRuleConfigBase
from campusguard.app.rules import RULES, LoiteringRule, RuleEntry, registry


def test_rule_kinds_come_from_the_registry_with_fall(console):
    r = console.client().get("/api/v1/rule-kinds", headers=console.bearer("vera"))
    assert r.status_code == 200
    body = r.json()
    assert [k["kind"] for k in body["kinds"]] == list(RULES.kinds())
    named = [(k["kind"], k["label"], k["has_end"]) for k in body["kinds"]]
    assert ("fall", "Fall", True) in named and ("fire_lane", "Fire lane", True) in named
    assert ("line_crossing", "Line crossing", False) in named
    assert body["phases"] == ["start", "update", "end"]


def test_rule_kinds_need_credentials(console):
    assert console.client().get("/api/v1/rule-kinds").status_code == 401


class TailgateRuleConfig(ZoneRuleConfigBase):
    kind: Literal["tailgate"] = Field("tailgate", title="Kind", description="Rule kind.")


class TailgateRule(LoiteringRule):
    kind = "tailgate"


def test_a_kind_added_to_the_registry_is_listed(console, monkeypatch):
    entry = RuleEntry(TailgateRuleConfig, TailgateRule, lambda cfg, ctx: None, "Tailgating", has_end=False)
    monkeypatch.setattr(registry, "RULES", RULES.with_entry(entry))
    kinds = console.client().get("/api/v1/rule-kinds", headers=console.bearer("vera")).json()["kinds"]
    assert (kinds[-1]["kind"], kinds[-1]["label"], kinds[-1]["has_end"]) == ("tailgate", "Tailgating", False)
    assert kinds[-1]["target"] == "zone" and "inertia" in [f["name"] for f in kinds[-1]["fields"]]
    assert len(kinds) == len(RULES) + 1


def test_each_kind_carries_its_editor_form_from_its_config_model(console):
    """The zone editor builds its rule forms from these rows: what the rule watches, and every field
    of the config model (but `kind` and the zone or line) with its type, bounds, default and choices."""
    kinds = {
        k["kind"]: k for k in console.client().get("/api/v1/rule-kinds", headers=console.bearer("vera")).json()["kinds"]
    }
    for entry in RULES:
        if entry.section is not None:  # configured by its own camera section, not a rule form (camera health)
            continue
        form = kinds[entry.kind]
        names = {f["name"] for f in form["fields"]}
        assert names == set(entry.config.model_fields) - {"kind", form["target"]}
    assert (kinds["intrusion"]["target"], kinds["intrusion"]["target_optional"]) == ("zone", False)
    assert (kinds["fall"]["target"], kinds["fall"]["target_optional"]) == ("zone", True)
    assert kinds["line_crossing"]["target"] == "line"
    fields = {f["name"]: f for f in kinds["fire_lane"]["fields"]}
    assert [f["name"] for f in kinds["fire_lane"]["fields"]][:3] == ["name", "classes", "min_seconds"]
    assert fields["classes"]["type"] == "classes" and fields["classes"]["default"] == [
        "car",
        "truck",
        "bus",
        "motorcycle",
    ]
    assert (fields["min_seconds"]["type"], fields["min_seconds"]["minimum"], fields["min_seconds"]["default"]) == (
        "number",
        0,
        10.0,
    )
    assert (
        fields["max_movement_px"]["nullable"] and fields["inertia"]["advanced"] and not fields["per_track"]["advanced"]
    )
    assert fields["stationary_window_s"]["exclusive_minimum"]
    line = {f["name"]: f for f in kinds["line_crossing"]["fields"]}
    assert line["direction"]["type"] == "choice" and line["direction"]["choices"] == ["in", "out", "both"]
    assert line["time_windows"]["type"] == "list" and line["time_windows"]["pattern"]


def test_camera_health_is_listed_as_configured_by_its_own_section(console):
    """`camera_health` is a kind (the timeline filters and labels it) but not a `rules:` item: its
    `section` says so, and the zone editor leaves such kinds out of its "add rule" list."""
    kinds = console.client().get("/api/v1/rule-kinds", headers=console.bearer("vera")).json()["kinds"]
    sections = {k["kind"]: k["section"] for k in kinds}
    assert sections == {e.kind: e.section for e in RULES}
    assert sections["camera_health"] == "health"
    assert next(k for k in kinds if k["kind"] == "camera_health")["label"] == "Camera health"
    assert {kind for kind, section in sections.items() if section is None} >= {"intrusion", "fall", "line_crossing"}
