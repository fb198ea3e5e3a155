"""`CameraHealthRule`: a camera that cannot see is an incident (offline, covered, frozen, blurred, moved).

On by default for every camera, configured per camera under ``health:`` over the site-wide
``health:`` section. Unlike the other rules it watches the picture, not the objects: the analytics
stage hands it each frame (`observe`, sampled every ``sample_s`` of stream time, on frames already
decoded) and, while a live camera gives no frame, the time (`tick`). The picture is judged by the
vision kit's `campusguard.health.HealthMonitor` against this camera's own history; this rule adds
the timing: a problem becomes an incident once it has lasted its ``min_s`` (``onset_s`` is when it
began, ``start_s`` when it was raised), and ends once it has been gone for ``end_s``.

Each incident has ``rule_kind: camera_health``, ``zone`` and ``details.problem`` set to the problem,
and the measures that decided it in ``details.measures``. Its snapshot is the last good view beside
the current one (`snapshot_image`). The reference view of a live camera is kept on disk
(`ReferenceStore`), so a camera turned while the service was down is still found ``moved``; an
admin accepts a new view with `accept_view`, which records the zones drawn on the old one.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Literal

import cv2
import numpy as np
from pydantic import Field

from campusguard.app.events.types import Event, RuleKind
from campusguard.app.infra.configmodel import ConfigModel
from campusguard.app.rules.base import Episode
from campusguard.app.rules.spec import RuleConfigBase, RuleContext, RuleEntry
from campusguard.detections import Detections
from campusguard.health import PROBLEMS, HealthMonitor, HealthThresholds, ReferenceView, ViewSample, measure_view

__all__ = [
    "CAMERA_HEALTH",
    "CameraHealthConfig",
    "CameraHealthRule",
    "HealthStatus",
    "ReferenceStore",
    "effective_health",
]

log = logging.getLogger(__name__)

KIND = "camera_health"
_GOOD_WIDTH = 640  # the last good view is kept at most this wide, for the incident's snapshot


def _enabled(problem: str) -> Any:
    return Field(True, title="Enabled", description=f"Raise `{problem}` incidents.")


def _min_s(default: float, description: str) -> Any:
    return Field(default, ge=1, le=86400, title="Minimum", description=description)


class ProblemConfig(ConfigModel):
    """What every problem's section has: whether it raises incidents, and for how long it must last first."""

    enabled: bool = Field(True, title="Enabled", description="Raise this problem's incidents.")
    min_s: float = _min_s(10.0, "Seconds the problem must last before the incident starts.")


class OfflineConfig(ProblemConfig):
    """A live camera that delivers no frame."""

    enabled: bool = _enabled("offline")
    min_s: float = _min_s(10.0, "Seconds without a frame before the incident starts.")


class FrozenConfig(ProblemConfig):
    """Frames keep coming but the picture no longer changes."""

    enabled: bool = _enabled("frozen")
    min_s: float = _min_s(10.0, "Seconds the picture must stay the same.")
    max_changed: float = Field(
        0.02,
        ge=0,
        lt=1,
        title="Changed share",
        description="At most this share of pixels may change between samples for the picture to count as frozen "
        "(a real sensor's noise changes most of them, even at night).",
    )


class CoveredConfig(ProblemConfig):
    """Most of the view lost at once: dark, flat, little texture."""

    enabled: bool = _enabled("covered")
    min_s: float = _min_s(10.0, "Seconds the view must stay covered.")
    min_area: float = Field(
        0.7,
        gt=0,
        le=1,
        title="Area",
        description="Share of the usually textured parts of the view that must lose their contrast.",
    )
    contrast: float = Field(
        0.3,
        gt=0,
        le=1,
        title="Contrast",
        description="A part has lost its contrast below this share of its usual (brightness-normalised) contrast.",
    )


class BlurredConfig(ProblemConfig):
    """The picture's sharpness far below this camera's own usual level."""

    enabled: bool = _enabled("blurred")
    min_s: float = _min_s(20.0, "Seconds the view must stay blurred.")
    sharpness: float = Field(
        0.45, gt=0, le=1, title="Sharpness", description="Blurred below this share of the camera's usual sharpness."
    )


class MovedConfig(ProblemConfig):
    """The view no longer matches this camera's reference view."""

    enabled: bool = _enabled("moved")
    min_s: float = _min_s(30.0, "Seconds the view must stay unlike the reference view.")
    similarity: float = Field(
        0.55,
        gt=0,
        le=1,
        title="Similarity",
        description="Moved when the view's structure is less alike the reference view's than this (1: the same view).",
    )


class CameraHealthConfig(RuleConfigBase):
    """Camera health: an incident when a camera cannot see (offline, frozen, covered, blurred, moved).

    On by default for every camera. The site-wide ``health`` section sets the defaults; a camera's
    own ``health`` section changes only the fields it names.
    """

    kind: Literal["camera_health"] = Field("camera_health", title="Kind", description="Rule kind.")
    enabled: bool = Field(True, title="Enabled", description="Watch this camera's health; false turns it off.")
    classes: list[Any] = Field(
        default_factory=list,
        title="Classes",
        description="Not used: camera health watches the picture, not objects.",
        max_length=0,
    )
    sample_s: float = Field(
        1.0, ge=0.1, le=60, title="Sample every", description="Seconds of stream time between two measured frames."
    )
    learn_s: float = Field(
        20.0,
        ge=0,
        le=3600,
        title="Learn",
        description="Seconds of samples that make a camera's usual look before it is judged "
        "(a live camera's reference view is kept across restarts).",
    )
    end_s: float = Field(
        5.0, ge=0, le=3600, title="End after", description="Seconds a problem must be gone before its incident ends."
    )
    offline: OfflineConfig = Field(default_factory=OfflineConfig, title="Offline", description=OfflineConfig.__doc__)
    frozen: FrozenConfig = Field(default_factory=FrozenConfig, title="Frozen", description=FrozenConfig.__doc__)
    covered: CoveredConfig = Field(default_factory=CoveredConfig, title="Covered", description=CoveredConfig.__doc__)
    blurred: BlurredConfig = Field(default_factory=BlurredConfig, title="Blurred", description=BlurredConfig.__doc__)
    moved: MovedConfig = Field(default_factory=MovedConfig, title="Moved", description=MovedConfig.__doc__)

    section: ClassVar[str] = "health"

    def display_name(self) -> str:
        return self.name or KIND

    def thresholds(self) -> HealthThresholds:
        """The kit's thresholds for these settings."""
        return HealthThresholds(
            covered_area=self.covered.min_area,
            covered_contrast=self.covered.contrast,
            frozen_changed=self.frozen.max_changed,
            blurred_sharpness=self.blurred.sharpness,
            moved_similarity=self.moved.similarity,
            learn_s=self.learn_s,
        )

    def min_s(self, problem: str) -> float:
        """Seconds ``problem`` must last before it is an incident."""
        section: ProblemConfig = getattr(self, problem)
        return section.min_s

    def watches(self, problem: str) -> bool:
        """Whether ``problem`` raises incidents."""
        section: ProblemConfig = getattr(self, problem)
        return section.enabled


def _merged(site: ConfigModel, camera: ConfigModel) -> Any:
    """``site`` with the fields ``camera`` names (recursively for sub-sections)."""
    update: dict[str, Any] = {}
    for name in camera.model_fields_set:
        value = getattr(camera, name)
        base = getattr(site, name, None)
        update[name] = (
            _merged(base, value) if isinstance(value, ConfigModel) and isinstance(base, ConfigModel) else value
        )
    return site.model_copy(update=update)


def effective_health(site: CameraHealthConfig, camera: CameraHealthConfig | None) -> CameraHealthConfig:
    """A camera's health settings: the site-wide section with the camera's own fields over it."""
    if camera is None:
        return site
    merged: CameraHealthConfig = _merged(site, camera)
    return merged


# the reference view, kept on disk ----------------------------------------------------------------
@dataclass(frozen=True)
class ReferenceRecord:
    """A stored reference view and how it came to be.

    Attributes:
        view: the structure map and usual sharpness.
        made_at: when it was made (ISO 8601).
        accepted_by: who accepted it in the console, or ``""`` when learned.
        zones_on_old_view: the camera's zones when a new view was accepted (drawn on the old one).
    """

    view: ReferenceView
    made_at: str
    accepted_by: str = ""
    zones_on_old_view: tuple[str, ...] = ()


class ReferenceStore:
    """Reference views of live cameras, one pair of files per camera in ``folder`` (``<id>.npy``
    and ``<id>.json``), written atomically. A damaged file is ignored with one log line (the view
    is learned again)."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def _paths(self, camera_id: str) -> tuple[Path, Path]:
        return self.folder / f"{camera_id}.npy", self.folder / f"{camera_id}.json"

    def load(self, camera_id: str) -> ReferenceRecord | None:
        """The stored reference of ``camera_id``, or None."""
        npy, meta = self._paths(camera_id)
        if not npy.exists() or not meta.exists():
            return None
        try:
            structure = np.load(npy, allow_pickle=False).astype(np.float32)
            info = json.loads(meta.read_text())
            return ReferenceRecord(
                ReferenceView(structure.ravel(), float(info.get("sharpness", 0.0))),
                str(info.get("made_at", "")),
                str(info.get("accepted_by", "")),
                tuple(str(z) for z in info.get("zones_on_old_view", ())),
            )
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("camera %s: reference view in %s cannot be read (%s); learning it again", camera_id, npy, exc)
            return None

    def save(self, camera_id: str, record: ReferenceRecord) -> None:
        """Write ``record`` for ``camera_id`` (a failure is logged, never raised: health goes on in memory)."""
        npy, meta = self._paths(camera_id)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            tmp = npy.with_suffix(".npy.tmp")
            with open(tmp, "wb") as fh:
                np.save(fh, record.view.structure, allow_pickle=False)
            os.replace(tmp, npy)
            info = {
                "sharpness": record.view.sharpness,
                "made_at": record.made_at,
                "accepted_by": record.accepted_by,
                "zones_on_old_view": list(record.zones_on_old_view),
            }
            tmp_meta = meta.with_suffix(".json.tmp")
            tmp_meta.write_text(json.dumps(info))
            os.replace(tmp_meta, meta)
        except OSError as exc:
            log.warning("camera %s: reference view not saved in %s (%s)", camera_id, self.folder, exc)


@dataclass(frozen=True)
class HealthStatus:
    """What the console shows of a camera's health.

    Attributes:
        state: ``ok``, ``learning``, or the problem of the open incident (``offline``, ``covered``, ...).
        since_s: when that problem began (stream clock), or None.
        event_id: the open incident's id, or None.
        measures: the latest sample's measures.
        reference_made_at: when the reference view was made or accepted.
        reference_accepted_by: who accepted it (``""`` when learned).
        zones_on_old_view: zones drawn before the last accepted view (to check).
    """

    state: str
    since_s: float | None = None
    event_id: str | None = None
    measures: dict[str, float] = field(default_factory=dict)
    reference_made_at: str = ""
    reference_accepted_by: str = ""
    zones_on_old_view: tuple[str, ...] = ()


class CameraHealthRule:
    """One camera's health incidents (see the module docstring).

    Args:
        name: rule name (default ``camera_health``).
        camera_id: the camera.
        config: its effective health settings (`effective_health`).
        live: whether the camera is live (``offline`` is judged, and the reference view is kept on disk).
        references: where a live camera's reference view is kept, or None (memory only).
        stream_key: put into the event ids (a scanned recording); empty for a live camera.
        started_s: stream time at which the camera is expected to give frames (``offline`` counts from it
            until the first frame; default ``time.monotonic()``, a live camera's clock).
        sop, cooldown_s, time_windows, class_ids, class_names: what every rule takes (only ``cooldown_s``
            is used: the others are about objects or are the event writer's).
    """

    kind: RuleKind = KIND
    watches_camera: ClassVar[bool] = True
    """Its incidents are about the camera itself: an outage does not end them as interrupted."""

    def __init__(
        self,
        *,
        name: str,
        camera_id: str,
        config: CameraHealthConfig,
        live: bool = False,
        references: ReferenceStore | None = None,
        stream_key: str = "",
        started_s: float | None = None,
        cooldown_s: float = 0.0,
        **_common: object,
    ) -> None:
        self.name = name
        self.camera_id = camera_id
        self.config = config
        self.live = live
        self.references = references if live else None
        self.stream_key = stream_key
        self._lock = threading.RLock()
        record = self.references.load(camera_id) if self.references is not None else None
        self._record = record
        self.monitor = HealthMonitor(config.thresholds(), record.view if record is not None else None)
        self._saved_learned = record is not None
        self._episodes = {
            p: Episode(
                camera_id=camera_id,
                rule_name=name,
                rule_kind=KIND,
                zone=p,
                end_grace_s=0.0 if p == "offline" else config.end_s,
                cooldown_s=cooldown_s,
                stream_key=stream_key,
            )
            for p in PROBLEMS
        }
        self._since: dict[str, float | None] = dict.fromkeys(PROBLEMS)
        self._last_shown: dict[str, float] = {}
        self._next_sample_s: float | None = None
        self._gap_s = max(2.0, 2.5 * config.sample_s)
        self._last_frame_s: float | None = None
        self._last_frame_index = 0
        # the stream clock: a live camera's is time.monotonic(); a file's starts at its first frame
        self._last_t = started_s if started_s is not None else (time.monotonic() if live else -np.inf)
        self._offline_from = self._last_t
        self._last_sample: ViewSample | None = None
        self._last_measures: dict[str, float] = {}
        self._good: np.ndarray | None = None  # the last healthy sampled frame, at most _GOOD_WIDTH wide (BGR)
        self._good_at: datetime | None = None
        self._current: np.ndarray | None = None  # the latest sampled frame (BGR), for snapshots
        self._learning = True

    # -- the Rule protocol ------------------------------------------------------------------
    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Nothing: camera health watches the picture (`observe`), not the detections."""
        return []

    def open_events(self) -> list[Event]:
        with self._lock:
            return [e.current for e in self._episodes.values() if e.current is not None]

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        with self._lock:
            out: list[Event] = []
            for episode in self._episodes.values():
                out += episode.close(max(timestamp_s, self._last_t), wall_time)
            return out

    # -- frames and time ----------------------------------------------------------------------
    def observe(
        self, timestamp_s: float, frame_index: int, image: np.ndarray, wall_time: datetime | None = None
    ) -> list[Event]:
        """One frame of the camera (``(H, W, 3)`` BGR or ``(H, W)`` grey ``uint8``): ends an offline
        incident, and every ``sample_s`` measures the picture."""
        with self._lock:
            out: list[Event] = []
            self._last_t = max(self._last_t, timestamp_s)
            self._last_frame_s, self._last_frame_index = timestamp_s, frame_index
            out += self._step("offline", timestamp_s, frame_index, wall_time, False, None, {})
            if self._next_sample_s is not None and timestamp_s < self._next_sample_s:
                return out
            self._next_sample_s = timestamp_s + self.config.sample_s
            sample = measure_view(image)
            reading = self.monitor.observe(timestamp_s, sample)
            self._learning = reading.learning
            self._last_sample, self._last_measures = sample, reading.measures
            self._current = _small_bgr(image)
            watched = [p for p in reading.problems if self.config.watches(p)]
            top = watched[0] if watched else None
            if top is None:
                self._good, self._good_at = self._current, wall_time or datetime.now(UTC)
            for problem in PROBLEMS[1:]:
                out += self._step(problem, timestamp_s, frame_index, wall_time, problem == top, reading.measures, {})
            self._keep_learned_reference()
            return out

    def tick(self, now_s: float, wall_time: datetime | None = None) -> list[Event]:
        """Time passing without frames (a live camera): the ``offline`` incident starts once no frame
        came for its ``min_s``; the picture's open incidents end (nothing is seen any more)."""
        with self._lock:
            if not self.live or now_s < self._last_t:
                return []
            self._last_t = now_s
            last = self._last_frame_s if self._last_frame_s is not None else self._offline_from
            silent = now_s - last >= 1.0  # a frame within the last second: frames are coming
            if not silent:
                return []
            wall = wall_time or datetime.now(UTC)
            offline = self.config.watches("offline") and now_s - last >= self.config.offline.min_s
            measures = {"seconds_without_frames": round(now_s - last, 1)}
            out = self._step("offline", now_s, self._last_frame_index, wall, offline, measures, {}, onset_s=last)
            if offline:
                for problem in PROBLEMS[1:]:
                    out += self._step(problem, now_s, self._last_frame_index, wall, False, None, {})
            return out

    def _step(
        self,
        problem: str,
        t: float,
        frame_index: int,
        wall: datetime | None,
        shown: bool,
        measures: dict[str, float] | None,
        extra: dict[str, Any],
        onset_s: float | None = None,
    ) -> list[Event]:
        episode = self._episodes[problem]
        if shown:
            if self._since[problem] is None:
                self._since[problem] = onset_s if onset_s is not None else t
            self._last_shown[problem] = t
        elif t - self._last_shown.get(problem, -np.inf) > self._gap_s:
            self._since[problem] = None  # a sample or two without it (an encoder's keyframe, a flash) keeps its onset
        since = self._since[problem]
        active = shown and since is not None and (episode.is_open or t - since >= self.config.min_s(problem))
        details: dict[str, Any] = {"problem": problem, **extra}
        if measures:
            details["measures"] = dict(measures)
        events = episode.step(t, frame_index, wall, active, onset_s=since, details=details if active else None)
        for ev in events:
            if ev.phase == "start":
                log.warning("camera %s: %s (health incident %s)", self.camera_id, problem, ev.event_id[:12])
            elif ev.phase == "end":
                log.warning("camera %s: no longer %s", self.camera_id, problem)
        return events

    def _keep_learned_reference(self) -> None:
        """Store the reference view once it is learned (live cameras), so a restart keeps it."""
        if self._saved_learned or self._learning or self.references is None or self.monitor.reference is None:
            return
        self._record = ReferenceRecord(self.monitor.reference, datetime.now(UTC).isoformat(timespec="seconds"))
        self.references.save(self.camera_id, self._record)
        self._saved_learned = True

    # -- the console ----------------------------------------------------------------------------
    def status(self) -> HealthStatus:
        """The camera's health now (thread-safe)."""
        with self._lock:
            record = self._record
            made_at = record.made_at if record is not None else ""
            by = record.accepted_by if record is not None else ""
            zones = record.zones_on_old_view if record is not None else ()
            for problem in PROBLEMS:
                current = self._episodes[problem].current
                if current is not None:
                    return HealthStatus(
                        problem, current.onset_s, current.event_id, dict(self._last_measures), made_at, by, zones
                    )
            state = "learning" if self._learning and self._last_sample is not None else "ok"
            return HealthStatus(state, None, None, dict(self._last_measures), made_at, by, zones)

    def accept_view(self, by: str, zones: Sequence[str] = ()) -> bool:
        """Make the current view the reference (an admin accepted a moved camera's new view): the
        ``moved`` incident ends at the next sample; ``zones`` (drawn on the old view) are recorded.

        Returns:
            False when no frame has been measured yet (nothing to accept).
        """
        with self._lock:
            if self._last_sample is None:
                return False
            self.monitor.accept(self._last_sample)
            assert self.monitor.reference is not None
            self._record = ReferenceRecord(
                self.monitor.reference, datetime.now(UTC).isoformat(timespec="seconds"), by, tuple(zones)
            )
            if self.references is not None:
                self.references.save(self.camera_id, self._record)
            self._next_sample_s = None  # judge the next frame against the new view at once
            return True

    def clear_old_view_zones(self) -> bool:
        """Forget the zones recorded by `accept_view` (the camera's zones were saved again, so they
        were checked on the new view). Returns whether there were any."""
        with self._lock:
            record = self._record
            if record is None or not record.zones_on_old_view:
                return False
            self._record = ReferenceRecord(record.view, record.made_at, record.accepted_by)
            if self.references is not None:
                self.references.save(self.camera_id, self._record)
            return True

    def snapshot_image(self, event: Event, image: np.ndarray | None) -> np.ndarray:
        """The incident's snapshot: the last good view beside the current one (``image``, or a
        "no signal" panel for an offline camera), each labelled."""
        with self._lock:
            current = _small_bgr(image) if image is not None else None
            good = self._good
            good_at = self._good_at
        h = (current if current is not None else good if good is not None else np.zeros((360, 640, 3), np.uint8)).shape[
            0
        ]
        left = _panel(
            good, h, f"last good view{' ' + good_at.strftime('%H:%M:%S') if good_at else ''}", "no good view yet"
        )
        right = _panel(current, h, f"now: {event.zone}", "NO SIGNAL")
        return np.hstack([left, np.full((h, 8, 3), 255, np.uint8), right])


def _small_bgr(image: np.ndarray) -> np.ndarray:
    """A BGR copy of ``image`` at most `_GOOD_WIDTH` wide."""
    bgr = image if image.ndim == 3 else cv2.cvtColor(image, cv2.COLOR_GRAY2BGR)
    h, w = bgr.shape[:2]
    if w > _GOOD_WIDTH:
        return cv2.resize(bgr, (_GOOD_WIDTH, max(1, round(h * _GOOD_WIDTH / w))), interpolation=cv2.INTER_AREA)
    return bgr.copy()


def _panel(image: np.ndarray | None, height: int, label: str, missing: str) -> np.ndarray:
    """``image`` scaled to ``height`` with ``label`` on it, or a grey panel saying ``missing``."""
    panel: np.ndarray
    if image is None:
        panel = np.full((height, round(height * 16 / 9), 3), 64, np.uint8)
        cv2.putText(panel, missing, (20, height // 2), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (255, 255, 255), 2, cv2.LINE_AA)
    else:
        h, w = image.shape[:2]
        panel = image if h == height else cv2.resize(image, (max(1, round(w * height / h)), height))
        panel = panel.copy()
    cv2.rectangle(panel, (0, 0), (panel.shape[1], 28), (0, 0, 0), -1)
    cv2.putText(panel, label, (8, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 1, cv2.LINE_AA)
    return panel


def _build_camera_health(cfg: CameraHealthConfig, ctx: RuleContext) -> CameraHealthRule:
    return CameraHealthRule(
        name=cfg.display_name(),
        camera_id=ctx.camera_id,
        config=cfg,
        stream_key=ctx.stream_key,
        cooldown_s=cfg.cooldown_s,
        live=ctx.live,
        references=ReferenceStore(ctx.state_dir) if ctx.state_dir is not None else None,
    )


CAMERA_HEALTH = RuleEntry(
    CameraHealthConfig,
    CameraHealthRule,
    _build_camera_health,
    "Camera health",
    example={"covered": {"min_s": 15}},
    order=70,
    section="health",
    needs_pixels=True,  # `campusguard replay` cannot run it over the stored tracks: it says so and goes on
)
