"""The `watch` configuration: one YAML file validated by pydantic v2 models.

Every model forbids unknown keys and every field has a default, bounds, a title and a
description, so `campusguard config schema` documents itself. Validators do no I/O;
checks that need the outside world (a source that opens, a class name the model knows,
the real frame size) run at start-up through `check_frame_size` and `check_class_names`
and still name the line in the file.

Errors become one-line `ConfigError` messages: ``config.yaml:14: cameras[0].zones[1].polygon:
polygon edges 0 and 2 cross each other``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from campusguard.errors import ConfigError

__all__ = [
    "AlertSinkConfig",
    "CameraConfig",
    "DetectorConfig",
    "LineConfig",
    "LoadedConfig",
    "OutputsConfig",
    "ReconnectConfig",
    "RuleConfig",
    "StorageConfig",
    "WatchConfig",
    "ZoneConfig",
    "config_schema",
    "load_config",
    "parse_config",
    "source_kind",
]

Point = tuple[float, float]
Loc = tuple[int | str, ...]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


# geometry checks (pure) --------------------------------------------------------------------
def _polygon_area(points: Sequence[Point]) -> float:
    """Signed shoelace area of a polygon in squared input units."""
    s = 0.0
    for (x1, y1), (x2, y2) in zip(points, [*points[1:], points[0]], strict=True):
        s += x1 * y2 - x2 * y1
    return s / 2


def _segments_cross(p1: Point, p2: Point, q1: Point, q2: Point) -> bool:
    """True when closed segments p1-p2 and q1-q2 intersect (touching counts)."""

    def orient(a: Point, b: Point, c: Point) -> float:
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    def on_segment(a: Point, b: Point, c: Point) -> bool:
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    d1, d2 = orient(q1, q2, p1), orient(q1, q2, p2)
    d3, d4 = orient(p1, p2, q1), orient(p1, p2, q2)
    if ((d1 > 0 > d2) or (d1 < 0 < d2)) and ((d3 > 0 > d4) or (d3 < 0 < d4)):
        return True
    return any(
        d == 0 and on_segment(a, b, c)
        for d, a, b, c in ((d1, q1, q2, p1), (d2, q1, q2, p2), (d3, p1, p2, q1), (d4, p1, p2, q2))
    )


def polygon_problem(points: Sequence[Point]) -> str | None:
    """Say what is wrong with a polygon (fewer than 3 points, zero area, crossing edges), or None."""
    if len(points) < 3:
        return f"a polygon needs at least 3 points, got {len(points)}"
    if len({(float(x), float(y)) for x, y in points}) < len(points):
        return "polygon repeats a point"
    n = len(points)
    edges = [(points[i], points[(i + 1) % n]) for i in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            if j == i + 1 or (i == 0 and j == n - 1):
                continue  # neighbours share a vertex
            if _segments_cross(*edges[i], *edges[j]):
                return f"polygon is self-intersecting: edges {i} and {j} cross each other"
    scale = max(max(abs(x), abs(y)) for x, y in points) or 1.0
    if abs(_polygon_area(points)) <= 1e-9 * scale * scale:
        return "polygon is degenerate (zero area: its points are collinear)"
    return None


# geometry ----------------------------------------------------------------------------------
class ZoneConfig(_Model):
    """A named polygon zone of one camera."""

    name: str = Field(
        "zone",
        title="Name",
        description="Zone name, unique per camera; rules refer to it.",
        min_length=1,
        max_length=64,
    )
    polygon: list[tuple[float, float]] = Field(
        default_factory=list,
        title="Polygon",
        description="Vertices as [x, y] pairs, in pixels of the frame or in fractions 0..1 (see `units`).",
        max_length=256,
    )
    units: Literal["pixels", "fraction"] = Field(
        "pixels", title="Units", description="`pixels` of the camera frame, or `fraction` of its width and height."
    )
    anchor: Literal["bottom_center", "center"] = Field(
        "bottom_center",
        title="Anchor",
        description="Point of each box tested against the zone (bottom-centre by default, as Frigate and DeepStream do).",
    )

    @field_validator("polygon")
    @classmethod
    def _valid_polygon(cls, value: list[tuple[float, float]]) -> list[tuple[float, float]]:
        problem = polygon_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _fraction_range(self) -> ZoneConfig:
        if self.units == "fraction" and any(not (0 <= v <= 1) for p in self.polygon for v in p):
            raise ValueError("zone with units 'fraction' has coordinates outside 0..1")
        return self

    def polygon_px(self, resolution_wh: tuple[int, int]) -> list[tuple[float, float]]:
        """Vertices in pixels of a frame of ``resolution_wh`` (width, height)."""
        if self.units == "pixels":
            return list(self.polygon)
        w, h = resolution_wh
        return [(x * w, y * h) for x, y in self.polygon]


class LineConfig(_Model):
    """A named counting line of one camera."""

    name: str = Field(
        "line",
        title="Name",
        description="Line name, unique per camera; rules refer to it.",
        min_length=1,
        max_length=64,
    )
    points: list[tuple[float, float]] = Field(
        default_factory=lambda: [(0.0, 0.5), (1.0, 0.5)],
        title="Points",
        description="The two end points [[x1, y1], [x2, y2]] in pixels or fractions (see `units`).",
        min_length=2,
        max_length=2,
    )
    units: Literal["pixels", "fraction"] = Field(
        "pixels", title="Units", description="`pixels` or `fraction` of the frame."
    )
    in_side: Literal["left", "right"] = Field(
        "right",
        title="Inside",
        description="Which side of the directed line (walking from the first point to the second, as seen on screen) counts as 'in'.",
    )

    @field_validator("points")
    @classmethod
    def _distinct(cls, value: list[tuple[float, float]]) -> list[tuple[float, float]]:
        if len(value) == 2 and math.dist(value[0], value[1]) == 0:
            raise ValueError("line end points are the same point")
        return value

    @model_validator(mode="after")
    def _fraction_range(self) -> LineConfig:
        if self.units == "fraction" and any(not (0 <= v <= 1) for p in self.points for v in p):
            raise ValueError("line with units 'fraction' has coordinates outside 0..1")
        return self

    def points_px(self, resolution_wh: tuple[int, int]) -> list[tuple[float, float]]:
        """End points in pixels of a frame of ``resolution_wh`` (width, height)."""
        if self.units == "pixels":
            return list(self.points)
        w, h = resolution_wh
        return [(x * w, y * h) for x, y in self.points]


# rules -------------------------------------------------------------------------------------
_WINDOW = r"^([01]?\d|2[0-3]):[0-5]\d-(([01]?\d|2[0-3]):[0-5]\d|24:00)$"

ClassRef = Annotated[int | str, Field(description="A class name (as the model names it) or a class id.")]


class _RuleCommon(_Model):
    name: str | None = Field(
        None,
        title="Name",
        description="Rule name for events, unique per camera; default `<kind>:<zone or line>`.",
        max_length=64,
    )
    classes: list[ClassRef] = Field(
        default_factory=lambda: ["person"],
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

    def display_name(self) -> str:
        where = getattr(self, "zone", None) or getattr(self, "line", None) or "frame"
        return self.name or f"{getattr(self, 'kind', 'rule')}:{where}"


class _ZoneRuleBase(_RuleCommon):
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


class IntrusionRule(_ZoneRuleBase):
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


class CrowdRule(_ZoneRuleBase):
    """At least N objects inside a zone for at least T seconds."""

    kind: Literal["crowd"] = Field("crowd", title="Kind", description="Rule kind.")
    min_count: int = Field(5, ge=1, le=10000, title="Minimum count", description="Objects needed in the zone at once.")
    min_seconds: float = Field(
        5.0, ge=0, le=86400, title="Minimum seconds", description="Seconds the count must hold before the event starts."
    )


class FireLaneRule(_ZoneRuleBase):
    """An object stationary inside the fire lane for at least T seconds."""

    kind: Literal["fire_lane"] = Field("fire_lane", title="Kind", description="Rule kind.")
    classes: list[ClassRef] = Field(
        default_factory=lambda: ["car", "truck", "bus", "motorcycle"],
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


class LoiteringRule(_ZoneRuleBase):
    """One tracked object inside a zone for at least T seconds."""

    kind: Literal["loitering"] = Field("loitering", title="Kind", description="Rule kind.")
    min_seconds: float = Field(
        20.0, ge=0, le=86400, title="Minimum seconds", description="Seconds one tracked object must stay in the zone."
    )


class LineCrossingRule(_RuleCommon):
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


RuleConfig = Annotated[
    IntrusionRule | CrowdRule | FireLaneRule | LoiteringRule | LineCrossingRule,
    Field(discriminator="kind"),
]


# cameras -----------------------------------------------------------------------------------
class ReconnectConfig(_Model):
    """Exponential back-off between attempts to (re)open a live source."""

    initial_s: float = Field(0.5, gt=0, le=60, title="First delay", description="Seconds before the first retry.")
    max_s: float = Field(
        10.0, gt=0, le=600, title="Longest delay", description="Upper bound of the delay between retries, seconds."
    )
    factor: float = Field(
        2.0, ge=1, le=10, title="Factor", description="Each failed attempt multiplies the delay by this."
    )


_URL = re.compile(r"^(rtsp|rtsps|rtmp|http|https|udp|tcp|srt)://", re.IGNORECASE)


def source_kind(source: int | str) -> Literal["webcam", "url", "path"]:
    """Classify a camera source without I/O: webcam index, stream URL, or local path (file or folder)."""
    if isinstance(source, int) or (isinstance(source, str) and source.isdigit()):
        return "webcam"
    if _URL.match(source):
        return "url"
    return "path"


class CameraConfig(_Model):
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
    enabled: bool = Field(True, title="Enabled", description="Skip this camera when false.")
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

    @field_validator("resolution_wh")
    @classmethod
    def _positive(cls, value: tuple[int, int] | None) -> tuple[int, int] | None:
        if value is not None and (value[0] < 1 or value[1] < 1 or value[0] > 16384 or value[1] > 16384):
            raise ValueError("resolution must be two positive integers [width, height] up to 16384")
        return value

    @field_validator("imgsz")
    @classmethod
    def _imgsz(cls, value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
        return _check_imgsz(value)

    def is_live(self) -> bool:
        """Whether frames are paced by the outside world (webcam, URL) rather than read as fast as wanted."""
        return source_kind(self.source) != "path"

    def is_realtime(self) -> bool:
        """Whether this camera drops frames when behind (live sources, or files with ``realtime: true``)."""
        return self.is_live() if self.realtime is None else self.realtime


def _check_imgsz(value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    if value is None:
        return None
    dims = (value,) if isinstance(value, int) else value
    if any(d < 32 or d > 4096 or d % 32 for d in dims):
        raise ValueError(f"imgsz must be positive multiples of 32 up to 4096, got {value}")
    return value


# shared sections ---------------------------------------------------------------------------
class DetectorConfig(_Model):
    """Detection shared by all cameras; frames are batched across cameras."""

    model: str | None = Field(
        None,
        title="Model",
        description="ONNX file, .pt checkpoint or architecture name; none uses the bundled default model.",
    )
    device: str = Field("auto", title="Device", description="`auto`, `cpu`, `cuda:N` or `rocm:N`.")
    imgsz: int | tuple[int, int] | None = Field(
        None,
        title="Input size",
        description="Network input size: an int (long side; each camera gets an input shape matched to its aspect ratio when the model allows it) or [height, width]; none uses the model's own size.",
    )
    conf: float = Field(0.25, ge=0, le=1, title="Confidence", description="Minimum detection score.")
    iou: float = Field(0.7, ge=0, le=1, title="NMS IoU", description="IoU threshold of non-maximum suppression.")
    max_det: int = Field(300, ge=1, le=10000, title="Max detections", description="Most detections kept per frame.")
    batch_size: int = Field(
        4, ge=1, le=64, title="Batch size", description="Most frames (across cameras) in one inference batch."
    )
    threads: int = Field(
        0,
        ge=0,
        le=256,
        title="Inference threads",
        description="ONNX Runtime intra-op threads; 0: one per physical core.",
    )
    spinning: bool = Field(
        False,
        title="Spin-wait",
        description="Let ONNX Runtime's idle threads spin-wait between calls. Off by default in the app: spinning "
        "threads take the cores that the camera readers and analytics threads need.",
    )
    batch_wait_ms: float = Field(
        5.0,
        ge=0,
        le=1000,
        title="Batch wait",
        description="Milliseconds to wait for more frames before running a partial batch.",
    )

    @field_validator("imgsz")
    @classmethod
    def _imgsz(cls, value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
        return _check_imgsz(value)


class TrackerConfig(_Model):
    """Multi-object tracking (ByteTrack), one tracker per camera."""

    kind: Literal["bytetrack"] = Field("bytetrack", title="Tracker", description="Tracking algorithm.")
    lost_track_s: float = Field(
        1.0, ge=0, le=600, title="Lost-track time", description="Seconds a track survives without a matching detection."
    )
    track_activation_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        title="Activation threshold",
        description="Minimum confidence for a detection to start a track.",
    )
    high_conf_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        title="High-confidence threshold",
        description="Confidence splitting ByteTrack's first (high) and second (low) association stages.",
    )
    min_iou: float = Field(
        0.1,
        ge=0,
        le=1,
        title="Minimum IoU",
        description="Minimum IoU between a predicted track box and a detection to match them.",
    )
    min_consecutive_frames: int = Field(
        2,
        ge=1,
        le=100,
        title="Confirmation frames",
        description="Frames a new track must be matched in a row before it gets an id.",
    )


class AlertSinkConfig(_Model):
    """Where raised events are sent, after they are stored."""

    kind: Literal["stdout", "jsonl", "webhook"] = Field(
        "stdout", title="Kind", description="`stdout`, `jsonl` (append to a file) or `webhook` (HTTP POST)."
    )
    path: str | None = Field(None, title="Path", description="jsonl: the file to append to.")
    url: str | None = Field(
        None, title="URL", description="webhook: the receiver's http(s) URL.", pattern=r"^https?://"
    )
    timeout_s: float = Field(5.0, gt=0, le=300, title="Timeout", description="webhook: seconds per request.")
    retries: int = Field(
        5,
        ge=0,
        le=100,
        title="Retries",
        description="webhook: attempts after the first before the alert goes to the dead-letter file.",
    )
    backoff_s: float = Field(
        0.5, ge=0, le=600, title="Back-off", description="webhook: first delay between retries, doubled each time."
    )
    dead_letter: str | None = Field(
        None, title="Dead-letter file", description="webhook: JSON-lines file for alerts that could not be delivered."
    )
    phases: list[Literal["start", "update", "end"]] = Field(
        default_factory=lambda: ["start", "end"],
        title="Phases",
        description="Event lifecycle phases sent to this sink.",
    )

    @model_validator(mode="after")
    def _needs(self) -> AlertSinkConfig:
        if self.kind == "jsonl" and not self.path:
            raise ValueError("a jsonl alert sink needs `path`")
        if self.kind == "webhook" and not self.url:
            raise ValueError("a webhook alert sink needs `url`")
        return self


class StorageConfig(_Model):
    """The event store."""

    sqlite: str = Field(
        "campusguard-events.db",
        title="SQLite file",
        description="SQLite database file (WAL mode) where events are committed.",
        min_length=1,
    )


class OutputsConfig(_Model):
    """Optional outputs."""

    annotated_video_dir: str | None = Field(
        None,
        title="Annotated video folder",
        description="Write one annotated MP4 per camera here (zones, boxes, ids, active incidents).",
    )
    annotated_fps: float | None = Field(
        None,
        gt=0,
        le=240,
        title="Annotated video frame rate",
        description="Frame rate of annotated videos; none uses the source's.",
    )
    annotated_segment_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        title="Annotated segment length",
        description="Start a new annotated file every this many seconds of video (an open MP4 grows in memory).",
    )
    snapshots_dir: str | None = Field(
        None, title="Snapshot folder", description="Write a JPEG snapshot per event start here."
    )
    metrics_interval_s: float = Field(
        10.0,
        ge=0,
        le=86400,
        title="Metrics interval",
        description="Print per-camera metrics every this many seconds (0: only at exit).",
    )
    metrics_file: str | None = Field(
        None, title="Metrics file", description="Also append metrics as JSON lines to this file."
    )


class WatchConfig(_Model):
    """The whole `campusguard watch` configuration."""

    version: Literal[1] = Field(1, title="Version", description="Configuration format version.")
    detector: DetectorConfig = Field(
        default_factory=DetectorConfig, title="Detector", description="Detection shared by all cameras."
    )
    tracker: TrackerConfig = Field(
        default_factory=TrackerConfig, title="Tracker", description="Tracking settings (one tracker per camera)."
    )
    cameras: list[CameraConfig] = Field(
        default_factory=list, title="Cameras", description="The cameras to watch.", max_length=256
    )
    alerts: list[AnyAlertSinkConfig] = Field(
        default_factory=lambda: [AlertSinkConfig()],
        title="Alert sinks",
        description="Where events go after they are stored.",
        max_length=32,
    )
    storage: StorageConfig = Field(default_factory=StorageConfig, title="Storage", description="The event store.")
    outputs: OutputsConfig = Field(
        default_factory=OutputsConfig, title="Outputs", description="Annotated video, snapshots, metrics."
    )


# semantic checks (pure) --------------------------------------------------------------------
def _reference_errors(cfg: WatchConfig) -> list[tuple[Loc, str]]:
    """Cross-references the field validators cannot see: unique names, rules naming zones and lines."""
    errors: list[tuple[Loc, str]] = []
    seen: dict[str, int] = {}
    for ci, cam in enumerate(cfg.cameras):
        if cam.id in seen:
            errors.append((("cameras", ci, "id"), f"camera id {cam.id!r} is already used by cameras[{seen[cam.id]}]"))
        seen.setdefault(cam.id, ci)
        zone_names = [z.name for z in cam.zones]
        line_names = [ln.name for ln in cam.lines]
        for key, names in (("zones", zone_names), ("lines", line_names)):
            for i, name in enumerate(names):
                if name in names[:i]:
                    errors.append(
                        (("cameras", ci, key, i, "name"), f"name {name!r} is used twice in camera {cam.id!r}")
                    )
        if cam.resolution_wh is not None:
            errors.extend(_outside_frame_errors(cam, ci, cam.resolution_wh, "the declared resolution"))
        rule_names = [r.display_name() for r in cam.rules]
        for ri, rule in enumerate(cam.rules):
            if rule_names[ri] in rule_names[:ri]:
                errors.append(
                    (
                        ("cameras", ci, "rules", ri),
                        f"rule name {rule_names[ri]!r} is used twice in camera {cam.id!r}; give `name`",
                    )
                )
            if isinstance(rule, LineCrossingRule):
                if rule.line not in line_names:
                    errors.append(
                        (
                            ("cameras", ci, "rules", ri, "line"),
                            f"rule names unknown line {rule.line!r}; camera {cam.id!r} has lines {line_names}",
                        )
                    )
            elif rule.zone is None:  # type: ignore[union-attr]
                errors.append((("cameras", ci, "rules", ri), f"a {rule.kind} rule needs `zone`"))
            elif rule.zone not in zone_names:
                errors.append(
                    (
                        ("cameras", ci, "rules", ri, "zone"),
                        f"rule names unknown zone {rule.zone!r}; camera {cam.id!r} has zones {zone_names}",
                    )
                )
    return errors


def _outside_frame_errors(
    cam: CameraConfig, ci: int, resolution_wh: tuple[int, int], what: str
) -> list[tuple[Loc, str]]:
    """Zones and lines in pixels that leave a frame of ``resolution_wh``."""
    w, h = resolution_wh
    errors: list[tuple[Loc, str]] = []
    for key, items in (("zones", cam.zones), ("lines", cam.lines)):
        for i, item in enumerate(items):
            pts = item.polygon if isinstance(item, ZoneConfig) else item.points
            if item.units != "pixels":
                continue
            bad = [(x, y) for x, y in pts if not (0 <= x <= w and 0 <= y <= h)]
            if bad:
                field_name = "polygon" if key == "zones" else "points"
                msg = f"{key[:-1]} {item.name!r} has points outside the {w}x{h} frame of {what}: {bad[0]}"
                errors.append((("cameras", ci, key, i, field_name), msg))
    return errors


# locating errors in the YAML ---------------------------------------------------------------
@dataclass
class LoadedConfig:
    """A validated config plus where each field came from, so later checks can name the line."""

    config: WatchConfig
    path: str = "<config>"
    root: yaml.Node | None = field(default=None, repr=False)

    def where(self, loc: Loc) -> str:
        """``file:line: dotted.path`` for a field location such as ``("cameras", 0, "source")``."""
        line = _line_of(self.root, loc)
        prefix = f"{self.path}:{line}" if line else self.path
        return f"{prefix}: {_dotted(loc)}" if loc else prefix

    def error(self, loc: Loc, message: str) -> ConfigError:
        """A one-line `ConfigError` naming file, line and field."""
        return ConfigError(f"{self.where(loc)}: {message}")

    def check_frame_size(self, camera_index: int, resolution_wh: tuple[int, int]) -> None:
        """Raise `ConfigError` if a pixel zone or line of a camera leaves its real frame."""
        cam = self.config.cameras[camera_index]
        errors = _outside_frame_errors(cam, camera_index, resolution_wh, f"camera {cam.id!r}")
        if errors:
            loc, msg = errors[0]
            raise self.error(loc, msg)

    def check_class_names(self, camera_index: int, names: dict[int, str]) -> None:
        """Raise `ConfigError` if a rule of a camera names a class the model does not know."""
        cam = self.config.cameras[camera_index]
        by_name = {v: k for k, v in names.items()}
        for ri, rule in enumerate(cam.rules):
            for k, ref in enumerate(rule.classes):
                known = ref in names if isinstance(ref, int) else ref in by_name
                if not known:
                    shown = ", ".join(names[i] for i in sorted(names)[:12]) + (" ..." if len(names) > 12 else "")
                    raise self.error(
                        ("cameras", camera_index, "rules", ri, "classes", k),
                        f"unknown class {ref!r}; the model knows: {shown}",
                    )


def class_ids(refs: Iterable[int | str], names: dict[int, str]) -> list[int]:
    """Resolve class names or ids to ids with the model's ``names`` (id to name); unknown ones are skipped."""
    by_name = {v: k for k, v in names.items()}
    out = []
    for ref in refs:
        cid = ref if isinstance(ref, int) else by_name.get(ref)
        if cid is not None and cid in names:
            out.append(int(cid))
    return out


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(root: yaml.Node | None, loc: Loc) -> int | None:
    """1-based line of the deepest YAML node reachable along ``loc`` (None without a node tree)."""
    node = root
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            continue  # discriminator tags and union branches in pydantic's loc have no node
        node = child
        if not isinstance(node, yaml.MappingNode):
            line = node.start_mark.line + 1
    return line


def _clean_loc(loc: tuple[int | str, ...], data: Any) -> Loc:
    """Keep the parts of pydantic's ``loc`` that exist in the data; drop union-branch labels (``'intrusion'``, ``'int'``)."""
    out: list[int | str] = []
    node = data
    for part in loc:
        if (
            isinstance(node, dict)
            and part in node
            or isinstance(node, list)
            and isinstance(part, int)
            and 0 <= part < len(node)
        ):
            node = node[part]
        else:
            continue
        out.append(part)
    return tuple(out)


def _first_error(exc: ValidationError, data: Any) -> tuple[Loc, str]:
    errs = exc.errors(include_url=False)
    err = errs[0]
    loc = _clean_loc(tuple(err["loc"]), data)
    same = [e for e in errs if _clean_loc(tuple(e["loc"]), data) == loc]
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
    elif err["type"] == "union_tag_invalid":
        kind = err["input"].get("kind") if isinstance(err.get("input"), dict) else None
        msg = f"unknown rule kind {kind!r}; expected intrusion, crowd, fire_lane, loitering or line_crossing"
    elif err["type"] == "union_tag_not_found":
        msg = "a rule needs `kind`: intrusion, crowd, fire_lane, loitering or line_crossing"
    elif len(same) > 1:  # one error per union branch (e.g. int | str): say them together
        msg = f"invalid value {err.get('input')!r}: " + " or ".join(dict.fromkeys(e["msg"].lower() for e in same))
    msg = msg.removeprefix("Value error, ")
    more = exc.error_count() - len(same)
    if more > 0:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return loc, msg


def parse_config(text: str, path: str = "<config>") -> LoadedConfig:
    """Parse and validate config YAML ``text``; raise a one-line `ConfigError` naming file, line and field."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}:1: the config must be a mapping of sections (detector, cameras, alerts, storage, outputs), got {type(data).__name__}"
        )
    loaded = LoadedConfig(WatchConfig(), path, root)
    try:
        loaded.config = WatchConfig.model_validate(data)
    except ValidationError as exc:
        loc, msg = _first_error(exc, data)
        raise loaded.error(loc, msg) from None
    errors = _reference_errors(loaded.config)
    if errors:
        loc, msg = errors[0]
        raise loaded.error(loc, msg + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    return loaded


def load_config(path: str | Path) -> LoadedConfig:
    """Read and validate a config file; relative paths inside it stay relative to the working directory."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.__class__.__name__}") from None
    return parse_config(text, str(p))


def config_schema() -> str:
    """The JSON Schema of `WatchConfig`, as indented JSON text."""
    return json.dumps(WatchConfig.model_json_schema(), indent=2)


# ===========================================================================================
# MQTT alert sink (issue 9, H5). Kept as one block at the end of the file so it can be moved
# as a unit; `WatchConfig.alerts` refers to `AnyAlertSinkConfig` below.
# ===========================================================================================
from pydantic import BeforeValidator, Discriminator, Tag  # noqa: E402 - kept inside this block


class MqttSinkConfig(_Model):
    """Publish events and per-camera/rule state to an MQTT broker (topics: docs/mqtt.md)."""

    kind: Literal["mqtt"] = Field("mqtt", title="Kind", description="`mqtt`: publish to an MQTT broker.")
    host: str = Field(
        "127.0.0.1", title="Broker host", description="MQTT broker host name or address.", min_length=1, max_length=253
    )
    port: int = Field(1883, ge=1, le=65535, title="Broker port", description="MQTT broker TCP port.")
    prefix: str = Field(
        "campusguard",
        title="Topic prefix",
        description="First topic level(s): `<prefix>/events`, `<prefix>/<camera>/<rule>`, `<prefix>/available`.",
        min_length=1,
        max_length=128,
        pattern=r"^[^+#]+$",
    )
    client_id: str = Field(
        "", title="Client id", description="MQTT client id; empty lets the broker assign one.", max_length=128
    )
    username: str | None = Field(None, title="User name", description="Broker user name, if it needs one.")
    password: str | None = Field(None, title="Password", description="Broker password.")
    qos: Literal[1, 2] = Field(1, title="QoS", description="MQTT quality of service: 1 (at least once) or 2.")
    keepalive_s: int = Field(30, ge=5, le=3600, title="Keep-alive", description="MQTT keep-alive in seconds.")
    reconnect_min_s: int = Field(
        1, ge=1, le=600, title="First reconnect delay", description="Seconds before the first reconnect attempt."
    )
    reconnect_max_s: int = Field(
        30, ge=1, le=3600, title="Longest reconnect delay", description="Reconnect delays double up to this (seconds)."
    )
    outbox: str | None = Field(
        None,
        title="Outbox file",
        description="SQLite file keeping messages until the broker acknowledges them; default beside the event store.",
    )
    max_outbox: int = Field(
        100_000,
        ge=1,
        le=10_000_000,
        title="Outbox size",
        description="Most unacknowledged messages kept; beyond it the oldest are dropped (and logged).",
    )
    phases: list[Literal["start", "update", "end"]] = Field(
        default_factory=lambda: ["start", "update", "end"],
        title="Phases",
        description="Event lifecycle phases published.",
    )

    @model_validator(mode="after")
    def _delays(self) -> MqttSinkConfig:
        if self.reconnect_min_s > self.reconnect_max_s:
            raise ValueError("reconnect_min_s must not exceed reconnect_max_s")
        return self


ALERT_SINK_KINDS: tuple[str, ...] = ("stdout", "jsonl", "webhook", "mqtt")


def _alert_sink_tag(value: Any) -> str:
    kind = value.get("kind", "stdout") if isinstance(value, dict) else getattr(value, "kind", "stdout")
    return "mqtt" if kind == "mqtt" else "other"


def _known_alert_sink_kind(value: Any) -> Any:
    kind = value.get("kind", "stdout") if isinstance(value, dict) else None
    if isinstance(value, dict) and kind not in ALERT_SINK_KINDS:
        raise ValueError(f"unknown alert sink kind {kind!r}; expected {', '.join(ALERT_SINK_KINDS)}")
    return value


AnyAlertSinkConfig = Annotated[
    Annotated[AlertSinkConfig, Tag("other")] | Annotated[MqttSinkConfig, Tag("mqtt")],
    Discriminator(_alert_sink_tag),
    BeforeValidator(_known_alert_sink_kind),
]
__all__ += ["ALERT_SINK_KINDS", "AnyAlertSinkConfig", "MqttSinkConfig"]
WatchConfig.model_rebuild()
