"""The camera section: where frames come from, how they are read, and what is watched in them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, field_validator, model_validator

from campusguard.app.config.base import ConfigModel, Loc, validate_imgsz
from campusguard.app.config.motion import MotionConfig
from campusguard.app.config.privacy import PrivacyConfig
from campusguard.app.config.retention import CameraRetentionConfig
from campusguard.app.config.rules import RuleConfig, RuleConfigBase, ZoneRuleConfigBase
from campusguard.app.config.zones import LineConfig, ZoneConfig
from campusguard.app.rules.camera_health import CameraHealthConfig, effective_health
from campusguard.errors import InvalidInputError
from campusguard.ops.privacy import shapes_inside_polygons
from campusguard.zones import to_pixels

__all__ = ["CameraConfig", "ReconnectConfig", "source_kind"]

_URL = re.compile(r"^(rtsp|rtsps|rtmp|http|https|udp|tcp|srt)://", re.IGNORECASE)


def source_kind(source: int | str) -> Literal["webcam", "url", "path"]:
    """Classify a camera source without I/O: webcam index, stream URL, or local path (file or folder)."""
    if isinstance(source, int) or (isinstance(source, str) and source.isdigit()):
        return "webcam"
    if _URL.match(source):
        return "url"
    return "path"


class ReconnectConfig(ConfigModel):
    """Exponential back-off between attempts to (re)open a live source, at start and after a loss."""

    initial_s: float = Field(0.5, gt=0, le=60, title="First delay", description="Seconds before the first retry.")
    max_s: float = Field(
        10.0, gt=0, le=600, title="Longest delay", description="Upper bound of the delay between retries, seconds (so a camera that comes back is seen again within this long)."
    )
    factor: float = Field(
        2.0, ge=1, le=10, title="Factor", description="Each failed attempt multiplies the delay by this."
    )
    reset_after_s: float = Field(
        60.0,
        ge=0,
        le=86400,
        title="Reset after",
        description=(
            "The delay goes back to the first one only after a connection gave frames for this many seconds; "
            "a camera that opens and then fails at once keeps backing off."
        ),
    )


class CameraConfig(ConfigModel):
    """One camera: where frames come from, how they are read, and what is watched in them."""

    id: str = Field(
        "cam0",
        title="Camera id",
        description="Unique camera id; events carry it.",
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.-]+$",
    )
    source: int | str = Field(
        0, title="Source", description="Video file, image folder, webcam index, or rtsp/http(s) URL."
    )
    password_env: str | None = Field(
        None,
        title="Password variable",
        description="Environment variable holding the password of the source URL's user "
        "(`rtsp://cam@host/...`), instead of `user:password@` in the file.",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
    )
    password_file: str | None = Field(
        None,
        title="Password file",
        description="File whose first line is the password of the source URL's user (a mounted secret).",
        min_length=1,
    )
    enabled: bool = Field(True, title="Enabled", description="Skip this camera when false.")
    node: str | None = Field(
        None,
        title="Preferred node",
        description="With `serve --node`: the node that runs this camera while it is live (another takes over when "
        "it is not).",
        min_length=1,
        max_length=63,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    )
    fps_cap: float | None = Field(
        None,
        gt=0,
        le=240,
        title="Frame-rate cap",
        description="Process at most this many frames per second (others dropped); none for no cap.",
    )
    realtime: bool | None = Field(
        None,
        title="Real time",
        description="File sources: false processes every frame in order (deterministic, no drops); true paces them at the file's "
        "frame rate and drops the oldest when behind, like a live camera. Default: false for files and folders, true for live sources.",
    )
    loop: bool = Field(False, title="Loop", description="File sources: start again at the end (for soak tests).")
    folder_fps: float = Field(
        10.0,
        gt=0,
        le=240,
        title="Folder frame rate",
        description="Image folders: frames per second used for timestamps.",
    )
    resolution_wh: tuple[int, int] | None = Field(
        None,
        title="Resolution",
        description="Declared frame size [width, height] in pixels; zones are checked against it (else against the first frame).",
    )
    model: str | None = Field(
        None, title="Model", description="Model for this camera; none uses the detector section's model."
    )
    device: str | None = Field(
        None, title="Device", description="Device for this camera's model; none uses the detector section's device."
    )
    imgsz: int | tuple[int, int] | None = Field(
        None,
        title="Input size",
        description="Network input size (an int, or [height, width]) for this camera; none uses the detector section's.",
    )
    queue_size: int = Field(
        8,
        ge=1,
        le=1024,
        title="Queue size",
        description="Frames buffered between this reader and detection; the oldest is dropped when full (live sources).",
    )
    stall_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        title="Stall timeout",
        description="Seconds without a frame before the watchdog reconnects a live source.",
    )
    decode_threads: int = Field(
        0,
        ge=0,
        le=64,
        title="Decoder threads",
        description=(
            "FFmpeg's decoder threads for a video file or stream URL; 0 lets FFmpeg choose (one per core). 1 costs "
            "a little less CPU per frame (a box with many small streams); more keep a large stream in real time."
        ),
    )
    offline_end_s: float = Field(
        30.0,
        gt=0,
        le=86400,
        title="Offline end",
        description=(
            "Live sources: an incident still open when its camera has given no frame for this many seconds "
            "(offline, reconnecting) is ended, with details.interrupted."
        ),
    )
    motion: MotionConfig = Field(
        default_factory=MotionConfig,
        title="Motion gating",
        description="Detect only where something moves or is tracked, plus the whole frame every keyframe_s.",
    )
    reconnect: ReconnectConfig = Field(
        default_factory=ReconnectConfig, title="Reconnect", description="Back-off between reconnect attempts."
    )
    zones: list[ZoneConfig] = Field(
        default_factory=list, title="Zones", description="Polygon zones of this camera.", max_length=64
    )
    lines: list[LineConfig] = Field(
        default_factory=list, title="Lines", description="Counting lines of this camera.", max_length=64
    )
    rules: list[RuleConfig] = Field(
        default_factory=list, title="Rules", description="Incident rules evaluated on this camera.", max_length=128
    )
    privacy: PrivacyConfig = Field(
        default_factory=PrivacyConfig,
        title="Privacy",
        description="Masked areas (never analysed, stored or shown) and what viewers see blurred.",
    )
    retention: CameraRetentionConfig | None = Field(
        None,
        title="Retention",
        description="This camera's own incident and media durations, replacing the global retention section's.",
    )
    health: CameraHealthConfig | None = Field(
        None,
        title="Health",
        description="This camera's camera-health settings: the fields named here replace the site-wide `health` "
        "section's (`enabled: false` turns camera health off for this camera).",
    )
    _health: CameraHealthConfig = PrivateAttr(default_factory=CameraHealthConfig)

    def resolve_health(self, site: CameraHealthConfig) -> None:
        """Settle this camera's health settings over the site-wide ones (`WatchConfig` does, once loaded)."""
        self._health = effective_health(site, self.health)

    @property
    def effective_health(self) -> CameraHealthConfig:
        """This camera's health settings: the site-wide section with the camera's own fields over it."""
        return self._health

    def incident_rules(self) -> list[RuleConfigBase]:
        """Every rule section that raises this camera's incidents: its ``rules`` and, unless turned
        off, its camera health (what wiring builds, escalation and checklists read)."""
        rules: list[RuleConfigBase] = list(self.rules)
        if self._health.enabled:
            rules.append(self._health)
        return rules

    @field_validator("resolution_wh")
    @classmethod
    def _positive(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and (value[0] < 1 or value[1] < 1 or value[0] > 16384 or value[1] > 16384):
            raise ValueError("resolution must be two positive integers [width, height] up to 16384")
        return value

    @field_validator("imgsz")
    @classmethod
    def _imgsz(cls, value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
        return validate_imgsz(value)

    @model_validator(mode="after")
    def _password_for_a_url(self) -> CameraConfig:
        if (self.password_env or self.password_file) and source_kind(self.source) != "url":
            raise ValueError("`password_env` and `password_file` need a stream URL as `source`")
        if self.password_env and self.password_file:
            raise ValueError("give the camera password one way: `password_env` or `password_file`")
        return self

    def is_live(self) -> bool:
        """Whether frames are paced by the outside world (webcam, URL) rather than read as fast as wanted."""
        return source_kind(self.source) != "path"

    def is_realtime(self) -> bool:
        """Whether this camera drops frames when behind (live sources, or files with ``realtime: true``)."""
        return self.is_live() if self.realtime is None else self.realtime

    def is_motion_gated(self) -> bool:
        """Whether this camera's frames go through a motion gate (``motion.enabled``; default: live sources)."""
        return self.is_live() if self.motion.enabled is None else self.motion.enabled

    def reference_errors(self) -> list[tuple[Loc, str]]:
        """What the field validators cannot see: unique zone, line and rule names, rules naming
        zones and lines of this camera, shapes inside the declared resolution. Locations are
        relative to the camera."""
        errors: list[tuple[Loc, str]] = []
        zone_names = [z.name for z in self.zones]
        line_names = [ln.name for ln in self.lines]
        for key, names in (("zones", zone_names), ("lines", line_names)):
            for i, name in enumerate(names):
                if name in names[:i]:
                    errors.append(((key, i, "name"), f"name {name!r} is used twice in camera {self.id!r}"))
        if self.resolution_wh is not None:
            errors.extend(self.frame_errors(self.resolution_wh, "the declared resolution"))
        else:
            errors.extend(self.privacy_errors(None))
        rule_names = [r.display_name() for r in self.rules]
        for ri, rule in enumerate(self.rules):
            if rule_names[ri] in rule_names[:ri]:
                errors.append(
                    (("rules", ri), f"rule name {rule_names[ri]!r} is used twice in camera {self.id!r}; give `name`")
                )
            if rule.watches_line:
                line = rule.target()
                if line not in line_names:
                    errors.append(
                        (
                            ("rules", ri, "line"),
                            f"rule names unknown line {line!r}; camera {self.id!r} has lines {line_names}",
                        )
                    )
            elif not isinstance(rule, ZoneRuleConfigBase):
                continue
            elif rule.zone is None:
                if not rule.zone_optional:  # e.g. a fall rule may watch the whole frame
                    errors.append((("rules", ri), f"a {rule.kind} rule needs `zone`"))
            elif rule.zone not in zone_names:
                errors.append(
                    (
                        ("rules", ri, "zone"),
                        f"rule names unknown zone {rule.zone!r}; camera {self.id!r} has zones {zone_names}",
                    )
                )
        return errors

    def frame_errors(self, resolution_wh: tuple[int, int], what: str) -> list[tuple[Loc, str]]:
        """Zones and lines that do not fit a frame of ``resolution_wh`` (``what`` says whose frame)."""
        errors = [
            e for i, z in enumerate(self.zones) for e in _misfit(z.build, resolution_wh, ("zones", i, "polygon"), what)
        ]
        errors += [
            e for i, ln in enumerate(self.lines) for e in _misfit(ln.build, resolution_wh, ("lines", i, "points"), what)
        ]
        return errors + [(loc, f"{msg} ({what})") for loc, msg in self.privacy_errors(resolution_wh)]

    def privacy_errors(self, resolution_wh: tuple[int, int] | None) -> list[tuple[Loc, str]]:
        """Zones and lines lying inside a privacy mask: they would never see anything.

        Without a frame size (``None``) only shapes in the same units as the mask are compared.
        """
        errors: list[tuple[Loc, str]] = []
        shapes = [
            (("zones", i, "polygon"), f"zone {z.name!r}", z.polygon, z.units, True) for i, z in enumerate(self.zones)
        ]
        shapes += [
            (("lines", i, "points"), f"line {ln.name!r}", ln.points, ln.units, False) for i, ln in enumerate(self.lines)
        ]
        masks = self.privacy.masks
        if not masks:
            return errors
        # one batch per units compared (without a frame size: only shapes in the mask's own units)
        groups = [(None, resolution_wh)] if resolution_wh is not None else [("pixels", None), ("fraction", None)]
        found: dict[int, int] = {}  # shape -> first mask it lies inside
        for only, wh in groups:
            frame = wh or (1, 1)  # same units: compared as they are
            chosen_masks, polygons = [], []
            for k, mask in enumerate(masks):
                if only is None or mask.units == only:
                    try:
                        polygons.append(to_pixels(np.asarray(mask.polygon, float), frame, mask.units, "privacy mask"))
                    except InvalidInputError:
                        continue
                    chosen_masks.append(k)
            chosen_shapes, placed = [], []
            for n, (_, what, points, units, closed) in enumerate(shapes):
                if only is not None and units != only:
                    continue
                try:
                    placed.append((to_pixels(np.asarray(points, float), frame, units, what), closed))
                except InvalidInputError:
                    continue  # a shape that cannot be placed is reported by its own check
                chosen_shapes.append(n)
            for n, inside in zip(chosen_shapes, shapes_inside_polygons(placed, polygons), strict=True):
                if inside is not None:
                    found[n] = chosen_masks[inside]
        for n, (loc, what, *_rest) in enumerate(shapes):
            if n in found:
                errors.append(
                    (
                        loc,
                        f"{what} lies inside privacy mask {masks[found[n]].name!r}, so it would never see anything; move it or the mask",
                    )
                )
        return errors


def _misfit(
    build: Callable[[tuple[int, int]], object], resolution_wh: tuple[int, int], loc: Loc, what: str
) -> list[tuple[Loc, str]]:
    """``[(loc, message)]`` if building a shape for frames of ``resolution_wh`` fails, else ``[]``."""
    try:
        build(resolution_wh)
    except InvalidInputError as exc:
        return [(loc, f"{exc} ({what})")]
    return []
