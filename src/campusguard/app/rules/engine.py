"""`RuleEngine`: all rules of one camera, run together on each frame."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from campusguard.app.events.types import Event
from campusguard.app.rules.base import Rule
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError

__all__ = ["RuleEngine"]

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


class RuleEngine:
    """The rules of one camera.

    Args:
        camera_id: the camera; every rule must belong to it.
        rules: rule objects (names unique within the camera).

    Raises:
        InvalidInputError: a rule of another camera, or two rules with one name.
    """

    def __init__(self, camera_id: str, rules: Sequence[Rule]) -> None:
        names = [r.name for r in rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise InvalidInputError(f"camera {camera_id!r}: rule names must be unique, repeated: {', '.join(dupes)}")
        for r in rules:
            if r.camera_id != camera_id:
                raise InvalidInputError(f"rule {r.name!r} belongs to camera {r.camera_id!r}, not {camera_id!r}")
        self.camera_id = camera_id
        self.rules = list(rules)

    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Run every rule on one frame of tracked detections; the events in rule order."""
        out: list[Event] = []
        for rule in self.rules:
            out += rule.update(timestamp_s, detections, frame_index, wall_time)
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
