"""The rule registry: one entry per kind, and every list of kinds derived from it."""

from __future__ import annotations

import inspect
from typing import Literal, get_args

import pytest
from pydantic import Field, TypeAdapter

from campusguard.app.config import (
    RULE_CONFIGS,
    RULE_KINDS,
    CameraConfig,
    RuleConfigBase,
    ZoneRuleConfigBase,
    parse_config,
)
from campusguard.app.engine import wiring
from campusguard.app.engine.wiring import build_camera
from campusguard.app.rules import RULE_TYPES, RULES, LoiteringRule, RuleContext, RuleEntry, RuleRegistry
from campusguard.app.rules.registry import UnknownRuleKindError
from campusguard.app.rules.zone_rules import LoiteringRuleConfig
from campusguard.errors import ConfigError, InvalidInputError
from campusguard.zones import PolygonZone

NAMES = {0: "person", 2: "car", 3: "motorcycle", 5: "bus", 7: "truck"}
RES = (640, 360)


def union_models(union: object) -> tuple[type, ...]:
    """The member models of an ``Annotated[Union[...], Field(discriminator=...)]``."""
    inner = get_args(union)[0]
    return get_args(inner)


def test_every_kind_has_a_config_model_a_builder_a_rule_and_a_label():
    assert len(RULES) == 7
    for entry in RULES:
        assert issubclass(entry.config, RuleConfigBase)
        assert entry.config.model_fields["kind"].default == entry.kind
        assert callable(entry.build) and len(inspect.signature(entry.build).parameters) == 2
        assert entry.rule_type.kind == entry.kind
        assert entry.label and entry.label[0].isupper()
    assert {e.kind: e.has_end for e in RULES} == {
        "intrusion": True,
        "crowd": True,
        "fire_lane": True,
        "loitering": True,
        "line_crossing": False,
        "fall": True,
        "camera_health": True,
    }
    assert RULES.label("fire_lane") == "Fire lane" and RULES.label("fall") == "Fall"


def test_every_list_of_kinds_is_the_registry():
    kinds = RULES.kinds()
    assert kinds == ("intrusion", "crowd", "fire_lane", "loitering", "line_crossing", "fall", "camera_health")
    assert tuple(e.kind for e in RULES if e.section is None) == RULE_KINDS  # a camera's `rules` items
    assert RULES.config_models() == RULE_CONFIGS
    assert tuple(RULE_TYPES) == kinds
    assert {e.section for e in RULES if e.section} <= set(CameraConfig.model_fields)  # e.g. `health`
    camera_rules = CameraConfig.model_fields["rules"].annotation
    assert union_models(get_args(camera_rules)[0]) == RULES.config_models()
    assert union_models(RULES.config_union()) == RULES.config_models()


def test_the_cli_help_and_check_use_the_registry_kinds(tmp_path):
    import typer

    from campusguard.cli.main import app, main

    events = typer.main.get_command(app).commands["events"]  # type: ignore[attr-defined]
    (kind,) = [p for p in events.params if p.name == "kind"]
    assert kind.help == f"Only this rule kind: {RULES.kinds_text()}."
    assert main(["events", "--db", str(tmp_path / "none.db"), "--kind", "tailgate"]) == InvalidInputError.exit_code


def test_an_unknown_kind_fails_loudly():
    with pytest.raises(UnknownRuleKindError, match=r"unknown rule kind 'tailgate'; expected intrusion, .* or camera_health"):
        RULES.entry("tailgate")
    assert issubclass(UnknownRuleKindError, InvalidInputError)
    with pytest.raises(ConfigError, match=r"c\.yaml:5: cameras\[0\]\.rules\[0\]: unknown rule kind 'tailgate'"):
        parse_config("cameras:\n  - id: a\n    source: a.mp4\n    rules:\n      - kind: tailgate\n", "c.yaml")
    ctx = RuleContext(camera_id="a", names=NAMES, resolution_wh=RES)
    without_loitering = RuleRegistry(e for e in RULES if e.kind != "loitering")
    with pytest.raises(UnknownRuleKindError, match="'loitering'"):
        without_loitering.build(LoiteringRuleConfig(zone="z"), ctx)


def test_an_unknown_kind_when_building_a_camera_names_the_config_line(monkeypatch):
    text = """\
cameras:
  - id: gate
    source: gate.mp4
    zones:
      - name: z
        polygon: [[10, 10], [200, 10], [200, 200], [10, 200]]
    rules:
      - kind: intrusion
        zone: z
      - kind: loitering
        zone: z
"""
    loaded = parse_config(text, "c.yaml")
    monkeypatch.setattr(wiring, "RULES", RuleRegistry(e for e in RULES if e.kind != "loitering"))
    with pytest.raises(ConfigError, match=r"c\.yaml:10: cameras\[0\]\.rules\[1\]: unknown rule kind 'loitering'"):
        build_camera(loaded, 0, NAMES, RES, 10.0)


def test_registry_and_config_must_agree():
    with pytest.raises(ValueError, match="registered twice"):
        RuleRegistry([*RULES, next(iter(RULES))])
    assert RULES.config_models() == RULE_CONFIGS  # the config's list is the registry's, derived
    with pytest.raises(TypeError, match="LoiteringRule.kind must be 'crowd'"):
        RuleEntry(next(e.config for e in RULES if e.kind == "crowd"), LoiteringRule, lambda c, x: None, "Crowd")


class TailgateRuleConfig(ZoneRuleConfigBase):
    """A test kind: one more zone rule."""

    kind: Literal["tailgate"] = Field("tailgate", title="Kind", description="Rule kind.")
    min_seconds: float = Field(1.0, ge=0, title="Minimum seconds", description="Dwell.")


class TailgateRule(LoiteringRule):
    kind = "tailgate"


def _build_tailgate(cfg: TailgateRuleConfig, ctx: RuleContext) -> TailgateRule:
    return TailgateRule(min_seconds=cfg.min_seconds, **ctx.zone_rule_kwargs(cfg))


TAILGATE = RuleEntry(TailgateRuleConfig, TailgateRule, _build_tailgate, "Tailgating")


def test_a_new_kind_is_one_entry():
    registry = RULES.with_entry(TAILGATE)
    assert registry.kinds()[-1] == "tailgate" and registry.label("tailgate") == "Tailgating"
    assert RULES.kinds()[-1] == "camera_health"  # the app's registry is left as it is
    sections = TypeAdapter(list[registry.config_union()]).validate_python(
        [{"kind": "tailgate", "zone": "z", "min_seconds": 2}, {"kind": "crowd", "zone": "z"}]
    )
    assert [type(s) for s in sections] == [TailgateRuleConfig, RULES.entry("crowd").config]
    zone = PolygonZone([(0, 0), (100, 0), (100, 100), (0, 100)], "z", resolution_wh=RES)
    ctx = RuleContext(camera_id="a", names=NAMES, resolution_wh=RES, zones={"z": zone}, anchors={"z": "center"})
    rule = registry.build(sections[0], ctx)
    assert isinstance(rule, TailgateRule) and rule.name == "tailgate:z" and rule.kind == "tailgate"
    with pytest.raises(UnknownRuleKindError):
        RULES.build(sections[0], ctx)


@pytest.mark.parametrize("kind", RULE_KINDS)
def test_each_kind_builds_its_rule_from_its_section(kind):
    section: dict[str, object] = {"kind": kind}
    section["line" if kind == "line_crossing" else "zone"] = "l" if kind == "line_crossing" else "z"
    text = f"""\
cameras:
  - id: gate
    source: gate.mp4
    zones:
      - name: z
        polygon: [[10, 10], [200, 10], [200, 200], [10, 200]]
    lines:
      - name: l
        points: [[0, 300], [640, 300]]
    rules:
      - {section}
    health: {{enabled: false}}
"""
    parts = build_camera(parse_config(text.replace("'", ""), "c.yaml"), 0, NAMES, RES, 10.0)
    (rule,) = parts.rules.rules
    assert type(rule) is RULE_TYPES[kind] and rule.kind == kind and rule.camera_id == "gate"


def test_the_rule_kind_of_an_event_is_a_plain_string():
    from campusguard.app.events.types import RuleKind

    assert RuleKind is str  # the events module stays a leaf; the registry holds the kinds
