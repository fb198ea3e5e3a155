"""What a rule module declares next to its class: a `RuleEntry` (kind, config model, builder,
label, end phase), and the `RuleContext` its builder gets from the camera.

Kept apart from `campusguard.app.rules.registry` so that the rule modules can declare their
entries without importing the registry that collects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from campusguard.app.config.rules import RuleConfigBase, ZoneRuleConfigBase, class_ids, kind_of
from campusguard.app.config.zones import LineConfig
from campusguard.app.rules.base import Rule
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

__all__ = ["RuleContext", "RuleEntry"]

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
    """

    camera_id: str
    names: dict[int, str]
    resolution_wh: tuple[int, int]
    zones: Mapping[str, PolygonZone] = field(default_factory=dict)
    anchors: Mapping[str, str] = field(default_factory=dict)
    lines: Mapping[str, LineConfig] = field(default_factory=dict)
    stream_key: str = ""

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
    """

    config: type[C]
    rule_type: type
    build: Callable[[C, RuleContext], Rule]
    label: str
    has_end: bool = True

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
