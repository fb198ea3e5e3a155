"""The zone editor's form for each rule kind, derived from the kind's config model (its JSON Schema),
so the form has no list of fields of its own to drift from `campusguard.app.config.rules`.

`rule_form(model)` says what the rule watches (a zone or a line, and whether it may watch the whole
frame instead) and lists the model's fields as `RuleFieldOut` rows: type, bounds, default, choices,
pattern, and whether the field is one of the shared debouncing knobs (``advanced``) that the editor
folds away. A nested section (``escalate``) is a ``section`` row with its own fields; a list whose
schema says it holds alert sink names (``"names": "alert_sinks"``) gets the configured sinks' names
as its choices. ``GET /api/v1/rule-kinds`` serves it with each kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from campusguard.app.config.rules import RuleConfigBase, ZoneRuleConfigBase

__all__ = ["FieldType", "RuleFieldOut", "RuleFormOut", "rule_form"]

FieldType = Literal["number", "integer", "boolean", "choice", "text", "classes", "list", "section"]
_SHOWN_FIRST = ("name", "classes")  # shared fields every rule form shows; the other shared ones are advanced
_RESPONSE = ("sop", "escalate")  # shared, but what operators do about an incident: shown after the kind's own


class RuleFieldOut(BaseModel):
    """One field of a rule kind's section, as its config model declares it."""

    name: str = Field(description="The field as the config spells it (`min_seconds`).")
    title: str = Field(description="The field for people (`Minimum seconds`).")
    description: str = Field("", description="What the field does.")
    type: FieldType = Field(
        description="`number`, `integer`, `boolean`, `choice` (one of `choices`), `text`, `classes` "
        "(a list of class names or ids), `list` (a list of texts matching `pattern`, or of `choices` when it has "
        "them) or `section` (a nested object of `fields`; null when `nullable` and left out)."
    )
    default: Any = Field(None, description="The value when the field is left out (none where it has no default).")
    minimum: float | None = Field(None, description="Smallest value allowed.")
    maximum: float | None = Field(None, description="Largest value allowed.")
    exclusive_minimum: bool = Field(False, description="Whether `minimum` itself is excluded.")
    nullable: bool = Field(False, description="Whether the field may be left empty (null).")
    choices: list[str] = Field(
        default_factory=list, description="The allowed values of a `choice` field (or of a `list`'s items)."
    )
    pattern: str | None = Field(None, description="The regular expression a text (or each list item) must match.")
    advanced: bool = Field(False, description="A debouncing or scheduling knob every rule of its family shares.")
    fields: list[RuleFieldOut] = Field(default_factory=list, description="The fields of a `section`.")


class RuleFormOut(BaseModel):
    """What a rule kind watches and the fields of its section."""

    target: Literal["zone", "line"] | None = Field(description="What the rule watches: a zone, a line, or neither.")
    target_optional: bool = Field(description="Whether the rule may go without it (and watch the whole frame).")
    fields: list[RuleFieldOut]


def _variant(prop: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The non-null variant of a property (a ``$ref`` resolved in ``defs``) and whether null is allowed."""
    variants = prop.get("anyOf")
    real = [v for v in variants if v.get("type") != "null"] if variants else [prop]
    schema = real[0] if len(real) == 1 else {}
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = defs.get(ref.removeprefix("#/$defs/"), {})
    return schema, len(real) < len(variants or [])


def _field_type(schema: dict[str, Any]) -> FieldType | None:
    if "enum" in schema:
        return "choice"
    kind = schema.get("type")
    if kind in ("number", "integer", "boolean"):
        return kind
    if kind == "string":
        return "text"
    if kind == "object" and "properties" in schema:
        return "section"
    if kind == "array":
        items = schema.get("items", {})
        types = {v.get("type") for v in items.get("anyOf", [items])}
        if types == {"integer", "string"}:
            return "classes"
        if types == {"string"}:
            return "list"
    return None


def _field(
    name: str, prop: dict[str, Any], default: Any, common: set[str], defs: dict[str, Any], sinks: Sequence[str]
) -> RuleFieldOut | None:
    schema, nullable = _variant(prop, defs)
    kind = _field_type(schema)
    if kind is None:
        return None
    minimum = schema.get("minimum", schema.get("exclusiveMinimum"))
    maximum = schema.get("maximum", schema.get("exclusiveMaximum"))
    items = schema.get("items", {})
    choices = [str(c) for c in schema.get("enum", [])]
    if prop.get("names") == "alert_sinks" or schema.get("names") == "alert_sinks":
        choices = list(sinks)
    fields: list[RuleFieldOut] = []
    if kind == "section":
        for sub, sub_prop in schema["properties"].items():
            row = _field(sub, sub_prop, sub_prop.get("default"), set(), defs, sinks)
            if row is None:  # a section the form cannot show whole is left to the config file
                return None
            fields.append(row)
    return RuleFieldOut(
        name=name,
        title=prop.get("title", name),
        description=prop.get("description", ""),
        type=kind,
        default=default,
        minimum=minimum,
        maximum=maximum,
        exclusive_minimum="exclusiveMinimum" in schema,
        nullable=nullable,
        choices=choices,
        pattern=schema.get("pattern", items.get("pattern") if isinstance(items, dict) else None),
        advanced=name in common and name not in _SHOWN_FIRST and name not in _RESPONSE,
        fields=fields,
    )


def rule_form(model: type[RuleConfigBase], *, sinks: Sequence[str] = ()) -> RuleFormOut:
    """The editor's form of one rule kind's config ``model``: the name and classes, its own fields, the
    checklist and escalation, then the shared (advanced) ones.

    Args:
        sinks: the configured alert sinks' names (`AlertSinkConfig.sink_name`): the choices of a
            field that names sinks (``escalate.to``).
    """
    target: Literal["zone", "line"] | None = None
    if issubclass(model, ZoneRuleConfigBase):
        target, optional = "zone", model.zone_optional
    elif "line" in model.model_fields:
        target, optional = "line", False
    else:
        optional = True
    common = set(ZoneRuleConfigBase.model_fields) | set(RuleConfigBase.model_fields)
    schema = model.model_json_schema()
    props: dict[str, Any] = schema.get("properties", {})
    defs: dict[str, Any] = schema.get("$defs", {})
    skip = {"kind", target}
    ordered = [n for n in _SHOWN_FIRST if n in props]
    ordered += [n for n in props if n not in common and n not in ordered]
    ordered += [n for n in _RESPONSE if n in props]
    ordered += [n for n in props if n not in ordered]
    defaults = {n: f.get_default(call_default_factory=True) for n, f in model.model_fields.items()}
    fields = [
        f
        for n in ordered
        if n not in skip and (f := _field(n, props[n], defaults.get(n), common, defs, sinks)) is not None
    ]
    return RuleFormOut(target=target, target_optional=optional, fields=fields)
