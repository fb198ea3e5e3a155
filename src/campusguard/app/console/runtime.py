"""`ConsoleRuntime`: the running pipeline as the console's HTTP layer sees it.

It starts the same `WatchService` as ``campusguard watch`` and adds what a console needs on
the side of the pipeline, none of which can slow it down:

- `FrameHub` (live view and snapshots: the analytics threads swap in their latest frame;
  JPEG encoding only while someone watches);
- `ClipRecorder` (a bounded ring buffer of recent frames per camera; an MP4 clip around
  each incident's start, written on its own thread);
- `EventBus` (each event, read back from the store after its commit, to every subscriber);
- a Prometheus registry (`campusguard.app.prom`), read at scrape time;
- live zone and line edits (`put_zones`): validated by the config models, swapped into the
  running rules between two frames, and written to the YAML file atomically with a backup.

With ``ray_address`` (``serve --ray``) the cameras run in groups on Ray actors
(`campusguard.app.cluster`) and the same features reach them through actor calls: the live view
pulls each watched camera's latest JPEG from its actor (`PulledFrameHub`), incident snapshots
and clips are copied from the actors into the media folders (`ClusterMedia`), and zone edits are
checked and applied by the camera's actor (and kept for its restarts).

Everything here is thread-safe and synchronous; the web layer calls it from worker threads.
"""

from __future__ import annotations

import logging
import re
import shutil
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

import yaml

from campusguard.app.clips import ClipRecorder
from campusguard.app.cluster.group import GroupUnavailableError, MediaKind, MediaOptions
from campusguard.app.config import load_config, parse_config
from campusguard.app.console.cluster_media import ClusterMedia
from campusguard.app.durable import replace_durably
from campusguard.app.eventbus import EventBus, EventSubscription
from campusguard.app.events import open_event_store
from campusguard.app.events.factory import storage_backend
from campusguard.app.events.recorder import EventRecorder
from campusguard.app.events.store import InterruptibleStore
from campusguard.app.events.types import Event
from campusguard.app.live import FrameHub, LiveFrame, PulledFrameHub, Viewer
from campusguard.app.prom import CameraSample, PipelineSample, build_registry
from campusguard.app.service import DetectorFactory, WatchService
from campusguard.errors import CampusGuardError, ConfigError

__all__ = ["CameraState", "CameraStatus", "ConsoleRuntime", "GroupUnavailableError"]

CameraState = Literal["starting", "live", "reconnecting", "stopped", "failed"]

log = logging.getLogger("campusguard.app.console")

_EVENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")  # media names are built from ids; nothing else gets in


@dataclass(frozen=True)
class CameraStatus:
    """What the camera wall shows of one camera.

    Attributes:
        name: camera id.
        state: ``starting`` (no frame yet), ``live``, ``reconnecting`` (source lost or stalled),
            ``stopped`` (stream ended or the pipeline stopped), ``failed`` (reader or pipeline error).
        input_fps: frames read per second over the last few seconds.
        processed_fps: frames processed per second over the last few seconds.
        dropped_frames: frames dropped so far by the drop-oldest queue.
        reconnects: times the source was reopened.
        last_frame_time: unix time of the last frame read, or ``None``.
        width: frame width in pixels (``None`` before the first frame).
        height: frame height in pixels.
    """

    name: str
    state: CameraState
    input_fps: float
    processed_fps: float
    dropped_frames: int
    reconnects: int
    last_frame_time: float | None
    width: int | None
    height: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _KeepOpenStore:
    """The store as the pipeline sees it (`EventRecorder`): its ``close`` at the end of the streams
    is ignored, so the console can still read events after a file source ended; the runtime closes it.
    A stop cuts a PostgreSQL store's retries short as it would the store's own (`InterruptibleStore`)."""

    def __init__(self, store: EventRecorder) -> None:
        self._store = store

    def record(self, event: Event) -> None:
        self._store.record(event)

    def stop_retrying(self) -> None:
        if isinstance(self._store, InterruptibleStore):
            self._store.stop_retrying()

    def close(self) -> None:
        pass


class _Rates:
    """Input and processed frame rates per camera over a sliding window of samples."""

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._samples: dict[str, deque[tuple[float, int, int]]] = {}
        self._lock = threading.Lock()

    def add(self, camera: str, now: float, frames_in: int, frames_processed: int) -> None:
        with self._lock:
            q = self._samples.setdefault(camera, deque())
            q.append((now, frames_in, frames_processed))
            while len(q) > 2 and now - q[0][0] > self.window_s:
                q.popleft()

    def fps(self, camera: str) -> tuple[float, float]:
        """``(input fps, processed fps)``; zeros with fewer than two samples."""
        with self._lock:
            q = self._samples.get(camera)
            if not q or len(q) < 2:
                return 0.0, 0.0
            (t0, i0, p0), (t1, i1, p1) = q[0], q[-1]
        dt = t1 - t0
        return (round((i1 - i0) / dt, 2), round((p1 - p0) / dt, 2)) if dt > 0 else (0.0, 0.0)


class ConsoleRuntime:
    """The watch pipeline of one config file, with live view, clips, event push, metrics and zone edits.

    Args:
        config_path: the watch YAML (read like ``campusguard watch``; zone edits rewrite it).
        detector_factory: ``(model, device, imgsz) -> detector`` (default: `campusguard.Detector`).
        media_dir: where clips (and snapshots, unless the config names a folder) are written;
            default ``<folder of the SQLite file>/media``.
        out: where the pipeline's metrics lines and stdout alerts go.
        live_fps: most live-view frames per second per camera.
        clip_pre_s: seconds of video kept before an incident's start in its clip.
        clip_post_s: seconds after it.
        ready_within_s: `ready` needs a frame from every camera within this many seconds.
        ray_address: run the cameras in groups on the Ray cluster at this address (``serve --ray``);
            frames, media and zone edits then go through actor calls, and a group that does
            not answer in time (restarting) raises `GroupUnavailableError`.
        group_detector_factory: with ``ray_address``, builds each group's detector factory
            (default: `campusguard.Detector` from the config).
        cluster_timeout_s: with ``ray_address``, how long a frame or zone request waits for
            its group's actor, seconds.

    Raises:
        ConfigError: the config file is missing or invalid (one line naming file, line, field).
    """

    def __init__(
        self,
        config_path: Path,
        *,
        detector_factory: DetectorFactory | None = None,
        media_dir: Path | None = None,
        out: TextIO | None = None,
        live_fps: float = 15.0,
        clip_pre_s: float = 3.0,
        clip_post_s: float = 3.0,
        ready_within_s: float = 5.0,
        ray_address: str | None = None,
        group_detector_factory: Callable[[Any], DetectorFactory] | None = None,
        cluster_timeout_s: float = 5.0,
    ) -> None:
        self.config_path = Path(config_path)
        self.ray_address = ray_address
        self.group_detector_factory = group_detector_factory
        self.loaded = load_config(self.config_path)
        config = self.loaded.config
        self.media_dir = Path(media_dir) if media_dir else Path(config.storage.sqlite).parent / "media"
        if config.outputs.snapshots_dir is None and ray_address is None:  # on Ray: each actor's own folder
            outputs = config.outputs.model_copy(update={"snapshots_dir": str(self.media_dir / "snapshots")})
            self.loaded.config = config.model_copy(update={"outputs": outputs})
        self.snapshots_dir = Path(self.loaded.config.outputs.snapshots_dir or self.media_dir / "snapshots")
        self.clips_dir = self.media_dir / "clips"
        self.detector_factory = detector_factory
        self.out = out or sys.stdout
        self.ready_within_s = ready_within_s
        self._cameras = [c.id for c in self.loaded.config.cameras if c.enabled]
        storage = self.loaded.config.storage
        try:
            self.store: Any = open_event_store(storage)
        except CampusGuardError as exc:
            raise self.loaded.error(("storage", storage_backend(storage)), str(exc)) from None
        self.cluster_timeout_s = cluster_timeout_s
        self.executor: Any = None  # with ray_address: the `RayExecutor` of the camera groups
        self.hub: FrameHub = (
            FrameHub(self._cameras, max_fps=live_fps)
            if ray_address is None
            else PulledFrameHub(self._cameras, self._pull_frame, max_fps=live_fps)
        )
        self.clips = ClipRecorder(self.clips_dir, pre_s=clip_pre_s, post_s=clip_post_s)
        self.cluster_media = ClusterMedia(self._pull_media) if ray_address is not None else None
        self.bus = EventBus()
        self.registry = build_registry(self._prom_sample)
        self.service: Any = None  # WatchService, or the cluster driver (`ClusterWatch`) with ray_address
        self._rates = _Rates()
        self._event_starts: Counter[tuple[str, str, str]] = Counter()
        self._event_starts_lock = threading.Lock()  # written by the event thread, read by scrapes
        self._zones_lock = threading.Lock()
        self._monitor_stop = threading.Event()
        self._monitor: threading.Thread | None = None
        self._stopped = False

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the pipeline (probe sources, load models, start workers) and the side threads.

        Raises:
            ConfigError, SourceError, ModelLoadError: what ``campusguard watch`` would refuse.
        """
        service: Any
        if self.ray_address is not None:
            from campusguard.app.cluster.driver import ClusterWatch
            from campusguard.app.cluster.ray_executor import RayExecutor

            self.executor = RayExecutor(
                self.loaded,
                address=self.ray_address,
                detector_factory=self.group_detector_factory,
                media=MediaOptions(self.clips.pre_s, self.clips.post_s),
            )
            service = ClusterWatch(
                self.loaded, self.executor, out=self.out, on_event=self._on_event, store=_KeepOpenStore(self.store)
            )
        else:
            service = WatchService(
                self.loaded,
                detector_factory=self.detector_factory,
                out=self.out,
                on_event=self._on_event,
                store=_KeepOpenStore(self.store),
                on_frame=self._on_frame,
            )
        if self.cluster_media is not None:
            self.cluster_media.start()  # before the groups' first events
        try:
            service.start()
        except BaseException:
            self._release_actors()
            raise
        self.service = service
        self.clips.start()
        self._monitor = threading.Thread(target=self._watch_rates, name="console-monitor", daemon=True)
        self._monitor.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """End open events (committed), write pending clips, close viewers, subscriptions and the store."""
        if self._stopped:
            return
        self._stopped = True
        if self.service is not None:
            self.service.stop()
            self.service.finish(timeout_s)
        self._monitor_stop.set()
        if self._monitor is not None:
            self._monitor.join(timeout=2.0)
        if self.cluster_media is not None:
            self.cluster_media.close()
        self._release_actors()
        self.clips.close()
        self.hub.close()
        self.bus.close()
        self.store.close()

    def _release_actors(self) -> None:
        """On Ray: end the camera groups' actors (they outlive the driver for the live view and media)."""
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.release()

    def __enter__(self) -> ConsoleRuntime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # pipeline hooks (pipeline threads) --------------------------------------------------------
    def _on_frame(self, frame: LiveFrame) -> None:
        self.hub.publish(frame)
        self.clips.add(frame)

    def _on_event(self, event: Event) -> None:
        """Called by the event worker after the store's commit: counters, clip, push."""
        if event.phase == "start":
            with self._event_starts_lock:
                self._event_starts[(event.camera_id, event.rule_name, event.rule_kind)] += 1
            if self.cluster_media is None:
                self.clips.request(event.camera_id, event.event_id, event.start_s)
            elif _EVENT_ID.match(event.event_id):  # on Ray: copied from the camera's actor, on its own thread
                if event.snapshot_path:
                    self.cluster_media.request(
                        event.camera_id, "snapshot", event.event_id, self._cluster_snapshot(event.event_id), 30.0
                    )
                within_s = self.clips.pre_s + self.clips.post_s + 60.0
                path = self.clips.path_for(event.event_id)
                self.cluster_media.request(event.camera_id, "clip", event.event_id, path, within_s)
        data = self.event_json(event.event_id)
        if data is not None:
            self.bus.publish(data)

    def _watch_rates(self) -> None:
        while not self._monitor_stop.wait(1.0):
            self._sample_rates()

    def _sample_rates(self) -> None:
        service = self.service
        if service is None:
            return
        service.refresh_metrics()
        now = time.monotonic()
        for cam, m in list(service.metrics.items()):
            self._rates.add(cam, now, m.frames_in, m.frames_processed)

    # cameras --------------------------------------------------------------------------------
    def camera_names(self) -> list[str]:
        """Ids of the enabled cameras, in config order."""
        return list(self._cameras)

    def _check_camera(self, camera: str) -> None:
        if camera not in self._cameras:
            raise KeyError(camera)

    def camera_status(self) -> list[CameraStatus]:
        """Every enabled camera's state and rates."""
        return [self._status(c) for c in self._cameras]

    def _status(self, camera: str) -> CameraStatus:
        service = self.service
        if self.ray_address is not None and service is not None:
            return self._cluster_status(camera)
        reader = None if service is None else next((r for r in service.readers if r.camera_id == camera), None)
        if service is None or reader is None:
            state: CameraState = "stopped" if self._stopped else "starting"
            return CameraStatus(camera, state, 0.0, 0.0, 0, 0, None, None, None)
        stats = reader.stats
        now = time.monotonic()
        if reader.ended_reason is not None:
            state = (
                "failed" if reader.ended_reason.startswith("reader failed") or service.failed.is_set() else "stopped"
            )
        elif service.failed.is_set():
            state = "failed"
        elif stats.frames_read == 0:
            state = "starting"
        elif not stats.connected or now - stats.last_frame_at > reader.stall_timeout_s:
            state = "reconnecting"
        else:
            state = "live"
        input_fps, processed_fps = self._rates.fps(camera)
        last = None if stats.frames_read == 0 else time.time() - (now - stats.last_frame_at)
        wh = stats.resolution_wh
        return CameraStatus(
            name=camera,
            state=state,
            input_fps=input_fps,
            processed_fps=processed_fps,
            dropped_frames=reader.queue.dropped,
            reconnects=stats.reconnects,
            last_frame_time=last,
            width=None if wh is None else wh[0],
            height=None if wh is None else wh[1],
        )

    def _cluster_status(self, camera: str) -> CameraStatus:
        """A camera on a Ray actor: state, counters and frame size as the driver last pulled them (no frame time)."""
        m = self.service.metrics.get(camera)
        input_fps, processed_fps = self._rates.fps(camera)
        dropped, reconnects = (0, 0) if m is None else (m.frames_dropped, m.reconnects)
        state: Any = self.service.camera_state(camera)
        width, height = self.service.frame_sizes.get(camera, (None, None))
        return CameraStatus(camera, state, input_fps, processed_fps, dropped, reconnects, None, width, height)

    def ready(self) -> bool:
        """True when every camera's stream is running and read a frame within ``ready_within_s`` seconds."""
        service = self.service
        if self.ray_address is not None:  # on Ray: every camera live as of its group's last answer
            return service is not None and not self._stopped and all(s.state == "live" for s in self.camera_status())
        if service is None or self._stopped or not service.readers:
            return False
        now = time.monotonic()
        return all(
            r.ended_reason is None and r.stats.frames_read > 0 and now - r.stats.last_frame_at <= self.ready_within_s
            for r in service.readers
        )

    def snapshot_jpeg(self, camera: str) -> bytes | None:
        """JPEG of the camera's latest annotated frame (``None`` before the first); ``KeyError`` if unknown.

        Raises:
            GroupUnavailableError: on Ray, the camera's group did not answer in time (restarting).
        """
        self._check_camera(camera)
        return self.hub.snapshot_jpeg(camera)

    def open_viewer(self, camera: str, maxsize: int = 2) -> Viewer:
        """A live viewer (``get(timeout) -> JPEG bytes | None``, ``close()``); ``KeyError`` if unknown.

        On Ray a viewer gets no frames while the camera's group restarts.
        """
        self._check_camera(camera)
        return self.hub.open_viewer(camera, maxsize)

    def _pull_frame(self, camera: str, known: Any) -> Any:
        """The camera's latest JPEG from its group's actor (`PulledFrameHub`'s fetch); ``None`` before the start."""
        executor = self.executor
        if executor is None or not executor.groups:
            return None
        return executor.frame_jpeg(camera, known, self.cluster_timeout_s)

    def _pull_media(self, camera: str, kind: MediaKind, event_id: str) -> bytes | None:
        executor = self.executor
        if executor is None or not executor.groups:
            return None
        data: bytes | None = executor.media(camera, kind, event_id, self.cluster_timeout_s)
        return data

    def _cluster_snapshot(self, event_id: str) -> Path:
        """Where an incident's snapshot copied from its camera's actor is kept (``serve --ray``)."""
        return self.media_dir / "cluster-snapshots" / f"{event_id}.jpg"

    # events ---------------------------------------------------------------------------------
    def event_json(self, event_id: str) -> dict[str, Any] | None:
        """The stored event as the API shows it (read from the store), or ``None``."""
        get_record: Callable[[str], Any] | None = getattr(self.store, "get_record", None)
        record = get_record(event_id) if get_record is not None else self.store.get(event_id)
        return None if record is None else dict(record.to_dict())

    def subscribe_events(self, maxsize: int = 256) -> EventSubscription:
        """Every event update from now on, after its commit (``get(timeout) -> dict | None``, ``close()``)."""
        return self.bus.subscribe(maxsize)

    def publish_event_update(self, event: dict[str, Any]) -> None:
        """Push a change made outside the pipeline (acknowledge, resolve) to the subscribers."""
        self.bus.publish(event)

    def event_media(self, event_id: str, kind: Literal["snapshot", "clip"]) -> Path | None:
        """The event's snapshot JPEG or clip MP4, only if it is a file under the runtime's media folders."""
        if not isinstance(event_id, str) or not _EVENT_ID.match(event_id):
            return None
        if kind == "clip":
            path = self.clips.path_for(event_id)
            return path if path.is_file() else None
        if kind != "snapshot":
            return None
        if self.ray_address is not None:  # the actors' paths are on their nodes: only the copies count
            copy = self._cluster_snapshot(event_id)
            return copy if copy.is_file() else None
        event = self.store.get(event_id)
        if event is None or not event.snapshot_path:
            return None
        path = Path(event.snapshot_path).resolve()
        roots = [self.snapshots_dir.resolve(), self.media_dir.resolve()]
        if not any(path.is_relative_to(root) for root in roots) or not path.is_file():
            return None
        return path

    # zones ----------------------------------------------------------------------------------
    def get_zones(self, camera: str) -> dict[str, Any]:
        """``{"zones": [...], "lines": [...]}`` of a camera, as in the config file."""
        self._check_camera(camera)
        cam = next(c for c in self.loaded.config.cameras if c.id == camera)
        return {
            "zones": [z.model_dump(mode="json") for z in cam.zones],
            "lines": [ln.model_dump(mode="json") for ln in cam.lines],
        }

    def put_zones(self, camera: str, body: dict[str, Any]) -> dict[str, Any]:
        """Replace a camera's zones and lines: validate, apply live, rewrite the YAML (previous kept as ``.bak``).

        ``body`` is ``{"zones": [...], "lines": [...]}`` (a missing key keeps the current list).
        Rules naming a zone or line that no longer exists make it invalid.

        Raises:
            KeyError: unknown camera.
            ConfigError: the body is invalid (names the field), a zone leaves the camera's frame,
                or the config file cannot be rewritten.
            GroupUnavailableError: on Ray, the camera's group did not answer the check in time
                (restarting); nothing changed. (When only the sending goes unanswered, the file is
                saved and the group gets the edit with its next pull.)
        """
        self._check_camera(camera)
        if not isinstance(body, dict):
            raise ConfigError("zones body must be an object with 'zones' and 'lines'")
        unknown = sorted(set(body) - {"zones", "lines"})
        if unknown:
            raise ConfigError(f"zones body: unknown key {unknown[0]!r}; expected 'zones' and 'lines'")
        with self._zones_lock:
            data = self._config_data()
            index = next(i for i, c in enumerate(self.loaded.config.cameras) if c.id == camera)
            cam_data = data["cameras"][index]
            for key in ("zones", "lines"):
                if key in body:
                    cam_data[key] = body[key]
            where = f"{self.config_path} (zones of camera {camera!r} as sent)"
            loaded = parse_config(yaml.safe_dump(data, sort_keys=False), where)
            new_cam = loaded.config.cameras[index]
            cam_data["zones"] = [z.model_dump(mode="json", exclude_defaults=True) for z in new_cam.zones]
            cam_data["lines"] = [ln.model_dump(mode="json", exclude_defaults=True) for ln in new_cam.lines]
            text = yaml.safe_dump(data, sort_keys=False)
            loaded = parse_config(text, str(self.config_path))
            loaded.config = loaded.config.model_copy(update={"outputs": self.loaded.config.outputs})
            if self.ray_address is not None:  # checked against the frame size on the camera's actor
                executor = self.executor
                running = executor is not None and bool(executor.groups)  # not before the start or after the stop
                if running:
                    executor.check_config(loaded, text, camera, self.cluster_timeout_s)
                self._write_config(text)
                self.loaded = loaded
                try:
                    if running:
                        executor.set_config(loaded, text, camera, self.cluster_timeout_s)
                except GroupUnavailableError as exc:  # saved; the group gets it with its next pull
                    log.warning("zones of camera %s saved; its group gets them when it answers: %s", camera, exc)
                return self.get_zones(camera)
            service = self.service
            parts = (
                service.build_camera_parts(loaded, camera)
                if service is not None and camera in service.analytics
                else None
            )
            self._write_config(text)
            if service is not None and parts is not None:
                service.apply_camera_parts(loaded, camera, parts)
            self.loaded = loaded
        return self.get_zones(camera)

    def _config_data(self) -> dict[str, Any]:
        try:
            data = yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{self.config_path}: cannot read the config file: {exc.__class__.__name__}") from None
        if not isinstance(data, dict) or not isinstance(data.get("cameras"), list):
            raise ConfigError(f"{self.config_path}: the config file no longer has a cameras list")
        return data

    def _write_config(self, text: str) -> None:
        """Write the config durably (`campusguard.app.durable.replace_durably`); keep the old one as ``.bak``."""
        path = self.config_path
        header = f"# rewritten by the CampusGuard console (zones/lines edit); previous version in {path.name}.bak\n"
        try:
            shutil.copy2(path, path.with_name(path.name + ".bak"))
            replace_durably(path, (header + text).encode("utf-8"))
        except OSError as exc:
            raise ConfigError(f"{path}: cannot rewrite the config file: {exc}") from None

    # metrics --------------------------------------------------------------------------------
    def _prom_sample(self) -> PipelineSample:
        with self._event_starts_lock:
            events = dict(self._event_starts)
        service = self.service
        if service is None:
            return PipelineSample((), events)
        service.refresh_metrics()
        worker = service.event_worker  # WatchService's and ClusterWatch's `EventWorker`
        store_retries, spooled = (0, 0) if worker is None else (worker.store_retries, worker.spooled)
        cams = []
        for cam, m in list(service.metrics.items()):
            input_fps, processed_fps = self._rates.fps(cam)
            cams.append(
                CameraSample(
                    camera=cam,
                    frames_read=m.frames_in,
                    frames_processed=m.frames_processed,
                    frames_dropped=m.frames_dropped,
                    reconnects=m.reconnects,
                    input_fps=input_fps,
                    processed_fps=processed_fps,
                    queue_depth=int(m.queue_depth()),
                    inference_seconds=m.inference_seconds,
                    detector_images=m.detector_images,
                    frames_skipped=m.frames_skipped,
                    frames_regions=m.frames_regions,
                )
            )
        return PipelineSample(cams, events, store_retries, spooled)
