"""`WatchService`: the running `campusguard watch`, assembled from its config.

`WatchService.start` reads like the system diagram: probe the cameras, load the shared
detectors, build each camera's tracker and rules, open the event store and alert sinks, then
start the workers from the sources downstream. `stop` asks everything to wind down; the ends
of the streams drain through every stage so open events are ended (``details.interrupted``)
and committed before the store and the sinks close.

A network camera that cannot be opened at start does not stop the others: it is ``offline``,
its reader retries with back-off, and its zones and rules are built for the real frame when
its first frame comes (`_camera_online`). A local file that does not exist stays a start-up
error.

What each box of the diagram is built from lives elsewhere: the config-to-objects factories
(detectors, sources and readers, motion gates) in `campusguard.app.engine.wiring`, the event side
(store, sinks, spool, a dead run's incidents, retention, and who owns each) in
`campusguard.app.event_side`, the workers in `campusguard.app.engine`, and running a service until
a signal in `campusguard.app.signals`.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TextIO

import numpy as np

from campusguard.app.config import CameraConfig, LoadedConfig, source_kind
from campusguard.app.engine.analytics import AnalyticsWorker
from campusguard.app.engine.blas import keep_blas_on_one_thread
from campusguard.app.engine.detection import DetectionWorker, TrackedBoxes
from campusguard.app.engine.metrics import CameraMetrics, MetricsReporter
from campusguard.app.engine.sources import CameraReader, EndOfStream, FrameQueue, FrameSource, PrependedSource
from campusguard.app.engine.stages import DetectorLike, WarmingDetector, put_until
from campusguard.app.engine.watchdog import Watchdog, WorkerThread
from campusguard.app.engine.wiring import (
    CameraParts,
    DetectorFactory,
    SourceProbe,
    build_camera,
    build_health_only,
    default_detector_factory,
    detector_key,
    motion_gate_for,
    open_camera,
    probe_of,
    probe_source,
    reader_for,
)
from campusguard.app.engine.writer import EventMessage, EventWorker
from campusguard.app.event_side import EventSide, OpenedEvents
from campusguard.app.events.types import Event
from campusguard.app.infra.diskspace import disk_health
from campusguard.app.infra.sdnotify import systemd
from campusguard.app.lifecycle import StopAndWait
from campusguard.app.media.annotate import AnnotatedVideoWriter, finish_dead_segments
from campusguard.app.media.live import LiveFrame
from campusguard.app.retention import RetentionCleaner
from campusguard.app.retention.stage import RetentionStage
from campusguard.app.rules import RuleEngine
from campusguard.app.rules.base import PictureRule
from campusguard.app.rules.camera_health import HealthStatus
from campusguard.app.tracks.recorder import TrackRecorder, TrackWriter
from campusguard.app.tracks.segments import segment_meta
from campusguard.errors import CampusGuardError, ConfigError, SourceError

__all__ = ["WatchService"]

log = logging.getLogger("campusguard.app.service")


class WatchService(StopAndWait):
    """The camera app: readers, shared detection, per-camera analytics, event storage and alerts.

    Args:
        loaded: the validated config (with its line numbers for start-up errors).
        detector_factory: ``(model, device, imgsz) -> detector``; default builds `campusguard.Detector`.
        opener: opens a camera source (injectable for tests).
        out: where metrics and stdout alerts go.
        on_event: called with every stored event update (after the sinks).
        events: the event side (`EventSide`): store, sinks, spool, a dead run's incidents and
            retention, as its `Ownership` says; opened by `start` once the cameras are probed.
            Default: `EventSide.owned` (``watch`` alone, the config's storage).
        on_frame: called by each camera's analytics thread with every processed frame (the
            console's live view and clip buffer); must return at once.
        stream_keys: camera id to the key of the recording it reads, put into its event ids
            (`campusguard scan`: the file's resolved path); cameras not named get none.
        clips_dir: serve's clip folder, looked after by retention.
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        detector_factory: DetectorFactory | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
        out: TextIO | None = None,
        on_event: Callable[[Event], None] | None = None,
        on_frame: Callable[[LiveFrame], None] | None = None,
        stream_keys: dict[str, str] | None = None,
        clips_dir: Path | None = None,
        events: EventSide | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.detector_factory = detector_factory or default_detector_factory(loaded)
        self.opener = opener
        self.out = out or sys.stdout
        self.on_event = on_event
        self.events = events if events is not None else EventSide.owned(loaded, self.out)
        self.on_frame = on_frame
        self.stream_keys = stream_keys or {}
        self.stop_event = threading.Event()
        self.failed = threading.Event()
        self.cameras: list[tuple[int, CameraConfig]] = [(i, c) for i, c in enumerate(self.config.cameras) if c.enabled]
        self.probes: dict[str, SourceProbe] = {}
        self.offline: dict[str, str] = {}  # network cameras that could not be opened at start: why
        self._opened: dict[str, PrependedSource] = {}  # probed sources waiting for their readers
        self.detectors: dict[str, DetectorLike] = {}
        self.metrics: dict[str, CameraMetrics] = {}
        self.readers: list[CameraReader] = []
        self.threads: list[WorkerThread] = []
        self.analytics: dict[str, AnalyticsWorker] = {}
        self.event_worker: EventWorker | None = None
        self.detection: DetectionWorker | None = None
        self.tracked: dict[str, TrackedBoxes] = {}  # motion-gated cameras' latest tracked boxes
        self.reporter: MetricsReporter | None = None
        self.clips_dir = clips_dir  # serve's clip folder, looked after by retention
        self.retention: RetentionCleaner | None = None
        self._retention_stage: RetentionStage | None = None
        # full volumes and failed writes (the console's /readyz and metrics); its ``on_full`` hook is
        # where the retention cleanup frees room when media writes find the disk full
        self.disk = disk_health()
        self.disk.reserve_bytes = round(self.config.outputs.media_reserve_mb * 1024 * 1024)
        self._started = False
        self._finished = False
        self._wired = threading.Event()  # every stage started: a camera coming online may join
        self._events_q: queue.Queue = queue.Queue(maxsize=256)
        self.track_writer: TrackWriter | None = None  # the cameras' tracks, for `campusguard replay`
        # cameras offline since the start: their health rule alone, ticked until their first frame comes
        self._waiting_health: dict[str, RuleEngine] = {}
        self._waiting_lock = threading.Lock()
        self._detected: dict[str, queue.Queue] = {}

    # the system diagram ---------------------------------------------------------------------
    def start(self) -> None:
        """Check everything that can fail at start-up, then start the workers, sources first."""
        if not self.cameras:
            raise ConfigError(f"{self.loaded.where(('cameras',))}: no enabled camera to watch")
        keep_blas_on_one_thread()  # before the first matrix of the set-up: BLAS's pool would only spin beside the stages
        try:
            self._probe_cameras(allow_offline=True)  # every source opens and gives a frame (network ones may be offline)
            self._load_detectors()  # one detector per (model, device, imgsz), shared by cameras
            self._warm_up_detectors()  # compiled for each camera's frame size before its first frame
            parts = self._build_cameras()  # tracker, zones, rules per camera, checked against frame and classes
            opened = self.events.open()  # the store and the sinks, as the side's ownership says
        except BaseException:
            self._close_opened()
            raise
        doorbell = threading.Event()
        events = self._events_q
        frame_queues = self._start_readers(doorbell, events)  # camera -> FrameQueue
        detected = self._detected = {cam.id: queue.Queue(maxsize=8) for _, cam in self.cameras}
        self._start_detection(frame_queues, detected, doorbell)  # FrameQueues -> batches -> per-camera queues
        self._finish_dead_segments()  # a killed run's .part recordings: finished or removed, before ours start
        self._start_track_writer()  # what the rules consume, kept for `campusguard replay`
        self._start_analytics(parts, detected, events)  # track -> rules -> events; annotated video, snapshots
        self._start_event_worker(events, opened)  # replay the spool; commit to the store, then alert sinks
        self._start_retention()  # expire incidents, media and logs; keep media under its limits
        self._start_metrics_and_watchdog()
        self._start_waiting_health(events)  # cameras offline since the start: `offline` incidents meanwhile
        self._started = True
        self._wired.set()

    def check(self) -> None:
        """The start-up checks alone: sources open, models load, zones fit the frames, classes exist."""
        if not self.cameras:
            raise ConfigError(f"{self.loaded.where(('cameras',))}: no enabled camera to watch")
        try:
            self._probe_cameras()
            self._load_detectors()
            self._build_cameras()
        finally:
            self._close_opened()

    def _close_opened(self) -> None:
        for source in self._opened.values():
            source.close()
        self._opened.clear()

    # steps ----------------------------------------------------------------------------------
    def _probe_cameras(self, allow_offline: bool = False) -> None:
        """Open every camera and read its first frame; with ``allow_offline`` a network camera that
        cannot be opened is noted in `offline` (its reader retries) instead of a start-up error."""
        for i, cam in self.cameras:
            try:
                self.probes[cam.id], self._opened[cam.id] = probe_source(cam, self.opener)
            except SourceError as exc:
                if allow_offline and source_kind(cam.source) == "url":
                    self.offline[cam.id] = str(exc)
                    continue
                self._close_opened()
                raise self.loaded.error(("cameras", i, "source"), f"camera {cam.id!r}: {exc}") from None

    def _load_detectors(self) -> None:
        cache: dict[tuple[str | None, str, int | tuple[int, int] | None], DetectorLike] = {}
        for i, cam in self.cameras:
            key = detector_key(self.config, cam)
            if key not in cache:
                try:
                    cache[key] = self.detector_factory(*key)
                except CampusGuardError as exc:
                    field = "model" if cam.model else None
                    loc = ("cameras", i, field) if field else ("detector", "model")
                    raise self.loaded.error(loc, str(exc)) from None
            self.detectors[cam.id] = cache[key]

    def _warm_up_detectors(self) -> None:
        """One blank frame per detector and frame size of the cameras online now (`WarmingDetector`): what
        OpenVINO compiles per input shape is paid at start-up, not by a camera's first frame."""
        done: set[tuple[int, tuple[int, int]]] = set()
        for _, cam in self.cameras:
            detector = self.detectors[cam.id]
            if cam.id in self.offline or not isinstance(detector, WarmingDetector):
                continue
            w, h = self.probes[cam.id].resolution_wh
            if (id(detector), (h, w)) not in done:
                done.add((id(detector), (h, w)))
                detector.warm_up((h, w))

    def _build_cameras(self) -> dict[str, CameraParts]:
        parts = {}
        for i, cam in self.cameras:
            if cam.id in self.offline:  # built when its first frame comes (`_camera_online`)
                continue
            probe = self.probes[cam.id]
            parts[cam.id] = build_camera(
                self.loaded,
                i,
                self.detectors[cam.id].names,
                probe.resolution_wh,
                probe.fps,
                self.stream_keys.get(cam.id, ""),
            )
        return parts

    def _spawn(self, name: str, target: Callable[[], None]) -> WorkerThread:
        t = WorkerThread(name, target)
        self.threads.append(t)
        t.start()
        return t

    def _start_readers(self, doorbell: threading.Event, events: queue.Queue) -> dict[str, FrameQueue]:
        queues = {}
        for _, cam in self.cameras:
            q = FrameQueue(cam.queue_size, drop_oldest=cam.is_realtime(), doorbell=doorbell)
            queues[cam.id] = q
            self.metrics[cam.id] = CameraMetrics(cam.id, queue_depth=q.__len__)
            offline = cam.id in self.offline
            reader = reader_for(
                cam,
                q,
                self.stop_event,
                opener=self.opener,
                opened=self._opened.pop(cam.id, None),
                reference_wh=cam.resolution_wh if offline else self.probes[cam.id].resolution_wh,
                on_first_frame=self._camera_online(cam) if offline else None,
            )
            if offline:
                reader.note_offline(self.offline[cam.id])
            self.readers.append(reader)
        for reader in self.readers:
            self._spawn(f"reader-{reader.camera_id}", self._reader_run(reader, events))
        return queues

    def _reader_run(self, reader: CameraReader, events: queue.Queue) -> Callable[[], None]:
        """A reader's thread: its frames, then, for a camera offline at start that never came online
        (so no analytics worker passes its end on), its health incidents ended as interrupted and its
        end straight to the event worker, which waits for every camera's.

        Only such a camera: one online at start gets its analytics worker after its reader has
        started, and a short file can be read to its end before that (`start` is still finishing a
        dead run's recordings); its end must wait behind its last frame's events, else the event
        writer ends, and `watch` exits, while that camera's frames are still analysed (their events
        lost, and a worker inside OpenCV when the interpreter exits aborts the process)."""
        offline_at_start = reader.camera_id in self.offline  # its analytics is started in this thread

        def run() -> None:
            reader.run()
            if offline_at_start and reader.camera_id not in self.analytics:
                with self._waiting_lock:
                    waiting = self._waiting_health.pop(reader.camera_id, None)
                if waiting is not None:
                    for ev in waiting.close(time.monotonic(), datetime.now().astimezone()):
                        ended = dataclasses.replace(ev, details={**ev.details, "interrupted": True})
                        put_until(events, EventMessage(ended), self.failed.is_set)
                put_until(events, EndOfStream(reader.camera_id, reader.ended_reason or "stopped"), self.failed.is_set)

        return run

    def _start_waiting_health(self, events: queue.Queue) -> None:
        """Camera health for the cameras offline since the start (nothing else of them runs yet): one
        thread ticks their health rules, so an offline camera is an incident even if it never came up."""
        for index, cam in self.cameras:
            if cam.id in self.offline:
                engine = build_health_only(self.loaded, index)
                if engine is not None:
                    self._waiting_health[cam.id] = engine
        if not self._waiting_health:
            return

        def tick() -> None:
            while not self.stop_event.wait(0.2):
                with self._waiting_lock:
                    waiting = list(self._waiting_health.values())
                    if not waiting:
                        return
                    now, wall = time.monotonic(), datetime.now().astimezone()
                    for engine in waiting:
                        for ev in engine.tick(now, wall):
                            put_until(events, EventMessage(ev), self.failed.is_set)

        threading.Thread(target=tick, name="health-offline", daemon=True).start()

    def _camera_online(self, cam: CameraConfig) -> Callable[[np.ndarray, float | None], None]:
        """What a camera offline at start does with its first frame (in its reader's thread, before
        the frame is queued): its zones, rules, mask and motion gate built for the real frame, and
        its analytics worker started. A zone that does not fit the frame ends that camera only."""

        def online(image: np.ndarray, fps: float | None) -> None:
            while not self._wired.wait(0.1):  # the reader may connect while `start` still wires the stages
                if self.stop_event.is_set():
                    return
            index = next(i for i, c in enumerate(self.loaded.config.cameras) if c.id == cam.id)
            probe = probe_of(cam, image, fps)
            names = self.detectors[cam.id].names
            parts = build_camera(self.loaded, index, names, probe.resolution_wh, probe.fps, self.stream_keys.get(cam.id, ""))
            with self._waiting_lock:  # its health rule, running since the start, goes on (an open `offline` ends)
                waiting = self._waiting_health.pop(cam.id, None)
            if waiting is not None:
                parts.rules.adopt(waiting)
            self.probes[cam.id] = probe
            for reader in self.readers:
                if reader.camera_id == cam.id:
                    reader.mask = parts.mask
            if cam.id in self.tracked and self.detection is not None:  # a new dict: the detection thread reads the old
                gate = motion_gate_for(cam, self.detectors[cam.id], probe.resolution_wh)
                self.detection.gates = {**self.detection.gates, cam.id: gate}
            self._start_camera_analytics(cam, parts, self._detected, self._events_q)
            log.warning(
                "camera %s: online (%dx%d); its rules are running", cam.id, probe.resolution_wh[0], probe.resolution_wh[1]
            )

        return online

    def _finish_dead_segments(self) -> None:
        folder = self.config.outputs.annotated_video_dir
        if folder and self.events.keeps_recordings(self.config):
            finish_dead_segments(folder, [cam.id for _, cam in self.cameras])

    def _start_detection(
        self, inputs: dict[str, FrameQueue], outputs: dict[str, queue.Queue], doorbell: threading.Event
    ) -> None:
        det = self.config.detector
        self.tracked = {cam.id: TrackedBoxes() for _, cam in self.cameras if cam.is_motion_gated()}
        gates = {
            cam.id: motion_gate_for(cam, self.detectors[cam.id], self.probes[cam.id].resolution_wh)
            for _, cam in self.cameras
            if cam.id in self.tracked and cam.id in self.probes  # an offline camera's: when it comes online
        }
        self.detection = DetectionWorker(
            inputs,
            outputs,
            self.detectors,
            self.metrics,
            self.stop_event,
            self.failed,
            doorbell,
            batch_size=det.batch_size,
            batch_wait_s=det.batch_wait_ms / 1000,
            gates=gates,
            tracked=self.tracked,
            merge_iou=det.iou,
        )
        self._spawn("detection", self.detection.run)

    def _start_track_writer(self) -> None:
        storage = self.config.storage
        # a camera's tracks are written where it runs: watch, serve, a node, a cluster group (into
        # ``storage.tracks``, a folder every machine mounts when the site's replay is to read them all)
        if self.events.ownership.records_tracks and storage.record_tracks:
            self.track_writer = TrackWriter(storage.tracks_path(), disk=self.disk)

    def _track_recorder(self, cam: CameraConfig, p: CameraParts) -> TrackRecorder | None:
        if self.track_writer is None:
            return None
        meta = segment_meta(
            cam, self.detectors[cam.id].names, p.geometry.resolution_wh, self.probes[cam.id].fps,
            self.stream_keys.get(cam.id, ""),
        )
        return self.track_writer.recorder(meta)

    def _start_analytics(
        self, parts: dict[str, CameraParts], inboxes: dict[str, queue.Queue], events: queue.Queue
    ) -> None:
        for _, cam in self.cameras:
            if cam.id in parts:
                self._start_camera_analytics(cam, parts[cam.id], inboxes, events)

    def _start_camera_analytics(
        self, cam: CameraConfig, p: CameraParts, inboxes: dict[str, queue.Queue], events: queue.Queue
    ) -> None:
        outputs = self.config.outputs
        video = None
        if outputs.annotated_video_dir:
            fps = outputs.annotated_fps or self.probes[cam.id].fps
            segment = max(1, round(outputs.annotated_segment_s * fps))
            video = AnnotatedVideoWriter(outputs.annotated_video_dir, cam.id, fps, segment, disk=self.disk)
        worker = AnalyticsWorker(
            cam.id,
            inboxes[cam.id],
            events,
            p.tracker,
            p.rules,
            p.geometry,
            self.detectors[cam.id].names,
            self.metrics[cam.id],
            self.failed,
            video=video,
            snapshots_dir=Path(outputs.snapshots_dir) if outputs.snapshots_dir else None,
            disk=self.disk,
            on_frame=self.on_frame,
            tracked_out=self.tracked.get(cam.id),
            blur=p.blur,
            offline_end_s=cam.offline_end_s if cam.is_live() else None,
            tracks=self._track_recorder(cam, p),
        )
        self.analytics[cam.id] = worker
        self._spawn(f"analytics-{cam.id}", worker.run)

    def _start_event_worker(self, inbox: queue.Queue, opened: OpenedEvents) -> None:
        self.event_worker = EventWorker(
            inbox,
            opened.store,
            opened.sinks,
            [c.id for _, c in self.cameras],
            self.failed,
            self.on_event,
            stop=self.stop_event,
            spool=self.events.spool(),
            interrupted=self.events.interrupted({c.id: c.is_live() for _, c in self.cameras}),  # a dead run's
            close_store=self.events.closes_store,
        )
        self._events_thread = self._spawn("events", self.event_worker.run)

    def _start_retention(self) -> None:
        # a borrowed store (serve's) stays open until its owner closes it, after our last pass; an
        # owned one is closed by the event worker first, so retention opens its own (`EventSide`)
        self._retention_stage = self.events.start_retention(self.config, self.clips_dir)
        if self._retention_stage is None:
            return
        self.retention = self._retention_stage.cleaner
        # media yield to events: a media writer or the store that finds its volume full asks the
        # cleanup for room (oldest media first); it only wakes the cleaner, so no stage ever waits
        # (a recording's request takes room from recordings only: never an incident's evidence)
        cleaner = self.retention
        recordings = self.config.outputs.annotated_video_dir
        recordings_dir = Path(recordings).resolve() if recordings else None

        def free_room(folder: Path, nbytes: int) -> None:
            cleaner.make_room(nbytes, recordings_only=recordings_dir is not None and folder.resolve() == recordings_dir)

        self.disk.on_full = free_room
        self.disk.floor = cleaner.pruner.policy.min_free_bytes  # "room again" only above the floor too

    def build_camera_parts(self, loaded: LoadedConfig, camera_id: str) -> CameraParts:
        """A running camera's zones, lines and rules built from ``loaded`` (not applied yet).

        They are checked against the camera's real frame size and the model's classes, so a
        `ConfigError` naming the field is raised here, before anything changes.

        Raises:
            KeyError: the camera is not running (unknown, disabled, or the service not started).
            ConfigError: a zone or line leaves the frame, or a rule names an unknown class.
        """
        index = next((i for i, c in enumerate(loaded.config.cameras) if c.id == camera_id), None)
        if index is None or camera_id not in self.analytics or camera_id not in self.probes:
            raise KeyError(camera_id)
        probe = self.probes[camera_id]
        names = self.detectors[camera_id].names
        return build_camera(loaded, index, names, probe.resolution_wh, probe.fps, self.stream_keys.get(camera_id, ""))

    def apply_camera_parts(self, loaded: LoadedConfig, camera_id: str, parts: CameraParts) -> None:
        """Swap `build_camera_parts`' result in: the camera's analytics thread takes it before its
        next frame (open events of the old rules are ended); its tracker keeps its tracks."""
        self.analytics[camera_id].replace_rules(parts.rules, parts.geometry)
        self.apply_privacy(camera_id, parts)
        self.loaded, self.config = loaded, loaded.config

    def adopt_config(self, loaded: LoadedConfig) -> None:
        """Take an edited config for the cameras not running yet (offline since the start): their zones
        and rules are built from it when their first frame comes. Running cameras are unchanged."""
        self.loaded, self.config = loaded, loaded.config

    def apply_privacy(self, camera_id: str, parts: CameraParts) -> None:
        """Swap a camera's privacy masks (its reader, from the next frame read) and blur (its analytics)."""
        for reader in self.readers:
            if reader.camera_id == camera_id:
                reader.mask = parts.mask
        self.analytics[camera_id].blur = parts.blur

    def _picture_rules(self, camera_id: str) -> list[PictureRule]:
        worker = self.analytics.get(camera_id)
        if worker is not None:
            return worker.rules.picture_rules()
        with self._waiting_lock:
            waiting = self._waiting_health.get(camera_id)
        return waiting.picture_rules() if waiting is not None else []

    def health_status(self, camera_id: str) -> HealthStatus | None:
        """Camera ``camera_id``'s health now, or None when its health is off (or it is not running)."""
        for rule in self._picture_rules(camera_id):
            status = rule.status()
            if isinstance(status, HealthStatus):
                return status
        return None

    def accept_view(self, camera_id: str, by: str) -> bool:
        """Make camera ``camera_id``'s current view its reference (an admin accepted a moved camera's new
        view; its zones, drawn on the old view, are recorded). False when it has no measured frame yet.

        Raises:
            KeyError: the camera is not running or its health is off.
        """
        rules = self._picture_rules(camera_id)
        if not rules:
            raise KeyError(camera_id)
        cam = next((c for _, c in self.cameras if c.id == camera_id), None)
        zones = [z.name for z in cam.zones] if cam is not None else []
        return all(rule.accept_view(by, zones) for rule in rules)

    def clear_old_view_zones(self, camera_id: str) -> None:
        """Forget the zones camera ``camera_id`` had when its new view was accepted (`accept_view`):
        its zones were saved again, so they were checked on the new view."""
        for rule in self._picture_rules(camera_id):
            rule.clear_old_view_zones()

    def refresh_metrics(self) -> None:
        """Copy the readers' counters into the cameras' `CameraMetrics` (they are owned by the readers)."""
        self._refresh_metrics()

    def _refresh_metrics(self) -> None:
        for r in self.readers:
            m = self.metrics[r.camera_id]
            m.frames_in = r.stats.frames_read
            m.frames_dropped = r.queue.dropped
            m.reconnects = r.stats.reconnects

    def _start_metrics_and_watchdog(self) -> None:
        outputs = self.config.outputs
        self._background_stop = threading.Event()
        self.reporter = MetricsReporter(
            list(self.metrics.values()),
            self._background_stop,
            outputs.metrics_interval_s,
            self.out,
            outputs.metrics_file,
            self._refresh_metrics,
        )
        threading.Thread(target=self.reporter.run, name="metrics", daemon=True).start()
        self.watchdog = Watchdog(
            self.readers,
            self.threads,  # a camera coming online later adds its analytics thread
            self.stop_event,
            self.failed,
            done=self._background_stop,
            heartbeat=systemd().watchdog,
        )
        threading.Thread(target=self.watchdog.run, name="watchdog", daemon=True).start()

    # lifecycle (`stop` and `wait`: `StopAndWait`) ---------------------------------------------
    def _last_thread(self) -> threading.Thread | None:
        return self._events_thread  # the event writer: ends once every camera's events are committed

    def finish(self, timeout_s: float = 30.0) -> bool:
        """Stop the background threads and print the final metrics; False if workers did not end in time."""
        done = self.wait(timeout_s)
        if not self._finished and self._started:
            self._finished = True
            self.watchdog.check()  # a worker that died since the watchdog's last round fails the run too
            self._background_stop.set()
            if self.track_writer is not None:
                self.track_writer.close()  # every camera's last block written before retention's last pass
            if self._retention_stage is not None:
                self.disk.on_full = self.disk.floor = None  # the process-wide disk state outlives this service
                self._retention_stage.finish()  # the last pass: what the last frames wrote, within the limits
            assert self.reporter is not None
            self.reporter.final()
        return done and not self.failed.is_set()

    def run(self, stop_after_s: float | None = None) -> bool:
        """Start, run until every source ends (or ``stop_after_s``), finish; True on a clean run."""
        self.start()
        if stop_after_s is not None and not self.wait(stop_after_s):
            self.stop()
        self.wait()
        return self.finish()
