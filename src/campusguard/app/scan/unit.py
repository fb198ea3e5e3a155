"""The unit of a scan: one recording through the `watch` pipeline, in whatever process runs it.

`scan_file` runs a `WatchService` whose only enabled camera is the chosen camera section with
the recording as its source (every frame in order, no pacing, no loop), so detection, tracking,
zones and rules are exactly those of `watch` on that file. Its events are collected and returned
to the parent, the scan's one writer to the store and the alert sinks; the worker writes no
event anywhere. The same function runs in the parent's thread, in a local process pool, or as a
Ray task (`campusguard.app.scan.executors`), so it takes and returns only picklable values.
"""

from __future__ import annotations

import dataclasses
import io
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from campusguard.app.config import CameraConfig, LoadedConfig
from campusguard.app.engine.sources import FrameSource
from campusguard.app.engine.stages import DetectorLike
from campusguard.app.engine.wiring import DetectorFactory, default_detector_factory, open_camera
from campusguard.app.event_side import EventSide
from campusguard.app.events.types import Event
from campusguard.app.media.live import LiveFrame
from campusguard.app.scan.parquet import DetectionsParquet
from campusguard.app.scan.recordings import Recording
from campusguard.app.service import WatchService
from campusguard.errors import CampusGuardError, InvalidInputError, SourceError

__all__ = [
    "FileResult",
    "ProgressChannel",
    "ScanJob",
    "ScanUnitError",
    "camera_index_for",
    "scan_config",
    "scan_file",
    "shared_detector_factory",
    "stop_running_units",
]


class ScanUnitError(CampusGuardError):
    """A recording could not be opened or scanned to its end (it is reported and skipped)."""


class ProgressChannel(Protocol):
    """Where a unit reports ``(recording key, frames processed since the last report)``."""

    def put(self, item: tuple[str, int]) -> Any: ...


@dataclass(frozen=True)
class ScanJob:
    """Everything one unit needs (picklable).

    Attributes:
        loaded: the scan's config (`scan_config`): the chosen camera enabled, the others off.
        camera_index: index of the chosen camera section in ``loaded``.
        recording: the file.
        detections_dir: where to write the per-frame detections Parquet file, or None.
        detector_factory: a picklable ``(model, device, imgsz) -> detector``; None builds the
            config's `campusguard.Detector`.
    """

    loaded: LoadedConfig
    camera_index: int
    recording: Recording
    detections_dir: Path | None = None
    detector_factory: DetectorFactory | None = None

    @property
    def camera_id(self) -> str:
        return self.loaded.config.cameras[self.camera_index].id


@dataclass
class FileResult:
    """What a unit returns: the recording, frames processed, every event update in order."""

    recording: Recording
    frames: int
    events: list[Event] = field(default_factory=list)
    seconds: float = 0.0
    detections_file: Path | None = None


def camera_index_for(loaded: LoadedConfig, camera_id: str | None) -> int:
    """The index of the camera section whose zones and rules a scan applies.

    Raises:
        InvalidInputError: no camera of that id, or several cameras and none chosen (names the ids).
    """
    cameras = loaded.config.cameras
    ids = ", ".join(c.id for c in cameras) or "none"
    if camera_id is None:
        if len(cameras) != 1:
            raise InvalidInputError(f"{loaded.path} has {len(cameras)} cameras ({ids}); choose one with --camera ID")
        return 0
    for i, cam in enumerate(cameras):
        if cam.id == camera_id:
            return i
    raise InvalidInputError(f"{loaded.path} has no camera {camera_id!r}; its cameras: {ids}")


def scan_config(loaded: LoadedConfig, camera_index: int, threads: int = 1) -> LoadedConfig:
    """The config a unit runs: only camera ``camera_index`` enabled, ``threads`` ONNX Runtime
    threads, no alert sinks (the parent sends alerts), no annotated video or metrics output
    (one per camera id, which every unit shares); snapshots are kept (their names carry the
    event id). Indices and the file's line numbers stay those of ``loaded``."""
    cfg = loaded.config
    cameras = [
        cam.model_copy(update={"enabled": i == camera_index, "realtime": False, "loop": False})
        for i, cam in enumerate(cfg.cameras)
    ]
    outputs = cfg.outputs.model_copy(
        update={"annotated_video_dir": None, "metrics_interval_s": 0, "metrics_file": None}
    )
    config = cfg.model_copy(
        update={
            "cameras": cameras,
            "alerts": [],
            "outputs": outputs,
            "detector": cfg.detector.model_copy(update={"threads": threads}),
        }
    )
    return LoadedConfig(config, loaded.path, loaded.root, loaded.text)


# one detector per process and settings, reused by the recordings this process runs in turn
_DETECTORS: dict[tuple[Any, ...], DetectorLike] = {}
_DETECTORS_LOCK = threading.Lock()


def shared_detector_factory(loaded: LoadedConfig, factory: DetectorFactory | None = None) -> DetectorFactory:
    """``factory`` (default: the config's detector) with its detectors kept for this process.

    A process runs one recording at a time, so the next recording reuses the loaded model
    instead of loading it again.
    """
    make = factory or default_detector_factory(loaded)
    settings = (loaded.config.detector.model_dump_json(), getattr(factory, "__qualname__", repr(factory)))

    def cached(model: str | None, device: str, imgsz: int | tuple[int, int] | None) -> DetectorLike:
        key = (*settings, model, device, imgsz)
        with _DETECTORS_LOCK:
            if key not in _DETECTORS:
                _DETECTORS[key] = make(model, device, imgsz)
            return _DETECTORS[key]

    return cached


class _CollectedEvents:
    """The unit's event store (an `EventRecorder`): keeps every update in order, tagged with its recording."""

    def __init__(self, recording: str) -> None:
        self.recording = recording
        self.events: list[Event] = []

    def record(self, event: Event) -> None:
        self.events.append(dataclasses.replace(event, details={**event.details, "recording": self.recording}))

    def close(self) -> None:
        pass


class _FrameReporter:
    """Counts processed frames and reports them to the progress channel at most every ``period_s``."""

    def __init__(self, key: str, channel: ProgressChannel | None, period_s: float = 0.5) -> None:
        self.key = key
        self.channel = channel
        self.period_s = period_s
        self._pending = 0
        self._last = time.monotonic()

    def frame(self) -> None:
        self._pending += 1
        now = time.monotonic()
        if now - self._last >= self.period_s:
            self.flush()
            self._last = now

    def flush(self) -> None:
        if self.channel is not None and self._pending:
            self.channel.put((self.key, self._pending))
        self._pending = 0


def _open_recording(cam: CameraConfig) -> FrameSource:
    """`open_camera`, failing as the recording's own error rather than the config's source field."""
    try:
        return open_camera(cam)
    except SourceError as exc:
        raise ScanUnitError(str(exc)) from None


# the units running in this process, so an interrupted scan can stop them (`stop_running_units`)
_RUNNING: set[WatchService] = set()
_RUNNING_LOCK = threading.Lock()


def stop_running_units() -> None:
    """Ask every unit running in this process to stop at once (its file is then not done: a resumed scan re-runs it)."""
    with _RUNNING_LOCK:
        for service in _RUNNING:
            service.stop()


def scan_file(job: ScanJob, progress: ProgressChannel | None = None) -> FileResult:
    """Run one recording through the `watch` pipeline; return its events (nothing is stored here).

    Raises:
        ScanUnitError: the file cannot be opened or read to its end, or the pipeline failed
            (the message does not repeat the path).
        ConfigError: the camera's zones do not fit the file's frames (names the config line).
    """
    t0 = time.perf_counter()
    rec = job.recording
    cameras = list(job.loaded.config.cameras)
    cameras[job.camera_index] = cameras[job.camera_index].model_copy(update={"source": str(rec.path)})
    loaded = LoadedConfig(
        job.loaded.config.model_copy(update={"cameras": cameras}), job.loaded.path, job.loaded.root, job.loaded.text
    )
    store = _CollectedEvents(rec.key)
    reporter = _FrameReporter(rec.key, progress)
    parquet = DetectionsParquet(job.detections_dir / rec.output_name(".parquet")) if job.detections_dir else None

    def on_frame(live: LiveFrame) -> None:
        if parquet is not None:
            parquet.add(live.index, live.timestamp_s, live.detections)
        reporter.frame()

    service = WatchService(
        loaded,
        detector_factory=shared_detector_factory(job.loaded, job.detector_factory),
        opener=_open_recording,
        out=io.StringIO(),  # the unit's own metrics lines: the parent prints the summary
        on_frame=on_frame,
        stream_keys={job.camera_id: rec.key},
        events=EventSide.partial(loaded, store),  # the runner is the one writer of the store
    )
    with _RUNNING_LOCK:
        _RUNNING.add(service)
    try:
        clean = service.run()
        reporter.flush()
        reason = service.readers[0].ended_reason if service.readers else None
        if reason != "end of stream":
            raise ScanUnitError(f"not read to its end: {reason or 'not started'}")
        if not clean:
            raise ScanUnitError("the pipeline failed (run with --verbose for the log)")
    except BaseException:
        if parquet is not None:
            parquet.discard()
        raise
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(service)
    written = parquet.commit() if parquet is not None else None
    frames = service.metrics[job.camera_id].frames_processed
    return FileResult(rec, frames, store.events, time.perf_counter() - t0, written)
