"""Builds the kit objects of one camera from its config: zones, lines, tracker and rules.

Kept apart from the workers so the mapping from YAML fields to constructor arguments is in
one place; everything here is pure construction (no threads, no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from campusguard.app.config import (
    CameraConfig,
    LineConfig,
    LoadedConfig,
    RuleConfig,
    TrackerConfig,
)
from campusguard.app.pipeline import CameraGeometry
from campusguard.app.rules import RULES, Rule, RuleContext, RuleEngine
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
    """The rule a rule section configures (`RULES` maps its kind to its builder); zone and line
    names were checked when the file was parsed.

    Raises:
        UnknownRuleKindError: a kind the rule registry does not have.
        InvalidInputError: the rule rejects a value.
    """
    ctx = RuleContext(
        camera_id=camera_id,
        names=names,
        resolution_wh=resolution_wh,
        zones=zones,
        anchors=anchors,
        lines=lines,
        stream_key=stream_key,
    )
    return RULES.build(rule, ctx)


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
