"""Rule sections of a camera, one model per rule kind, told apart by ``kind``.

The names end in ``Config`` (`IntrusionRuleConfig`), the rules they configure live in
`campusguard.app.rules` (`IntrusionRule`). `RULE_CONFIGS` lists the models; the `RuleConfig`
union and `RULE_KINDS` are derived from it. The rule registry (`campusguard.app.rules.registry`)
pairs each model with its rule, label and builder and checks, when it is imported, that its
models are exactly `RULE_CONFIGS`: a config package stays schema-only (it imports no rule), so
this tuple is the one list the registry cannot make for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = [
    "RULE_CONFIGS",
    "RULE_KINDS",
    "ClassRef",
    "CrowdRuleConfig",
    "FireLaneRuleConfig",
    "IntrusionRuleConfig",
    "FallRuleConfig",
    "LineCrossingRuleConfig",
    "LoiteringRuleConfig",
    "RuleConfig",
    "RuleConfigBase",
    "ZoneRuleConfigBase",
    "class_ids",
    "kind_of",
    "rule_config_union",
]

_WINDOW = r"^([01]?\d|2[0-3]):[0-5]\d-(([01]?\d|2[0-3]):[0-5]\d|24:00)$"

ClassRef = Annotated[int | str, Field(description="A class name (as the model names it) or a class id.")]


def _person() -> list[ClassRef]:
    return ["person"]


def _vehicles() -> list[ClassRef]:
    return ["car", "truck", "bus", "motorcycle"]


class RuleConfigBase(ConfigModel):
    """What every rule has: a name, the classes it watches, a cooldown, time windows and a checklist (`sop`).

    Each concrete model adds ``kind: Literal["<kind>"]`` with that kind as its default.
    """

    if TYPE_CHECKING:  # declared by every concrete model as a one-value Literal field
        kind: str

    name: str | None = Field(
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

    zone: str | None = Field(
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


class IntrusionRuleConfig(ZoneRuleConfigBase):
    """An object of the given classes inside a restricted zone."""

    kind: Literal["intrusion"] = Field("intrusion", title="Kind", description="Rule kind.")
    min_seconds: float = Field(
        0.0,
        ge=0,
        le=86400,
        title="Minimum seconds",
        description="Seconds an object must stay inside before the event starts.",
    )
    per_track: bool = Field(
        True, title="Per track", description="One event per intruding object (true) or one per zone episode (false)."
    )


class CrowdRuleConfig(ZoneRuleConfigBase):
    """At least N objects inside a zone for at least T seconds."""

    kind: Literal["crowd"] = Field("crowd", title="Kind", description="Rule kind.")
    min_count: int = Field(5, ge=1, le=10000, title="Minimum count", description="Objects needed in the zone at once.")
    min_seconds: float = Field(
        5.0, ge=0, le=86400, title="Minimum seconds", description="Seconds the count must hold before the event starts."
    )


class FireLaneRuleConfig(ZoneRuleConfigBase):
    """An object stationary inside the fire lane for at least T seconds."""

    kind: Literal["fire_lane"] = Field("fire_lane", title="Kind", description="Rule kind.")
    classes: list[ClassRef] = Field(
        default_factory=_vehicles,
        title="Classes",
        description="Classes the rule applies to, by name or id.",
        min_length=1,
        max_length=100,
    )
    min_seconds: float = Field(
        10.0, ge=0, le=86400, title="Minimum seconds", description="Seconds an object must stand still in the lane."
    )
    max_movement: float = Field(
        0.02,
        ge=0,
        le=1,
        title="Stationary movement",
        description="Stationary means the anchor moved less than this fraction of the frame width over `stationary_window_s`.",
    )
    max_movement_px: float | None = Field(
        None,
        ge=0,
        le=10000,
        title="Stationary movement (pixels)",
        description="The same threshold in pixels; overrides `max_movement`.",
    )
    stationary_window_s: float = Field(
        1.0, gt=0, le=600, title="Stationary window", description="Seconds over which movement is measured."
    )
    per_track: bool = Field(
        True, title="Per track", description="One event per stopped vehicle (true) or one per zone episode (false)."
    )


class LoiteringRuleConfig(ZoneRuleConfigBase):
    """One tracked object inside a zone for at least T seconds."""

    kind: Literal["loitering"] = Field("loitering", title="Kind", description="Rule kind.")
    min_seconds: float = Field(
        20.0, ge=0, le=86400, title="Minimum seconds", description="Seconds one tracked object must stay in the zone."
    )


class LineCrossingRuleConfig(RuleConfigBase):
    """A tracked object crossing a line in a given direction; counts kept per direction."""

    kind: Literal["line_crossing"] = Field("line_crossing", title="Kind", description="Rule kind.")
    line: str = Field("line", title="Line", description="Name of the line (a line of the same camera).")
    direction: Literal["in", "out", "both"] = Field(
        "in", title="Direction", description="Crossing direction that raises an event."
    )
    hysteresis_px: float = Field(
        0.0,
        ge=0,
        le=1000,
        title="Hysteresis",
        description="Anchors closer than this many pixels to the line keep their previous side (debounces jitter).",
    )

    def target(self) -> str | None:
        return self.line


class FallRuleConfig(ZoneRuleConfigBase):
    """A person down (fallen) for at least T seconds, in a zone or anywhere: a medical incident."""

    kind: Literal["fall"] = Field("fall", title="Kind", description="Rule kind.")
    zone_optional: ClassVar[bool] = True
    zone: str | None = Field(
        None, title="Zone", description="Name of the zone the rule watches; none watches the whole frame."
    )
    min_duration_s: float = Field(
        3.0, ge=0, le=3600, title="Minimum duration", description="Seconds a person must be down before the event starts."
    )
    signal: Literal["auto", "detector-class", "track-shape"] = Field(
        "auto",
        title="Signal",
        description="What says a person is down: the detector's fallen class (`detector-class`, e.g. model "
        "fall-yolov8s), the track's shape over time (`track-shape`: upright before, then a box much wider "
        "than tall, not moving), or `auto`: the detector's class where the model has one, else the shape.",
    )
    down_aspect: float = Field(
        1.2, gt=0, le=20, title="Down aspect", description="track-shape: box width / height at or above which a person is down."
    )
    upright_aspect: float = Field(
        1.5,
        gt=0,
        le=20,
        title="Upright aspect",
        description="track-shape: box height / width at or above which a person is upright (needed before a fall).",
    )
    max_movement: float = Field(
        0.02,
        ge=0,
        le=1,
        title="Stationary movement",
        description="track-shape: not moving means the anchor moved less than this fraction of the frame width over `stationary_window_s`.",
    )
    stationary_window_s: float = Field(
        1.0, gt=0, le=600, title="Stationary window", description="track-shape: seconds over which movement is measured."
    )
    duplicate_overlap: float = Field(
        0.5,
        gt=0,
        le=1,
        title="Duplicate overlap",
        description="A down person's track whose box lies at least this share of its area on the box of a person "
        "down for longer is that same person (two boxes on one body): it raises no incident of its own.",
    )


RULE_CONFIGS: tuple[type[RuleConfigBase], ...] = (
    IntrusionRuleConfig,
    CrowdRuleConfig,
    FireLaneRuleConfig,
    LoiteringRuleConfig,
    LineCrossingRuleConfig,
    FallRuleConfig,
)
"""The model of each rule kind, in the order the kinds are listed (schema, messages, console)."""


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


RULE_KINDS: tuple[str, ...] = tuple(kind_of(m) for m in RULE_CONFIGS)
"""Every rule kind, as ``kind`` spells it in the config, in `RULE_CONFIGS` order."""

if TYPE_CHECKING:
    RuleConfig = RuleConfigBase
else:
    RuleConfig = rule_config_union(RULE_CONFIGS)
"""One rule section: the `RULE_CONFIGS` model its ``kind`` names (statically, a `RuleConfigBase`)."""


def class_ids(refs: Iterable[int | str], names: dict[int, str]) -> list[int]:
    """Resolve class names or ids to ids with the model's ``names`` (id to name); unknown ones are skipped."""
    by_name = {v: k for k, v in names.items()}
    out = []
    for ref in refs:
        cid = ref if isinstance(ref, int) else by_name.get(ref)
        if cid is not None and cid in names:
            out.append(int(cid))
    return out
