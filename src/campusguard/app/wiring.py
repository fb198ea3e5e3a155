"""Builds the kit objects of one camera from its config: zones, lines, tracker and rules.

Kept apart from the workers so the mapping from YAML fields to constructor arguments is in
one place; everything here is pure construction (no threads, no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from campusguard.app.config import (
    CameraConfig,
    CrowdRule,
    FallRuleConfig,
    FireLaneRule,
    IntrusionRule,
    LineCrossingRule,
    LoadedConfig,
    LoiteringRule,
    TrackerConfig,
    class_ids,
)
from campusguard.app.pipeline import CameraGeometry
from campusguard.app.rules import RULE_TYPES, RuleEngine, whole_frame_zone
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


def build_camera(
    loaded: LoadedConfig,
    camera_index: int,
    names: dict[int, str],
    resolution_wh: tuple[int, int],
    fps: float,
) -> CameraParts:
    """Zones, lines, tracker and rules of camera ``camera_index`` for frames of ``resolution_wh``.

    Raises:
        ConfigError: a zone or line leaves the frame, or a rule names a class the model does not
            know; the message names the line of the config file.
    """
    cam: CameraConfig = loaded.config.cameras[camera_index]
    loaded.check_frame_size(camera_index, resolution_wh)
    loaded.check_class_names(camera_index, names)
    zones: dict[str, PolygonZone] = {}
    for zi, z in enumerate(cam.zones):
        try:
            zones[z.name] = PolygonZone(
                z.polygon, z.name, resolution_wh=resolution_wh, units="px" if z.units == "pixels" else "fraction"
            )
        except InvalidInputError as exc:
            raise loaded.error(("cameras", camera_index, "zones", zi, "polygon"), str(exc)) from None
    line_cfgs = {ln.name: ln for ln in cam.lines}
    rules = []
    for ri, rule in enumerate(cam.rules):
        common = {
            "name": rule.display_name(),
            "camera_id": cam.id,
            "class_ids": class_ids(rule.classes, names),
            "cooldown_s": rule.cooldown_s,
            "time_windows": list(rule.time_windows) or None,
            "class_names": names,
        }
        try:
            if isinstance(rule, LineCrossingRule):
                ln = line_cfgs[rule.line]
                line = LineZone(
                    ln.points[0],
                    ln.points[1],
                    ln.name,
                    in_side=ln.in_side,
                    resolution_wh=resolution_wh,
                    units="px" if ln.units == "pixels" else "fraction",
                    hysteresis_px=rule.hysteresis_px,
                )
                rules.append(RULE_TYPES["line_crossing"](line=line, direction=rule.direction, **common))
                continue
            zone_kw = {  # only a fall rule may have no zone (checked when the config was parsed): the whole frame
                **common,
                "zone": zones[rule.zone] if rule.zone is not None else whole_frame_zone(resolution_wh),
                "inertia": rule.inertia,
                "max_gap_s": rule.max_gap_s,
                "end_grace_s": rule.end_grace_s,
            }
            if isinstance(rule, CrowdRule):
                rules.append(RULE_TYPES["crowd"](min_count=rule.min_count, min_seconds=rule.min_seconds, **zone_kw))
            elif isinstance(rule, FireLaneRule):
                rules.append(
                    RULE_TYPES["fire_lane"](
                        min_seconds=rule.min_seconds,
                        max_movement=rule.max_movement,
                        max_movement_px=rule.max_movement_px,
                        stationary_window_s=rule.stationary_window_s,
                        per_track=rule.per_track,
                        **zone_kw,
                    )
                )
            elif isinstance(rule, IntrusionRule):
                rules.append(RULE_TYPES["intrusion"](min_seconds=rule.min_seconds, per_track=rule.per_track, **zone_kw))
            elif isinstance(rule, LoiteringRule):
                rules.append(RULE_TYPES["loitering"](min_seconds=rule.min_seconds, **zone_kw))
            elif isinstance(rule, FallRuleConfig):
                rules.append(
                    RULE_TYPES["fall"](
                        min_seconds=rule.min_duration_s,
                        signal=rule.signal,
                        down_aspect=rule.down_aspect,
                        upright_aspect=rule.upright_aspect,
                        max_movement=rule.max_movement,
                        stationary_window_s=rule.stationary_window_s,
                        **zone_kw,
                    )
                )
        except InvalidInputError as exc:
            raise loaded.error(("cameras", camera_index, "rules", ri), str(exc)) from None
    geometry = CameraGeometry(
        resolution_wh=resolution_wh,
        zones=[(name, z.polygon_xy.astype(np.float32)) for name, z in zones.items()],
        lines=[(ln.name, np.asarray(ln.points_px(resolution_wh), np.float32)) for ln in cam.lines],
    )
    return CameraParts(build_tracker(loaded.config.tracker, fps), RuleEngine(cam.id, rules), geometry)
