"""Incident rules: per-camera stateful objects turning tracked `Detections` into `Event` updates.

Public API (all keyword arguments; see each class):
    `IntrusionRule(name, camera_id, zone, class_ids=(0,), min_seconds=0, time_windows=None, ...)`
    `CrowdRule(name, camera_id, zone, min_count, min_seconds, class_ids=(0,), ...)`
    `FireLaneRule(name, camera_id, zone, min_seconds, class_ids=VEHICLE_CLASS_IDS,
        max_movement=0.02 (fraction of frame width), stationary_window_s=1.0, ...)`
    `LoiteringRule(name, camera_id, zone, min_seconds, class_ids=(0,), ...)`
    `LineCrossingRule(name, camera_id, line, direction="in", class_ids=(0,), cooldown_s=0, ...)`
    Shared zone-rule knobs: ``inertia`` (frames, 3), ``max_gap_s`` (1.0), ``end_grace_s`` (2.0),
    ``cooldown_s`` (0, after the end), ``time_windows``, ``class_names``, ``anchor``
    ("bottom_center"), ``stitch_radius`` (0.5 box heights; id-switch stitching),
    ``update_interval_s`` (2.0), ``max_ids_per_event`` (100); intrusion and fire_lane also
    ``per_track`` (True: one event per object, as the synthetic ground truth counts them).
    `FallRule(name, camera_id, zone, min_seconds, signal="auto", down_aspect=1.2,
        upright_aspect=1.5, max_movement=0.02, stationary_window_s=1.0, ...)`: a person down
        (detector class, or track shape) for ``min_seconds``; ``whole_frame_zone`` for anywhere.
    `RuleEngine(camera_id, rules)`: ``update(timestamp_s, detections, frame_index, wall_time=None)
        -> list[Event]``, ``open_events()``, ``close(timestamp_s) -> list[Event]``.
    `RULES` (`registry`): the rule registry, one `RuleEntry` per kind (section model, rule
        class, builder, label, end phase); every list of kinds in the app is derived from it.
        ``RULES.build(section, RuleContext(...))`` builds a rule from its config section; an
        unknown kind raises `UnknownRuleKindError`.
    `RULE_TYPES`: ``{kind: class}``, derived from `RULES`.
    `Rule`: the protocol (``name``, ``kind``, ``camera_id``, ``update``, ``open_events``, ``close``).
    `RowsRule` (`base`): a rule that looks only at some rows of a frame (the zone and line rules):
        ``update`` is ``update_rows(take_rows(rows_of_interest(frame)))`` on `TrackRows` (Python lists
        of a frame's rows), so `campusguard replay` takes a recorded segment's rows at once and feeds
        each frame's slice to the same code.

Every rule is fed once per processed frame, in time order, with the frame's timestamp in
seconds (stream clock: never ``time.time()``), the tracked detections (rows with
``tracker_id < 0`` are ignored), the frame index, and optionally the wall-clock datetime (needed
for ``time_windows``). Zones are tested on each box's bottom-centre.
"""

from campusguard.app.rules.base import Rule, TimeWindow, parse_time_windows
from campusguard.app.rules.engine import RuleEngine
from campusguard.app.rules.fall import FallRule, whole_frame_zone
from campusguard.app.rules.line_rules import LineCrossingRule
from campusguard.app.rules.registry import RULES, RuleRegistry, UnknownRuleKindError
from campusguard.app.rules.spec import RuleContext, RuleEntry
from campusguard.app.rules.zone_rules import (
    VEHICLE_CLASS_IDS,
    CrowdRule,
    FireLaneRule,
    IntrusionRule,
    LoiteringRule,
)

RULE_TYPES: dict[str, type] = RULES.rule_types()

__all__ = [
    "Rule",
    "RuleEngine",
    "RULE_TYPES",
    "RULES",
    "RuleContext",
    "RuleEntry",
    "RuleRegistry",
    "UnknownRuleKindError",
    "IntrusionRule",
    "CrowdRule",
    "FireLaneRule",
    "LoiteringRule",
    "LineCrossingRule",
    "FallRule",
    "whole_frame_zone",
    "VEHICLE_CLASS_IDS",
    "TimeWindow",
    "parse_time_windows",
]
