"""The rule registry: one entry per kind, found in the rule modules, and every list of kinds derived from it.

These tests iterate over what the registry found; each kind's own facts (its label, its end phase) are
pinned in that kind's own test module.
"""

from __future__ import annotations

import inspect
import json
import re
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
from campusguard.errors import ConfigError, InvalidInputError
from campusguard.zones import PolygonZone

NAMES = {0: "person", 2: "car", 3: "motorcycle", 5: "bus", 7: "truck"}
RES = (640, 360)


def union_models(union: object) -> tuple[type, ...]:
    """The member models of an ``Annotated[Union[...], Field(discriminator=...)]``."""
    inner = get_args(union)[0]
    return get_args(inner)


def test_every_kind_has_a_config_model_a_builder_a_rule_and_a_label():
    assert len(RULES) >= 1
    for entry in RULES:
        assert issubclass(entry.config, RuleConfigBase)
        assert entry.config.model_fields["kind"].default == entry.kind
        assert callable(entry.build) and len(inspect.signature(entry.build).parameters) == 2
        assert entry.rule_type.kind == entry.kind
        assert entry.label and entry.label[0].isupper()
        assert entry.example_section()["kind"] == entry.kind


def test_every_list_of_kinds_is_the_registry():
    kinds = RULES.kinds()
    assert tuple(e.kind for e in RULES if e.section is None) == RULE_KINDS  # a camera's `rules` items
    assert RULES.config_models() == RULE_CONFIGS
    assert tuple(RULE_TYPES) == kinds
    assert {e.section for e in RULES if e.section} <= set(CameraConfig.model_fields)  # e.g. `health`
    camera_rules = CameraConfig.model_fields["rules"].annotation
    assert union_models(get_args(camera_rules)[0]) == RULES.config_models()
    assert union_models(RULES.config_union()) == RULES.config_models()


def test_kinds_are_listed_by_their_order_then_by_module():
    """Kinds that declare an ``order`` come first, by it; the others after, by module name: the same list in
    every process, whatever the file system's order."""
    keys = [(e.order is None, e.order or 0, e.config.__module__) for e in RULES]
    assert keys == sorted(keys)


def test_the_cli_help_and_check_use_the_registry_kinds(tmp_path):
    import typer

    from campusguard.cli.main import app, main

    events = typer.main.get_command(app).commands["events"]  # type: ignore[attr-defined]
    (kind,) = [p for p in events.params if p.name == "kind"]
    assert kind.help == f"Only this rule kind: {RULES.kinds_text()}."
    assert main(["events", "--db", str(tmp_path / "none.db"), "--kind", "tailgate"]) == InvalidInputError.exit_code


def test_an_unknown_kind_fails_loudly():
    with pytest.raises(UnknownRuleKindError, match=rf"unknown rule kind 'tailgate'; expected {re.escape(RULES.kinds_text())}$"):
        RULES.entry("tailgate")
    assert issubclass(UnknownRuleKindError, InvalidInputError)
    with pytest.raises(ConfigError, match=r"c\.yaml:5: cameras\[0\]\.rules\[0\]: unknown rule kind 'tailgate'"):
        parse_config("cameras:\n  - id: a\n    source: a.mp4\n    rules:\n      - kind: tailgate\n", "c.yaml")
    ctx = RuleContext(camera_id="a", names=NAMES, resolution_wh=RES)
    entry = next(iter(RULES))
    without = RuleRegistry(e for e in RULES if e.kind != entry.kind)
    with pytest.raises(UnknownRuleKindError, match=f"'{entry.kind}'"):
        without.build(entry.config.model_validate(entry.example_section()), ctx)


CAMERA = """\
cameras:
  - id: gate
    source: gate.mp4
    zones:
      - name: zone
        polygon: [[10, 10], [200, 10], [200, 200], [10, 200]]
    lines:
      - name: line
        points: [[0, 300], [640, 300]]
    health: {enabled: false}
    rules:
"""
"""A camera with the zone ``zone`` and the line ``line`` that every kind's example watches (its own
health off, so its rules are exactly the ones given)."""

ITEMS = [e for e in RULES if e.section is None]
"""The kinds written as a camera's ``rules`` items (not those a camera section of their own configures)."""


def camera_with(*sections: dict[str, object]) -> str:
    return CAMERA + "".join(f"      - {json.dumps(s)}\n" for s in sections)


def test_an_unknown_kind_when_building_a_camera_names_the_config_line(monkeypatch):
    first, last = ITEMS[0], ITEMS[-1]
    loaded = parse_config(camera_with(first.example_section(), last.example_section()), "c.yaml")
    monkeypatch.setattr(wiring, "RULES", RuleRegistry(e for e in RULES if e.kind != last.kind))
    message = rf"c\.yaml:{CAMERA.count(chr(10)) + 2}: cameras\[0\]\.rules\[1\]: unknown rule kind '{last.kind}'"
    with pytest.raises(ConfigError, match=message):
        build_camera(loaded, 0, NAMES, RES, 10.0)


def test_registry_and_config_must_agree():
    with pytest.raises(ValueError, match="registered twice"):
        RuleRegistry([*RULES, next(iter(RULES))])
    assert RULES.config_models() == RULE_CONFIGS  # the config's list is the registry's, derived
    with pytest.raises(TypeError, match="TailgateRule.kind must be 'other'"):
        RuleEntry(OtherRuleConfig, TailgateRule, lambda c, x: None, "Other")


class TailgateRuleConfig(ZoneRuleConfigBase):
    """A test kind: one more zone rule."""

    kind: Literal["tailgate"] = Field("tailgate", title="Kind", description="Rule kind.")
    min_seconds: float = Field(1.0, ge=0, title="Minimum seconds", description="Dwell.")


class TailgateRule(LoiteringRule):
    kind = "tailgate"


class OtherRuleConfig(ZoneRuleConfigBase):
    kind: Literal["other"] = Field("other", title="Kind", description="Rule kind.")


def _build_tailgate(cfg: TailgateRuleConfig, ctx: RuleContext) -> TailgateRule:
    return TailgateRule(min_seconds=cfg.min_seconds, **ctx.zone_rule_kwargs(cfg))


TAILGATE = RuleEntry(TailgateRuleConfig, TailgateRule, _build_tailgate, "Tailgating")


def test_a_new_kind_is_one_entry():
    registry = RULES.with_entry(TAILGATE)
    assert registry.kinds()[-1] == "tailgate" and registry.label("tailgate") == "Tailgating"
    assert registry.kinds()[:-1] == RULES.kinds() and "tailgate" not in RULES  # the app's registry is left as it is
    other = next(iter(RULES))
    sections = TypeAdapter(list[registry.config_union()]).validate_python(
        [{"kind": "tailgate", "zone": "z", "min_seconds": 2}, other.example_section()]
    )
    assert [type(s) for s in sections] == [TailgateRuleConfig, other.config]
    zone = PolygonZone([(0, 0), (100, 0), (100, 100), (0, 100)], "z", resolution_wh=RES)
    ctx = RuleContext(camera_id="a", names=NAMES, resolution_wh=RES, zones={"z": zone}, anchors={"z": "center"})
    rule = registry.build(sections[0], ctx)
    assert isinstance(rule, TailgateRule) and rule.name == "tailgate:z" and rule.kind == "tailgate"
    with pytest.raises(UnknownRuleKindError):
        RULES.build(sections[0], ctx)


@pytest.mark.parametrize("entry", ITEMS, ids=RULE_KINDS)
def test_each_kind_builds_its_rule_from_its_example(entry: RuleEntry):
    parts = build_camera(parse_config(camera_with(entry.example_section()), "c.yaml"), 0, NAMES, RES, 10.0)
    (rule,) = parts.rules.rules
    assert type(rule) is RULE_TYPES[entry.kind] and rule.kind == entry.kind and rule.camera_id == "gate"


def test_the_rule_kind_of_an_event_is_a_plain_string():
    from campusguard.app.events.types import RuleKind

    assert RuleKind is str  # the events module stays a leaf; the registry holds the kinds


@pytest.mark.parametrize("entry", [e for e in RULES if e.section is not None], ids=lambda e: e.kind)
def test_each_kind_with_a_section_of_its_own_builds_from_its_example_there(entry: RuleEntry):
    """A kind a camera section configures (``health``) is on by default: its example goes in that section."""
    section = {k: v for k, v in entry.example_section().items() if k != "kind"}
    text = CAMERA.replace("    health: {enabled: false}\n", f"    {entry.section}: {json.dumps(section)}\n")
    text = text.replace("    rules:\n", "    rules: []\n")
    parts = build_camera(parse_config(text, "c.yaml"), 0, NAMES, RES, 10.0)
    (rule,) = parts.rules.rules
    assert type(rule) is RULE_TYPES[entry.kind] and rule.kind == entry.kind and rule.camera_id == "gate"
