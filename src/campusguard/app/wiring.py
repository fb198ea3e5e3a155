"""Builds the kit objects of one camera from its config: zones, lines, tracker and rules.

Kept apart from the workers so the mapping from YAML fields to constructor arguments is in
one place; everything here is pure construction (no threads, no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from campusguard.app.config import (
    CameraConfig,
    CrowdRuleConfig,
    FallRuleConfig,
    FireLaneRuleConfig,
    IntrusionRuleConfig,
    LineConfig,
    LineCrossingRuleConfig,
    LoadedConfig,
    RuleConfig,
    TrackerConfig,
    class_ids,
)
from campusguard.app.pipeline import CameraGeometry
from campusguard.app.rules import (
    CrowdRule,
    FallRule,
    FireLaneRule,
    IntrusionRule,
    LineCrossingRule,
    LoiteringRule,
    Rule,
    RuleEngine,
    whole_frame_zone,
)
from campusguard.errors import InvalidInputError
from campusguard.tracking import ByteTrackTracker
from campusguard.zones import LineZone, PolygonZone

__all__ = ["CameraParts", "build_camera", "build_tracker"]


@dataclass
class CameraParts:
    """What one camera's analytics worker needs."""

    tracker: ByteTrackTracker
    rules: RuleEngine
    geometry: CameraGeometry


def build_tracker(cfg: TrackerConfig, fps: float) -> ByteTrackTracker:
    """A ByteTrack tracker for one camera of nominal ``fps`` frames per second."""
    return ByteTrackTracker(
        frame_rate=fps,
        lost_track_s=cfg.lost_track_s,
        track_activation_threshold=cfg.track_activation_threshold,
        high_conf_threshold=cfg.high_conf_threshold,
        min_iou=cfg.min_iou,
        min_consecutive_frames=cfg.min_consecutive_frames,
    )


def _end_points(line: LineZone) -> np.ndarray:
    """``(2, 2) float32`` end points of a line, pixels."""
    return np.stack([line.start_xy, line.end_xy]).astype(np.float32)


def _build_rule(
    rule: RuleConfig,
    camera_id: str,
    names: dict[int, str],
    zones: dict[str, PolygonZone],
    anchors: Mapping[str, str],
    lines: dict[str, LineConfig],
    resolution_wh: tuple[int, int],
    stream_key: str = "",
) -> Rule:
    """The rule a rule section configures; zone and line names were checked when the file was parsed."""
    common: dict[str, Any] = {
        "name": rule.display_name(),
        "camera_id": camera_id,
        "class_ids": class_ids(rule.classes, names),
        "cooldown_s": rule.cooldown_s,
        "time_windows": list(rule.time_windows) or None,
        "class_names": names,
        "stream_key": stream_key,
    }
    if isinstance(rule, LineCrossingRuleConfig):
        line = lines[rule.line].build(resolution_wh, hysteresis_px=rule.hysteresis_px)
        return LineCrossingRule(line=line, direction=rule.direction, **common)
    zone_kw = {  # only a fall rule may have no zone (checked when the file was parsed): the whole frame
        **common,
        "zone": zones[rule.zone] if rule.zone is not None else whole_frame_zone(resolution_wh),
        "anchor": anchors.get(rule.zone, "bottom_center") if rule.zone is not None else "bottom_center",
        "inertia": rule.inertia,
        "max_gap_s": rule.max_gap_s,
        "end_grace_s": rule.end_grace_s,
    }
    if isinstance(rule, FallRuleConfig):
        return FallRule(
            min_seconds=rule.min_duration_s,
            signal=rule.signal,
            down_aspect=rule.down_aspect,
            upright_aspect=rule.upright_aspect,
            max_movement=rule.max_movement,
            stationary_window_s=rule.stationary_window_s,
            duplicate_overlap=rule.duplicate_overlap,
            **zone_kw,
        )
    zone_kw["min_seconds"] = rule.min_seconds
    if isinstance(rule, CrowdRuleConfig):
        return CrowdRule(min_count=rule.min_count, **zone_kw)
    if isinstance(rule, FireLaneRuleConfig):
        return FireLaneRule(
            max_movement=rule.max_movement,
            max_movement_px=rule.max_movement_px,
            stationary_window_s=rule.stationary_window_s,
            per_track=rule.per_track,
            **zone_kw,
        )
    if isinstance(rule, IntrusionRuleConfig):
        return IntrusionRule(per_track=rule.per_track, **zone_kw)
    return LoiteringRule(**zone_kw)


def build_camera(
    loaded: LoadedConfig,
    camera_index: int,
    names: dict[int, str],
    resolution_wh: tuple[int, int],
    fps: float,
    stream_key: str = "",
) -> CameraParts:
    """Zones, lines, tracker and rules of camera ``camera_index`` for frames of ``resolution_wh``.

    ``stream_key`` goes into the rules' event ids (`campusguard.app.events.types.event_id_for`):
    which recording the frames come from (`campusguard scan`); empty for a live camera.

    Raises:
        ConfigError: a zone or line leaves the frame, or a rule names a class the model does not
            know; the message names the line of the config file.
    """
    cam: CameraConfig = loaded.config.cameras[camera_index]
    loaded.check_frame_size(camera_index, resolution_wh)
    loaded.check_class_names(camera_index, names)
    zones: dict[str, PolygonZone] = {z.name: z.build(resolution_wh) for z in cam.zones}  # they fit: checked above
    anchors = {z.name: z.anchor for z in cam.zones}  # the box point each zone's rules test
    lines = {ln.name: ln for ln in cam.lines}
    rules: list[Rule] = []
    for ri, rule in enumerate(cam.rules):
        try:
            rules.append(_build_rule(rule, cam.id, names, zones, anchors, lines, resolution_wh, stream_key))
        except InvalidInputError as exc:
            raise loaded.error(("cameras", camera_index, "rules", ri), str(exc)) from None
    geometry = CameraGeometry(
        resolution_wh=resolution_wh,
        zones=[(name, z.polygon_xy.astype(np.float32)) for name, z in zones.items()],
        lines=[(ln.name, _end_points(ln.build(resolution_wh))) for ln in cam.lines],
    )
    return CameraParts(build_tracker(loaded.config.tracker, fps), RuleEngine(cam.id, rules), geometry)
