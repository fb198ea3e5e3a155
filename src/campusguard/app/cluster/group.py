"""`CameraGroup`: one group of cameras run by the ordinary `WatchService`, its events held for a driver.

A group is what one Ray actor runs (`campusguard.app.cluster.ray_executor`), and what the local
executor runs in-process; the class itself knows nothing of Ray. The group's `WatchService`
gets the whole config with the other groups' cameras disabled (so error messages still name
the right line of the file), no alert sinks, and an `Outbox` as its event store: committed
updates wait there, numbered, until the driver acknowledges them (`CameraGroup.pull`). The
driver owns the real store and the sinks, so every incident reaches them once.

Delivery is at least once: the driver acknowledges a batch only in its next pull, after it
has committed the batch. A restarted group (new process, new `incarnation`) starts numbering
again from 1 and ignores acknowledgements meant for its predecessor.

For a console (``serve --ray``) a group also keeps, on its own node, what the operators look
at: each camera's latest frame (a `FrameHub`: drawn and JPEG-encoded only when asked, by
`CameraGroup.frame_jpeg`) and, with `MediaOptions`, incident snapshots and clips (a
`ClipRecorder`) in a private folder, handed out as bytes by `CameraGroup.media`. Zone and line
edits arrive as a newer `ConfigSpec` (`CameraGroup.check_config`, `CameraGroup.set_config`, and
with every pull, so a restarted group starts with them).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from campusguard.app.config import CameraConfig, LoadedConfig, WatchConfig
from campusguard.app.engine.sources import CameraState, FrameSource
from campusguard.app.engine.wiring import CameraParts, DetectorFactory, default_detector_factory, open_camera
from campusguard.app.event_side import EventSide
from campusguard.app.events.types import Event
from campusguard.app.media.clips import ClipRecorder
from campusguard.app.media.live import FrameHub, LiveFrame
from campusguard.app.media.redact import redacted_path
from campusguard.app.service import WatchService
from campusguard.errors import CampusGuardError

__all__ = [
    "METRIC_COUNTERS",
    "Ack",
    "Batch",
    "CameraGroup",
    "ClusterError",
    "ConfigSpec",
    "DetectorFactoryMaker",
    "FrameKey",
    "GroupUnavailableError",
    "MediaKind",
    "MediaOptions",
    "Outbox",
    "camera_groups",
    "group_config",
]

DetectorFactoryMaker = Callable[[LoadedConfig], DetectorFactory]
"""Builds a group's detector factory from its config (default: `default_detector_factory`)."""

METRIC_COUNTERS: tuple[str, ...] = (
    "frames_in",
    "frames_dropped",
    "frames_processed",
    "frames_detected",
    "detector_images",
    "frames_skipped",
    "frames_regions",
    "frames_gate_busy",
    "inference_ms_total",
    "gate_ms_total",
    "events",
    "reconnects",
)
"""The `CameraMetrics` counters a group reports to the driver (all grow from 0 per incarnation)."""


log = logging.getLogger("campusguard.app.cluster")

FrameKey = tuple[str, int]
"""Which frame a `CameraGroup.frame_jpeg` answer is: the group's incarnation and the frame's number in it."""

MediaKind = Literal["snapshot", "clip", "snapshot_redacted", "clip_redacted"]
"""An incident's snapshot or clip, or (blur by role) the redacted variant written next to it."""


class ClusterError(CampusGuardError):
    """The cluster cannot run the cameras: no Ray, no cluster at the address, a group that never started."""


class GroupUnavailableError(CampusGuardError):
    """A camera's group did not answer in time (its actor is restarting or its node is gone): try again."""


@dataclass(frozen=True)
class MediaOptions:
    """Incident media a group keeps for a console (``serve --ray``), in a private folder on its node.

    Snapshots go to ``outputs.snapshots_dir`` when the config names one, else to that folder.

    Attributes:
        clip_pre_s: seconds of video before an incident's start in its clip.
        clip_post_s: seconds after it.
    """

    clip_pre_s: float = 3.0
    clip_post_s: float = 3.0


def camera_groups(loaded: LoadedConfig) -> list[list[str]]:
    """The enabled cameras' ids cut, in config order, into groups of ``cluster.cameras_per_actor``."""
    ids = [c.id for c in loaded.config.cameras if c.enabled]
    size = loaded.config.cluster.cameras_per_actor
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def group_config(loaded: LoadedConfig, camera_ids: list[str]) -> LoadedConfig:
    """``loaded`` with only ``camera_ids`` enabled, no alert sinks and metrics left to the driver.

    Cameras keep their index, so a start-up error still names the camera's line in the file.
    """
    cfg = loaded.config
    keep = set(camera_ids)
    cameras = [c if c.id in keep else c.model_copy(update={"enabled": False}) for c in cfg.cameras]
    outputs = cfg.outputs.model_copy(update={"metrics_interval_s": 0.0, "metrics_file": None})
    config = cfg.model_copy(update={"cameras": cameras, "alerts": [], "outputs": outputs})
    return dataclasses.replace(loaded, config=config)


MAX_SHIPPED_TEXT = 64 * 1024
"""Largest config file text sent along to name lines in a group's start-up errors (bytes)."""


@dataclass(frozen=True)
class ConfigSpec:
    """A group's config in a form small enough to travel inline with a Ray call (kilobytes).

    Ray keeps larger constructor arguments in the object store, where a node's death can lose
    them and make the actor's restart fail; so the YAML node tree is not sent, and cameras of
    other groups travel as disabled stubs (they keep their index, so errors name the right line).

    Attributes:
        data: the group's `WatchConfig` as JSON-ready data.
        path: the config file's name, for error messages.
        text: the file's text when small (`MAX_SHIPPED_TEXT`), to find the line of a field.
    """

    data: dict[str, Any]
    path: str
    text: str | None

    @classmethod
    def of(cls, loaded: LoadedConfig, camera_ids: list[str], text: str | None = None) -> ConfigSpec:
        """The spec of ``camera_ids``' group (`group_config`) of ``loaded``.

        ``text``: the YAML text ``loaded`` was parsed from, when it is not (yet) the file's.
        """
        data = group_config(loaded, camera_ids).config.model_dump(mode="json")
        keep = set(camera_ids)
        data["cameras"] = [
            c if c["id"] in keep else {"id": c["id"], "source": c["source"], "enabled": False} for c in data["cameras"]
        ]
        path = Path(loaded.path)
        if text is None and path.is_file() and path.stat().st_size <= MAX_SHIPPED_TEXT:
            text = path.read_text(encoding="utf-8")
        elif text is not None and len(text.encode()) > MAX_SHIPPED_TEXT:
            text = None
        return cls(data, loaded.path, text)

    def load(self) -> LoadedConfig:
        """The `LoadedConfig` again (validated; with line numbers when the text came along)."""
        return LoadedConfig(WatchConfig.model_validate(self.data), self.path, None, self.text)


@dataclass(frozen=True)
class Ack:
    """The driver has committed every event of ``incarnation`` up to sequence number ``seq``."""

    incarnation: str
    seq: int


@dataclass(frozen=True)
class Batch:
    """What one `CameraGroup.pull` returns.

    Attributes:
        incarnation: random id of the group object that answered (a restarted actor has a new one).
        events: ``(seq, event)`` not yet acknowledged, oldest first; ``seq`` counts from 1.
        finished: every camera of the group has ended and ``events`` holds the last of its events.
        clean: with ``finished``, whether the group's service ran cleanly.
        metrics: per camera, the `METRIC_COUNTERS` of this incarnation, ``queue_depth``, and
            ``width`` and ``height`` once the camera is probed.
        states: per camera whose reader has started, its `CameraState` (`CameraReader.state`).
        error: a start-up error (one line, naming the config line); the group did not start.
    """

    incarnation: str
    events: list[tuple[int, Event]] = field(default_factory=list)
    finished: bool = False
    clean: bool = True
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    states: dict[str, CameraState] = field(default_factory=dict)
    error: str | None = None


class Outbox:
    """The group's event store (an `EventRecorder`): numbered updates kept until acknowledged (thread-safe).

    `record` is called by the service's event thread (``EventWorker``), `pending` and `ack` by
    the driver's pulls; `close` marks the end of the group's events.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: list[tuple[int, Event]] = []
        self._next = 1
        self.closed = False

    def record(self, event: Event) -> None:
        with self._lock:
            self._events.append((self._next, event))
            self._next += 1

    def close(self) -> None:
        with self._lock:
            self.closed = True

    def ack(self, seq: int) -> None:
        """Forget every event numbered ``seq`` or lower."""
        with self._lock:
            self._events = [(s, e) for s, e in self._events if s > seq]

    def pending(self, limit: int) -> tuple[list[tuple[int, Event]], bool]:
        """Up to ``limit`` unacknowledged events, and whether they are the last ones (closed, none after)."""
        with self._lock:
            batch = self._events[:limit]
            return batch, self.closed and len(batch) == len(self._events)


class CameraGroup:
    """Runs a group of cameras through `WatchService` and hands its events out in numbered batches.

    The service starts on the first `pull` (so a restarted actor, whose constructor Ray calls
    again, starts by itself when the driver next pulls).

    Args:
        loaded: the whole validated config, or its `ConfigSpec` for this group.
        camera_ids: the cameras of this group.
        detector_factory: builds the group's detector factory from the group's config.
        opener: opens a camera source (injectable for tests).
        max_batch: most events returned by one pull.
        media: keep incident snapshots and clips for a console (`CameraGroup.media`); ``None``: none
            beyond the config's ``outputs.snapshots_dir``.
    """

    def __init__(
        self,
        loaded: LoadedConfig | ConfigSpec,
        camera_ids: list[str],
        *,
        detector_factory: DetectorFactoryMaker | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
        max_batch: int = 256,
        media: MediaOptions | None = None,
    ) -> None:
        self.camera_ids = list(camera_ids)
        self.incarnation = uuid.uuid4().hex
        self.outbox = Outbox()
        self.max_batch = max_batch
        self.opener = opener
        self.make_detector_factory = detector_factory or default_detector_factory
        self.hub = FrameHub(self.camera_ids)
        self.media_dir: Path | None = None
        self.clips: ClipRecorder | None = None
        if media is not None:
            self.media_dir = Path(tempfile.mkdtemp(prefix=f"campusguard-group-{self.incarnation[:8]}-"))
            self.clips = ClipRecorder(self.media_dir / "clips", pre_s=media.clip_pre_s, post_s=media.clip_post_s)
        self._snapshots: dict[str, str] = {}  # event id -> snapshot file written by this incarnation
        self.config_version = 0  # of the last `set_config` (0: the constructor's)
        self.loaded = self._group_loaded(loaded.load() if isinstance(loaded, ConfigSpec) else loaded)
        self.service = self._new_service()
        self._started = False
        self._error: str | None = None
        # the parts `check_config` built for (spec, camera): `set_config` of the same spec applies
        # them, so a zone edit builds its camera's zones and rules once
        self._checked: tuple[ConfigSpec, str, CameraParts] | None = None
        self._clean: bool | None = None

    def _group_loaded(self, loaded: LoadedConfig) -> LoadedConfig:
        """``loaded`` as this group runs it: `group_config`, and snapshots in the media folder when
        the config names no folder."""
        group = group_config(loaded, self.camera_ids)
        if self.media_dir is not None and group.config.outputs.snapshots_dir is None:
            outputs = group.config.outputs.model_copy(update={"snapshots_dir": str(self.media_dir / "snapshots")})
            group.config = group.config.model_copy(update={"outputs": outputs})
        return group

    def _new_service(self) -> WatchService:
        return WatchService(
            self.loaded,
            detector_factory=self.make_detector_factory(self.loaded),
            opener=self.opener,
            out=io.StringIO(),
            on_event=self._on_event,
            on_frame=self._on_frame,
            # the driver spools, ends orphans and keeps the rows', logs' and evidence's retention; the
            # recordings' retention runs here, where they are written
            events=EventSide.group(self.loaded, self.outbox),
        )

    def pull(self, ack: Ack | None = None, stop: bool = False, config: tuple[int, ConfigSpec] | None = None) -> Batch:
        """Forget what ``ack`` acknowledges (if it is meant for this incarnation); return what is pending.

        The first call starts the service; a start-up failure comes back as ``Batch.error``.
        ``stop``: the driver is stopping; a group restarted after `stop` was sent learns it here.
        ``config``: the latest ``(version, spec)`` sent by `set_config` (zone edits), so a
        restarted group starts with it.
        """
        if config is not None:
            self.set_config(*config)
        if not self._started:
            self._start()
        if self._error is not None:
            return Batch(self.incarnation, finished=True, clean=False, error=self._error)
        if stop and not self.service.stop_event.is_set():
            self.service.stop()
        if ack is not None and ack.incarnation == self.incarnation:
            self.outbox.ack(ack.seq)
        events, last = self.outbox.pending(self.max_batch)
        finished = last and self.service.wait(0)
        if finished and self._clean is None:
            self._clean = self.service.finish(0)
        return Batch(
            self.incarnation,
            events,
            finished=finished,
            clean=bool(self._clean) if finished else True,
            metrics=self.metrics(),
            states=self.camera_states(),
        )

    def stop(self) -> None:
        """Ask the cameras to end; open incidents are ended and come out in the next pulls."""
        self.service.stop()

    def metrics(self) -> dict[str, dict[str, float]]:
        """Per camera: the `METRIC_COUNTERS` so far, the current ``queue_depth``, and the frame's
        ``width`` and ``height`` (pixels) once probed."""
        if self._started and self._error is None:
            self.service.refresh_metrics()
        out = {}
        for cam_id, m in self.service.metrics.items():
            values = {k: float(getattr(m, k)) for k in METRIC_COUNTERS}
            values["queue_depth"] = float(m.queue_depth())
            probe = self.service.probes.get(cam_id)
            if probe is not None:
                values["width"], values["height"] = map(float, probe.resolution_wh)
            out[cam_id] = values
        return out

    def camera_states(self) -> dict[str, CameraState]:
        """Each started camera's `CameraState`, worked out by its reader like a local pipeline's."""
        failed = self.service.failed.is_set()
        return {r.camera_id: r.state(failed) for r in self.service.readers}

    # what a console asks for ------------------------------------------------------------------
    def frame_jpeg(self, camera_id: str, known: FrameKey | None = None) -> tuple[FrameKey, bytes | None] | None:
        """The camera's latest annotated frame as JPEG (drawn and encoded now, once per frame).

        Returns ``None`` before its first frame, else the frame's key and the JPEG, or ``None``
        for the bytes when the frame is still ``known`` (nothing new to send).

        Raises:
            KeyError: not a camera of this group.
        """
        got = self.hub.latest_jpeg(camera_id, redacted=True)  # blur by role is not told apart on Ray: all get it
        if got is None:
            return None
        key = (self.incarnation, got[0])
        return key, None if key == known else got[1]

    def media(self, kind: MediaKind, event_id: str) -> bytes | None:
        """The JPEG snapshot or MP4 clip this incarnation wrote for an incident, or ``None`` (none, or not yet)."""
        if kind in ("snapshot", "snapshot_redacted"):
            name = self._snapshots.get(event_id)
            path = None if name is None else Path(name)
        else:
            path = None if self.clips is None else self.clips.path_for(event_id)
        if path is not None and kind.endswith("_redacted"):
            path = redacted_path(path)
        if path is None or not path.is_file():
            return None
        return path.read_bytes()

    def check_config(self, spec: ConfigSpec, camera_id: str) -> str | None:
        """Whether ``spec`` can run ``camera_id``: its zones, lines and rules built against the
        camera's real frame size and the model's classes. Returns the error (one line) or ``None``
        (also when the camera is not running, so nothing can be checked)."""
        if not self._started or self._error is not None:
            return None
        try:
            parts = self.service.build_camera_parts(self._group_loaded(spec.load()), camera_id)
        except KeyError:
            return None
        except CampusGuardError as exc:
            return str(exc)
        self._checked = (spec, camera_id, parts)
        return None

    def _checked_parts(self, spec: ConfigSpec, camera_id: str) -> CameraParts | None:
        """The parts `check_config` built for ``spec`` and ``camera_id`` (taken: applied once), or None."""
        checked, self._checked = self._checked, None
        if checked is None or checked[1] != camera_id or checked[0] != spec:
            return None
        return checked[2]

    def set_config(self, version: int, spec: ConfigSpec) -> None:
        """Run with ``spec`` from now on (zone and line edits), unless ``version`` is not newer than the last.

        Before the start the service is made anew with it; after, the cameras whose section
        changed get their new zones, lines and rules like `WatchService.apply_camera_parts`
        (before their next frame; rules the edit left as they were keep their open incidents).
        """
        if version <= self.config_version:
            return
        loaded = self._group_loaded(spec.load())
        old = {c.id: c for c in self.loaded.config.cameras}
        self.config_version = version
        if not self._started:
            self.loaded = loaded
            self.service = self._new_service()
            return
        if self._error is not None:
            return
        changed = [c.id for c in loaded.config.cameras if c.id in self.service.analytics and c != old.get(c.id)]
        parts = {}
        for cam_id in changed:
            checked = self._checked_parts(spec, cam_id) if len(changed) == 1 else None
            if checked is not None:
                parts[cam_id] = checked
                continue
            try:
                parts[cam_id] = self.service.build_camera_parts(loaded, cam_id)
            except CampusGuardError as exc:  # checked before it was sent; keep the old rules
                log.error("camera %s keeps its zones: %s", cam_id, exc)
        for cam_id, p in parts.items():
            self.service.apply_camera_parts(loaded, cam_id, p)
        self.loaded = loaded

    def camera_zones(self, camera_id: str) -> dict[str, list[list[float]]]:
        """The zones the camera's rules run with now (name to polygon, pixels); for checks and tests."""
        geometry = self.service.analytics[camera_id].geometry
        return {name: polygon.tolist() for name, polygon in geometry.zones}

    def discard_media(self) -> None:
        """Delete the private media folder (the group is ending)."""
        if self.media_dir is not None:
            shutil.rmtree(self.media_dir, ignore_errors=True)

    # pipeline hooks (the group's service threads) -----------------------------------------------
    def _on_frame(self, frame: LiveFrame) -> None:
        self.hub.publish(frame)
        if self.clips is not None:
            self.clips.add(frame)

    def _on_event(self, event: Event) -> None:
        if event.phase != "start":
            return
        if event.snapshot_path:
            self._snapshots[event.event_id] = event.snapshot_path
        if self.clips is not None:
            self.clips.request(event.camera_id, event.event_id, event.start_s)

    def _start(self) -> None:
        self._started = True
        if self.clips is not None:
            self.clips.start()
        try:
            self.service.start()
        except CampusGuardError as exc:
            self._error = str(exc)
