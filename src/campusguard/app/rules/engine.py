"""`RuleEngine`: all rules of one camera, run together on each frame; `rule_fingerprint`: what a
rule's state depends on, so that a live edit keeps the state of the rules it did not change."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TypeGuard

import numpy as np

from campusguard.app.events.types import Event
from campusguard.app.rules.base import PictureRule, Rule
from campusguard.app.rules.shapes import ShapeSection
from campusguard.app.rules.spec import RuleConfigBase, ZoneRuleConfigBase
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError

__all__ = ["RuleEngine", "rule_fingerprint"]

log = logging.getLogger(__name__)


def _log_changes(events: list[Event]) -> list[Event]:
    """A DEBUG line for each incident state change (rare: starts, new objects or counts, ends)."""
    if events and log.isEnabledFor(logging.DEBUG):
        for ev in events:
            log.debug(
                "camera %s rule %s (%s): incident %s %s at %.2f s, tracks %s%s",
                ev.camera_id,
                ev.rule_name,
                ev.rule_kind,
                ev.event_id[:12],
                ev.phase,
                ev.end_s if ev.phase == "end" and ev.end_s is not None else ev.start_s,
                list(ev.tracker_ids),
                f", count {ev.count}" if ev.count is not None else "",
            )
    return events


_PICTURE_RULE_CLASSES: dict[type, bool] = {}
"""Whether a rule class is a `PictureRule`, worked out once per class: the protocol check inspects every
member of the protocol (about 20 us of CPU a rule), and `RuleEngine.observe` asks it of every rule on every frame."""


def is_picture_rule(rule: Rule) -> TypeGuard[PictureRule]:
    """Whether ``rule`` watches the picture (`PictureRule`), answered once per rule class."""
    kind = type(rule)
    known = _PICTURE_RULE_CLASSES.get(kind)
    if known is None:
        known = _PICTURE_RULE_CLASSES[kind] = isinstance(rule, PictureRule)
    return known


def rule_fingerprint(
    rule: RuleConfigBase,
    zones: Sequence[ShapeSection],
    lines: Sequence[ShapeSection],
    *,
    names: Mapping[int, str],
    resolution_wh: tuple[int, int],
    stream_key: str = "",
) -> str:
    """Everything a rule built from ``rule`` depends on, as one string: its section, the zone or line
    it watches (not the camera's other shapes), the model's class names, the frame size and the
    stream. Two equal fingerprints build the same rule, so a live edit may keep the running one.
    """
    target = rule.target()
    shapes: Sequence[ShapeSection] = zones if isinstance(rule, ZoneRuleConfigBase) else lines
    watched = [s.model_dump(mode="json") for s in shapes if target is not None and s.name == target]
    return json.dumps(
        {
            "rule": {
                **rule.model_dump(mode="json"),
                "name": rule.display_name(),
            },  # a generated name written out is the same rule
            "watches": watched,
            "names": {str(k): v for k, v in sorted(names.items())},
            "resolution_wh": list(resolution_wh),
            "stream_key": stream_key,
        },
        sort_keys=True,
    )


class RuleEngine:
    """The rules of one camera.

    Args:
        camera_id: the camera; every rule must belong to it.
        rules: rule objects (names unique within the camera).
        keys: one `rule_fingerprint` per rule (same order), or ``None``: what `carry_over`
            matches on; rules without keys are never carried over.

    Raises:
        InvalidInputError: a rule of another camera, two rules with one name, or ``keys`` not
            one per rule.
    """

    def __init__(self, camera_id: str, rules: Sequence[Rule], keys: Sequence[str] | None = None) -> None:
        names = [r.name for r in rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidInputError(f"camera {camera_id!r}: rule names must be unique, repeated: {', '.join(dupes)}")
        for r in rules:
            if r.camera_id != camera_id:
                raise InvalidInputError(f"rule {r.name!r} belongs to camera {r.camera_id!r}, not {camera_id!r}")
        if keys is not None and len(keys) != len(rules):
            raise InvalidInputError(f"camera {camera_id!r}: {len(keys)} rule keys for {len(rules)} rules")
        self.camera_id = camera_id
        self.rules = list(rules)
        self.keys: list[str | None] = list(keys) if keys is not None else [None] * len(self.rules)

    def carry_over(self, previous: RuleEngine) -> RuleEngine:
        """Take over ``previous``'s running rules whose key equals one of this engine's (same name,
        section, watched shape, classes, frame size): their state (timers, open incidents, tracks in
        their zone) goes on, so an edit elsewhere does not split an ongoing incident.

        Returns:
            The rules of ``previous`` that were not taken over (changed or removed), for the
            caller to `close` (their open incidents end).
        """
        running = {key: rule for key, rule in zip(previous.keys, previous.rules, strict=True) if key is not None}
        kept: set[int] = set()
        for i, key in enumerate(self.keys):
            old = running.get(key) if key is not None else None
            if old is not None and old.name == self.rules[i].name:
                self.rules[i] = old
                kept.add(id(old))
        retired = [r for r in previous.rules if id(r) not in kept]
        return RuleEngine(previous.camera_id, retired)

    def adopt(self, running: RuleEngine) -> None:
        """Take over ``running``'s rules in place of this engine's rules of the same names, state and open
        incidents included (a camera offline at start: its health rule, running since the start, joins the
        rules built at its first frame)."""
        by_name = {r.name: r for r in running.rules}
        self.rules = [by_name.get(r.name, r) for r in self.rules]

    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Run every rule on one frame of tracked detections; the events in rule order."""
        out: list[Event] = []
        for rule in self.rules:
            out += rule.update(timestamp_s, detections, frame_index, wall_time)
        return _log_changes(out)

    def picture_rules(self) -> list[PictureRule]:
        """The rules that watch the picture itself (camera health)."""
        return [r for r in self.rules if is_picture_rule(r)]

    def observe(
        self, timestamp_s: float, frame_index: int, image: np.ndarray, wall_time: datetime | None = None
    ) -> list[Event]:
        """Hand one frame's picture to the rules that watch it; their events."""
        out: list[Event] = []
        for rule in self.picture_rules():
            out += rule.observe(timestamp_s, frame_index, image, wall_time)
        return _log_changes(out)

    def tick(self, now_s: float, wall_time: datetime | None = None) -> list[Event]:
        """Time passing without frames (a live camera's clock); the picture rules' events."""
        out: list[Event] = []
        for rule in self.picture_rules():
            out += rule.tick(now_s, wall_time)
        return _log_changes(out)

    def snapshot_image(self, event: Event, image: np.ndarray | None) -> np.ndarray | None:
        """The snapshot of ``event``: what its rule composes when it watches the picture, else ``image``."""
        for rule in self.picture_rules():
            if rule.name == event.rule_name:
                return rule.snapshot_image(event, image)
        return image

    def close_for_outage(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End the open events of the rules about objects (the camera gives no frames, so they cannot go
        on); the picture rules' incidents are about the outage itself and stay open."""
        out: list[Event] = []
        for rule in self.rules:
            if not is_picture_rule(rule):
                out += rule.close(timestamp_s, wall_time)
        return _log_changes(out)

    def open_events(self) -> list[Event]:
        """Every open event of this camera, latest state (for overlays)."""
        out: list[Event] = []
        for rule in self.rules:
            out += rule.open_events()
        return out

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End every open event; returns their ``end`` updates."""
        out: list[Event] = []
        for rule in self.rules:
            out += rule.close(timestamp_s, wall_time)
        return _log_changes(out)
