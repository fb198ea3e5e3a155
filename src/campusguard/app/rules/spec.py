"""What a rule module declares next to its class: its config section (a `RuleConfigBase` or
`ZoneRuleConfigBase`, with what every rule section has), a `RuleEntry` (kind, config model,
builder, label, end phase), and the `RuleContext` its builder gets from the camera.

Kept apart from `campusguard.app.rules.registry` so that the rule modules can declare their
entries without importing the registry that collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, TypeVar, Union

from pydantic import Field

from campusguard.app.infra.configmodel import ConfigModel, NameText
from campusguard.app.rules.base import Rule
from campusguard.app.rules.shapes import LineSection
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

__all__ = [
    "ClassRef",
    "EscalateConfig",
    "RuleConfigBase",
    "RuleContext",
    "RuleEntry",
    "ZoneRuleConfigBase",
    "class_ids",
    "kind_of",
    "rule_config_union",
]

_WINDOW = r"^([01]?\d|2[0-3]):[0-5]\d-(([01]?\d|2[0-3]):[0-5]\d|24:00)$"

ClassRef = Annotated[int | str, Field(description="A class name (as the model names it) or a class id.")]


def _person() -> list[ClassRef]:
    return ["person"]


class EscalateConfig(ConfigModel):
    """Who is told when an incident of the rule stays unacknowledged."""

    after_s: float = Field(
        300.0, gt=0, le=7 * 86400, title="After", description="Seconds an incident may stay unacknowledged."
    )
    to: list[str] = Field(
        ...,
        title="To",
        description="Names of the alert sinks (`alerts[].name`, default their kind) the one `escalation` alert goes to.",
        min_length=1,
        max_length=32,
        # the console's rule form offers the configured sinks' names here (`campusguard.app.console.rule_form`)
        json_schema_extra={"names": "alert_sinks"},
    )


class RuleConfigBase(ConfigModel):
    """What every rule has: a name, the classes it watches, a cooldown and time windows.

    Each concrete model adds ``kind: Literal["<kind>"]`` with that kind as its default.
    """

    if TYPE_CHECKING:  # declared by every concrete model as a one-value Literal field
        kind: str

    watches_line: ClassVar[bool] = False
    """Whether `target` is a line of the camera (else a zone, or nothing)."""

    name: NameText | None = Field(
        None,
        title="Name",
        description="Rule name for events, unique per camera; default `<kind>:<zone or line>`.",
        max_length=64,
    )
    classes: list[ClassRef] = Field(
        default_factory=_person,
        title="Classes",
        description="Classes the rule applies to, by name or id.",
        min_length=1,
        max_length=100,
    )
    cooldown_s: float = Field(
        0.0,
        ge=0,
        le=86400,
        title="Cooldown",
        description="Seconds after an event starts before the same rule (per track for loitering) can start another.",
    )
    time_windows: list[Annotated[str, Field(pattern=_WINDOW)]] = Field(
        default_factory=list,
        title="Time windows",
        description="Daily local wall-clock windows `HH:MM-HH:MM` (may wrap midnight, e.g. `22:00-06:00`) in which the rule is armed; empty means always.",
        max_length=24,
    )
    sop: list[Annotated[str, Field(min_length=1, max_length=300)]] = Field(
        default_factory=list,
        title="Checklist",
        description="The standard operating procedure of this rule's incidents: steps an operator ticks off on the "
        "incident page (each tick audited); resolving with steps left unticked needs a note.",
        max_length=30,
    )

    escalate: EscalateConfig | None = Field(
        None,
        title="Escalate",
        description="Send one `escalation` alert to the named sinks when an incident is not acknowledged within `after_s`.",
    )

    def target(self) -> str | None:
        """The zone or line the rule watches."""
        return None

    def display_name(self) -> str:
        """``name``, or ``<kind>:<zone or line>``."""
        return self.name or f"{self.kind}:{self.target() or 'frame'}"


class ZoneRuleConfigBase(RuleConfigBase):
    """What every zone rule has: its zone and the debouncing of presence in it."""

    zone_optional: ClassVar[bool] = False
    """Whether the rule may go without ``zone`` (and then watch the whole frame)."""

    zone: NameText | None = Field(
        None, title="Zone", description="Name of the zone the rule watches (a zone of the same camera); required."
    )
    inertia: int = Field(
        3,
        ge=1,
        le=1000,
        title="Inertia",
        description="Frames an object's anchor must be inside the zone before it counts (debouncing).",
    )
    max_gap_s: float = Field(
        1.0,
        ge=0,
        le=3600,
        title="Gap tolerance",
        description="Seconds an object may vanish or step out without losing its time in the zone.",
    )
    end_grace_s: float = Field(
        2.0, ge=0, le=3600, title="End grace", description="Seconds the condition may lapse before an open event ends."
    )

    def target(self) -> str | None:
        return self.zone


def kind_of(model: type[RuleConfigBase]) -> str:
    """The ``kind`` a rule model is told apart by (its ``kind`` field's one value).

    Raises:
        TypeError: the model has no ``kind`` field with a default.
    """
    field = model.model_fields.get("kind")
    if field is None or not isinstance(field.default, str):
        raise TypeError(f"{model.__name__} has no `kind` field with the rule kind as its default")
    return field.default


def rule_config_union(models: Iterable[type[RuleConfigBase]]) -> Any:
    """The discriminated union (on ``kind``) of ``models``: the type of a camera's ``rules`` items."""
    members = tuple(models)
    return Annotated[Union[members], Field(discriminator="kind")]  # noqa: UP007 (a runtime tuple of types)


def class_ids(refs: Iterable[int | str], names: dict[int, str]) -> list[int]:
    """Resolve class names or ids to ids with the model's ``names`` (id to name); unknown ones are skipped."""
    by_name = {v: k for k, v in names.items()}
    out = []
    for ref in refs:
        cid = ref if isinstance(ref, int) else by_name.get(ref)
        if cid is not None and cid in names:
            out.append(int(cid))
    return out


C = TypeVar("C", bound=RuleConfigBase)


@dataclass(frozen=True)
class RuleContext:
    """What a rule's builder needs to know of its camera.

    Attributes:
        camera_id: the camera's id, put on every event.
        names: the model's class names (id to name).
        zones: the camera's zones by name, built for ``resolution_wh``.
        anchors: the box point (``"bottom_center"``, ...) each zone's rules test, by zone name.
        lines: the camera's line sections by name (built by the line rule with its hysteresis).
        resolution_wh: frame size ``(width, height)`` in pixels.
        stream_key: which recording the frames come from (`event_id_for`); empty for a live camera.
        live: whether the camera is live (a webcam or URL: its frames can stop coming).
        state_dir: a folder the camera's rules may keep state in across restarts (a live camera's
            reference view), or None (memory only).
    """

    camera_id: str
    names: dict[int, str]
    resolution_wh: tuple[int, int]
    zones: Mapping[str, PolygonZone] = field(default_factory=dict)
    anchors: Mapping[str, str] = field(default_factory=dict)
    lines: Mapping[str, LineSection] = field(default_factory=dict)
    stream_key: str = ""
    live: bool = False
    state_dir: Path | None = None

    def rule_kwargs(self, cfg: RuleConfigBase) -> dict[str, Any]:
        """The keyword arguments every rule takes, from the fields every rule section has."""
        return {
            "name": cfg.display_name(),
            "camera_id": self.camera_id,
            "class_ids": class_ids(cfg.classes, self.names),
            "cooldown_s": cfg.cooldown_s,
            "time_windows": list(cfg.time_windows) or None,
            "class_names": self.names,
            "stream_key": self.stream_key,
        }

    def zone_rule_kwargs(self, cfg: ZoneRuleConfigBase, zone: PolygonZone | None = None) -> dict[str, Any]:
        """`rule_kwargs` and what every zone rule takes: its zone, anchor and debouncing.

        ``zone`` stands in for a section without ``zone`` (a fall rule's whole frame).

        Raises:
            InvalidInputError: the section names no zone and no ``zone`` is given.
        """
        if zone is None:
            if cfg.zone is None:
                raise InvalidInputError(f"a {cfg.kind} rule needs `zone`")
            zone = self.zones[cfg.zone]
        return {
            **self.rule_kwargs(cfg),
            "zone": zone,
            "anchor": self.anchors.get(cfg.zone, "bottom_center") if cfg.zone is not None else "bottom_center",
            "inertia": cfg.inertia,
            "max_gap_s": cfg.max_gap_s,
            "end_grace_s": cfg.end_grace_s,
        }


@dataclass(frozen=True)
class RuleEntry(Generic[C]):
    """One rule kind: everything the app derives its lists of kinds from.

    Attributes:
        config: the section's pydantic model (`campusguard.app.config.rules`); its ``kind``
            field's value is the kind.
        rule_type: the rule class (its ``kind`` attribute equals the kind).
        build: ``build(section, context) -> Rule``: the rule a section configures.
        label: the kind for people (``"Fire lane"``): console filters, titles.
        has_end: whether its incidents last (an ``end`` phase follows ``start``); ``False`` for
            instantaneous ones (a line crossing starts and ends at once).
        needs_pixels: the rule reads the frames' pixels, which the stored tracks do not hold
            (`campusguard replay` leaves it out and says so).
        example: a small valid section of the kind (a camera's ``rules`` item), watching the zone
            named ``zone`` or the line named ``line`` (the shapes' default names); ``None``: the
            kind and its target only (`example_section`). Tests and docs build every kind from it.
        order: where the kind is listed (`campusguard.plugins.discover`: lower first; a kind with
            none comes after those with one, by module name).
        section: the camera section that configures the kind, on by default for every camera
            (``"health"`` for ``camera_health``), instead of an item of the camera's ``rules``;
            None for the kinds written as ``rules`` items.

    The registry finds every entry declared at the top level of a module of `campusguard.app.rules`,
    so a new kind is its module (and its test), nothing else.
    """

    config: type[C]
    rule_type: type
    build: Callable[[C, RuleContext], Rule]
    label: str
    has_end: bool = True
    needs_pixels: bool = False
    example: Mapping[str, Any] | None = None
    order: int | None = None
    section: str | None = None

    def __post_init__(self) -> None:
        kind = kind_of(self.config)
        if getattr(self.rule_type, "kind", None) != kind:
            raise TypeError(f"{self.rule_type.__name__}.kind must be {kind!r}, as {self.config.__name__} says")
        if not self.label:
            raise TypeError(f"the {kind!r} rule needs a label")

    @property
    def kind(self) -> str:
        """The kind, as the config's ``kind`` spells it."""
        return kind_of(self.config)

    def example_section(self) -> dict[str, Any]:
        """`example` with its ``kind``, else the kind watching the zone ``zone`` or the line ``line``."""
        if self.example is not None:
            return {"kind": self.kind, **self.example}
        if self.config.watches_line:
            return {"kind": self.kind, "line": "line"}
        if issubclass(self.config, ZoneRuleConfigBase):
            return {"kind": self.kind, "zone": "zone"}
        return {"kind": self.kind}
