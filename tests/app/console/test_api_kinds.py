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
    assert {"kind": "fall", "label": "Fall", "has_end": True} in body["kinds"]
    assert {"kind": "fire_lane", "label": "Fire lane", "has_end": True} in body["kinds"]
    assert {"kind": "line_crossing", "label": "Line crossing", "has_end": False} in body["kinds"]
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
    assert kinds[-1] == {"kind": "tailgate", "label": "Tailgating", "has_end": False}
    assert len(kinds) == len(RULES) + 1
