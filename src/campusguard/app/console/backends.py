"""Where the console's cameras run: one `CameraBackend` protocol, two implementations.

- `LocalCameras`: the cameras in this process through `WatchService` (``campusguard serve``);
  the analytics threads hand their frames to a `FrameHub` and a `ClipRecorder`.
- `ClusterCameras`: the cameras in groups on Ray actors (``serve --ray``) through the cluster
  driver `ClusterWatch`; the live view pulls each watched camera's latest JPEG from its actor
  (`PulledFrameHub`), incident snapshots and clips are copied from the actors into the media
  folders (`ClusterMedia`), and zone edits are checked and applied by the camera's actor.

`ConsoleRuntime` holds one and never asks which: status, readiness, live view, incident media and
zone edits all go through the protocol.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Hashable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TextIO

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.cluster.group import DetectorFactoryMaker, GroupUnavailableError, MediaKind, MediaOptions
from campusguard.app.config import LoadedConfig
from campusguard.app.console.cluster_media import ClusterMedia
from campusguard.app.engine.sources import CameraState
from campusguard.app.engine.wiring import DetectorFactory
from campusguard.app.event_side import EventSide
from campusguard.app.events.protocols import EventDatabase, EventStore
from campusguard.app.events.types import Event
from campusguard.app.media.clips import ClipRecorder
from campusguard.app.media.live import FrameHub, LiveFrame, PulledFrameHub
from campusguard.app.media.redact import redacted_path
from campusguard.app.rules.camera_health import HealthStatus
from campusguard.app.service import WatchService

if TYPE_CHECKING:
    from campusguard.app.cluster.driver import ClusterWatch
    from campusguard.app.cluster.ray_executor import RayExecutor
    from campusguard.app.nodes.service import NodeService

__all__ = [
    "MEDIA_EVENT_ID",
    "CameraBackend",
    "CameraState",
    "CameraStatus",
    "ConsoleCameraState",
    "ClusterCameras",
    "HealthStatus",
    "LocalCameras",
    "ZoneEdit",
]

log = logging.getLogger("campusguard.app.console")

ConsoleCameraState = CameraState | Literal["unassigned"]
"""A camera's state on the wall: a pipeline's `CameraState`, or ``unassigned`` (with nodes: no node
runs it now, between a node's death and the takeover)."""

MEDIA_EVENT_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
"""Event ids media file names may be built from; nothing else gets into a path."""

ZoneEdit = Callable[[], None]
"""Applies a checked zone edit to the running cameras (`CameraBackend.prepare_zones`)."""


@dataclass(frozen=True)
class CameraStatus:
    """What the camera wall shows of one camera.

    Attributes:
        name: camera id.
        state: ``starting`` (no frame yet), ``live``, ``reconnecting`` (source lost or stalled),
            ``offline`` (a network source that cannot be opened, retried with back-off),
            ``stopped`` (stream ended or the pipeline stopped), ``failed`` (reader or pipeline error);
            see `campusguard.app.engine.sources.CameraState`.
        input_fps: frames read per second over the last few seconds.
        processed_fps: frames processed per second over the last few seconds.
        dropped_frames: frames dropped so far by the drop-oldest queue.
        reconnects: times the source was reopened.
        last_frame_time: unix time of the last frame read, or ``None``.
        width: frame width in pixels (``None`` before the first frame).
        height: frame height in pixels.
        node: with nodes (``serve --node``), the node that runs it (``None``: none now, or no nodes).
    """

    name: str
    state: ConsoleCameraState
    input_fps: float
    processed_fps: float
    dropped_frames: int
    reconnects: int
    last_frame_time: float | None
    width: int | None
    height: int | None
    node: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def without_pipeline(camera: str, state: ConsoleCameraState, node: str | None = None) -> CameraStatus:
    """A camera with no pipeline here (yet, or any more): no rates, no frame, ``node`` running it if known."""
    return CameraStatus(camera, state, 0.0, 0.0, 0, 0, None, None, None, node=node)


def _not_running(camera: str, stopped: bool) -> CameraStatus:
    """A camera whose pipeline has not started yet (``starting``) or has ended with the rest (``stopped``)."""
    return without_pipeline(camera, "stopped" if stopped else "starting")


class CameraBackend(Protocol):
    """Where the console's cameras run, and everything the console asks of them.

    ``fps`` arguments are the console's ``(input fps, processed fps)`` of the camera; ``stopped``
    says the console has stopped (a camera with no pipeline is then ``stopped``, not ``starting``).
    """

    @property
    def hub(self) -> FrameHub:
        """The live view and snapshots of the cameras."""
        ...

    @property
    def service(self) -> WatchService | ClusterWatch | NodeService | None:
        """The running pipeline (metrics, event worker), or ``None`` before a successful `start`."""
        ...

    def start(self, loaded: LoadedConfig, store: EventDatabase, on_event: Callable[[Event], None]) -> None:
        """Start the cameras of ``loaded``; events go to ``store``, then ``on_event`` after each commit.

        ``store`` is the console's, shared whole with the pipeline (events, the incidents a dead run
        left open, retention) and left open at the end: the console closes it.

        Raises:
            ConfigError, SourceError, ModelLoadError: what ``campusguard watch`` would refuse.
        """
        ...

    def stop(self, timeout_s: float) -> bool:
        """End the cameras: open events ended and committed within ``timeout_s`` seconds; False
        when that took longer or a worker failed."""
        ...

    def request_stop(self) -> None:
        """Ask the cameras to stop, without waiting (safe from a signal handler); `stop` waits."""
        ...

    def close(self) -> None:
        """Release what `start` took beyond the pipeline (actors, media threads) and close the hub."""
        ...

    def status(self, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus:
        """One camera's state, counters and frame size."""
        ...

    def ready(self, within_s: float, stopped: bool) -> bool:
        """The pipeline running, and some camera read a frame within ``within_s`` seconds (live, on
        Ray as of its group's last answer); the cameras that are not live are `ConsoleRuntime.cameras_down`."""
        ...

    def incident_started(self, event: Event) -> None:
        """Keep the new incident's media: its clip, and on a cluster its snapshot."""
        ...

    def snapshot_file(self, event_id: str, store: EventStore) -> Path | None:
        """The incident's snapshot JPEG, only if it is a file in the console's media folders."""
        ...

    def prepare_zones(self, loaded: LoadedConfig, text: str, camera: str) -> ZoneEdit:
        """Check an edited config (``loaded``, parsed from ``text``) against the running camera;
        returns what applies it, to be called once the file is saved.

        Raises:
            ConfigError: a zone or line leaves the camera's frame, or a rule names an unknown class.
            GroupUnavailableError: on a cluster, the camera's group did not answer the check.
        """
        ...

    def health(self, camera: str) -> HealthStatus | None:
        """The camera's health now (`campusguard.app.rules.camera_health`), or ``None`` when its
        health is off, it is not running, or it cannot be asked cheaply (on Ray)."""
        ...

    def accept_view(self, camera: str, by: str) -> bool:
        """Make the camera's current view its reference (an admin accepted a moved camera's new view);
        False when nothing was measured yet.

        Raises:
            KeyError: the camera is not running here, or its health is off (or on Ray: not offered).
        """
        ...

    def clear_old_view_zones(self, camera: str) -> None:
        """The camera's zones were saved again: forget the zones recorded when its view was accepted."""
        ...

    def alert_sinks(self) -> list[AlertSink]:
        """The alert sinks the cameras' events go to (empty before `start`)."""
        ...


class LocalCameras:
    """The cameras in this process: one `WatchService`, frames to a `FrameHub` and the clip buffer.

    Args:
        cameras: the enabled cameras' ids.
        clips: the console's clip recorder (fed every processed frame).
        snapshots_dir: where the pipeline writes incident snapshots.
        media_dir: the console's media folder (snapshots are served from these two folders only).
        detector_factory: ``(model, device, imgsz) -> detector`` (default: `campusguard.Detector`).
        out: where the pipeline's metrics lines and stdout alerts go.
        live_fps: most live-view frames per second per camera.
    """

    def __init__(
        self,
        cameras: list[str],
        clips: ClipRecorder,
        *,
        snapshots_dir: Path,
        media_dir: Path,
        detector_factory: DetectorFactory | None,
        out: TextIO,
        live_fps: float,
    ) -> None:
        self.clips = clips
        self.snapshots_dir = snapshots_dir
        self.media_dir = media_dir
        self.detector_factory = detector_factory
        self.out = out
        self._hub = FrameHub(cameras, max_fps=live_fps)
        self._service: WatchService | None = None

    @property
    def hub(self) -> FrameHub:
        return self._hub

    @property
    def service(self) -> WatchService | None:
        return self._service

    def start(self, loaded: LoadedConfig, store: EventDatabase, on_event: Callable[[Event], None]) -> None:
        service = WatchService(
            loaded,
            detector_factory=self.detector_factory,
            out=self.out,
            on_event=on_event,
            on_frame=self._on_frame,
            clips_dir=self.clips.out_dir,
            # the console's store: events, a dead run's incidents, retention; left open
            events=EventSide.borrowed(loaded, store, self.out),
        )
        service.start()
        self._service = service

    def stop(self, timeout_s: float) -> bool:
        if self._service is None:
            return True
        self._service.stop()
        deadline = time.monotonic() + timeout_s
        done = self._service.wait(timeout_s)  # streams ended, events committed
        # the last clips are media too: written before retention's last pass (`finish`)
        self.clips.close(max(1.0, deadline - time.monotonic()))
        return self._service.finish(max(0.0, deadline - time.monotonic())) and done

    def request_stop(self) -> None:
        if self._service is not None:
            self._service.stop()

    def close(self) -> None:
        self._hub.close()

    def _on_frame(self, frame: LiveFrame) -> None:
        """Every processed frame (analytics threads): to the live view and the clip buffer."""
        self._hub.publish(frame)
        self.clips.add(frame)

    def status(self, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus:
        if self._service is None:
            return _not_running(camera, stopped)
        return self.service_status(self._service, camera, fps, stopped)

    @staticmethod
    def service_status(service: WatchService, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus:
        """``camera``'s status in ``service`` (its reader's state, counters and frame size)."""
        reader = next((r for r in service.readers if r.camera_id == camera), None)
        if reader is None:
            return _not_running(camera, stopped)
        stats = reader.stats
        now = time.monotonic()
        last = None if stats.frames_read == 0 else time.time() - (now - stats.last_frame_at)
        wh = stats.resolution_wh
        return CameraStatus(
            name=camera,
            state=reader.state(service.failed.is_set(), now),
            input_fps=fps[0],
            processed_fps=fps[1],
            dropped_frames=reader.queue.dropped,
            reconnects=stats.reconnects,
            last_frame_time=last,
            width=None if wh is None else wh[0],
            height=None if wh is None else wh[1],
        )

    def ready(self, within_s: float, stopped: bool) -> bool:
        service = self._service
        if service is None or stopped or not service.readers or service.failed.is_set():
            return False
        now = time.monotonic()
        return any(r.state(False, now) == "live" and now - r.stats.last_frame_at <= within_s for r in service.readers)

    def incident_started(self, event: Event) -> None:
        self.clips.request(event.camera_id, event.event_id, event.start_s)

    def snapshot_file(self, event_id: str, store: EventStore) -> Path | None:
        return self.media_file(event_id, store, [self.snapshots_dir, self.media_dir])

    @staticmethod
    def media_file(event_id: str, store: EventStore, folders: list[Path]) -> Path | None:
        """The incident's snapshot file, only when it lies in one of ``folders``."""
        event = store.get(event_id)
        if event is None or not event.snapshot_path:
            return None
        path = Path(event.snapshot_path).resolve()
        roots = [f.resolve() for f in folders]
        if not any(path.is_relative_to(root) for root in roots) or not path.is_file():
            return None
        return path

    def prepare_zones(self, loaded: LoadedConfig, text: str, camera: str) -> ZoneEdit:
        service = self._service
        if service is None:  # not running: the file is all there is
            return lambda: None
        if camera not in service.analytics:  # offline since the start: built from this when it comes online
            return lambda: service.adopt_config(loaded)
        parts = service.build_camera_parts(loaded, camera)
        return lambda: service.apply_camera_parts(loaded, camera, parts)

    def health(self, camera: str) -> HealthStatus | None:
        service = self._service
        return None if service is None else service.health_status(camera)

    def accept_view(self, camera: str, by: str) -> bool:
        service = self._service
        if service is None:
            raise KeyError(camera)
        return service.accept_view(camera, by)

    def clear_old_view_zones(self, camera: str) -> None:
        if self._service is not None:
            self._service.clear_old_view_zones(camera)

    def alert_sinks(self) -> list[AlertSink]:
        worker = None if self._service is None else self._service.event_worker
        return [] if worker is None else list(worker.sinks)


class ClusterCameras:
    """The cameras in groups on the Ray cluster at ``address`` (``serve --ray``), driven by `ClusterWatch`.

    Frames, media and zone edits go through actor calls; a group that does not answer within
    ``timeout_s`` (restarting) raises `GroupUnavailableError`.

    Args:
        cameras: the enabled cameras' ids.
        address: the Ray cluster's address.
        clips: the console's clip recorder (its folder and clip length; the clips are copied in).
        media_dir: the console's media folder (copied snapshots go to ``cluster-snapshots`` in it).
        detector_factory: builds each group's detector factory (default: `campusguard.Detector`).
        out: where the driver's metrics lines and stdout alerts go.
        live_fps: most live-view frames per second per camera.
        timeout_s: how long a frame, media or zone request waits for its group's actor, seconds.
    """

    def __init__(
        self,
        cameras: list[str],
        address: str,
        clips: ClipRecorder,
        *,
        media_dir: Path,
        detector_factory: DetectorFactoryMaker | None,
        out: TextIO,
        live_fps: float,
        timeout_s: float,
    ) -> None:
        self.address = address
        self.clips = clips
        self.media_dir = media_dir
        self.detector_factory = detector_factory
        self.out = out
        self.timeout_s = timeout_s
        self.executor: RayExecutor | None = None  # the camera groups' actors, from `start` to `close`
        self.media = ClusterMedia(self._pull_media)
        self._hub = PulledFrameHub(cameras, self._pull_frame, max_fps=live_fps)
        self._cameras = list(cameras)
        self._service: ClusterWatch | None = None
        self._blurred: set[str] = set()  # cameras with privacy.blur: their incidents' redacted media are copied too

    @property
    def hub(self) -> FrameHub:
        return self._hub

    @property
    def service(self) -> ClusterWatch | None:
        return self._service

    def start(self, loaded: LoadedConfig, store: EventDatabase, on_event: Callable[[Event], None]) -> None:
        from campusguard.app.cluster.driver import ClusterWatch
        from campusguard.app.cluster.ray_executor import RayExecutor

        self.executor = RayExecutor(
            loaded,
            address=self.address,
            detector_factory=self.detector_factory,
            media=MediaOptions(self.clips.pre_s, self.clips.post_s),
        )
        service = ClusterWatch(
            loaded,
            self.executor,
            out=self.out,
            on_event=on_event,
            events=EventSide.borrowed(loaded, store, self.out),
            clips_dir=self.clips.out_dir,
        )
        self._note_blur(loaded)
        self.media.start()  # before the groups' first events
        try:
            service.start()
        except BaseException:
            self._release_actors()
            raise
        self._service = service

    def stop(self, timeout_s: float) -> bool:
        if self._service is None:
            return True
        self._service.stop()
        return self._service.finish(timeout_s)

    def request_stop(self) -> None:
        if self._service is not None:
            self._service.stop()

    def close(self) -> None:
        self.media.close()
        self._release_actors()
        self._hub.close()

    def _release_actors(self) -> None:
        """End the camera groups' actors (they outlive the driver for the live view and media)."""
        executor, self.executor = self.executor, None
        if executor is not None:
            executor.release()

    def status(self, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus:
        """State, counters and frame size as the driver last pulled them from the camera's group (no frame time)."""
        service = self._service
        if service is None:
            return _not_running(camera, stopped)
        m = service.metrics.get(camera)
        dropped, reconnects = (0, 0) if m is None else (m.frames_dropped, m.reconnects)
        width, height = service.frame_sizes.get(camera, (None, None))
        state = service.camera_state(camera)
        return CameraStatus(camera, state, fps[0], fps[1], dropped, reconnects, None, width, height)

    def ready(self, within_s: float, stopped: bool) -> bool:
        """Some camera live as of its group's last answer (the actors report no frame times)."""
        service = self._service
        return service is not None and not stopped and any(service.camera_state(c) == "live" for c in self._cameras)

    def incident_started(self, event: Event) -> None:
        """Copy the incident's snapshot and clip from the camera's actor, on the media thread."""
        if not MEDIA_EVENT_ID.match(event.event_id):
            return
        # the viewers' variants, written by the actor beside the sharp ones under the incident's own policy
        blurred = event.camera_id in self._blurred if event.media_blur is None else event.media_blur != "none"
        if event.snapshot_path:
            copy = self._snapshot_copy(event.event_id)
            self.media.request(event.camera_id, "snapshot", event.event_id, copy, 30.0)
            if blurred:
                self.media.request(event.camera_id, "snapshot_redacted", event.event_id, redacted_path(copy), 30.0)
        within_s = self.clips.pre_s + self.clips.post_s + 60.0
        clip = self.clips.path_for(event.event_id)
        self.media.request(event.camera_id, "clip", event.event_id, clip, within_s)
        if blurred:
            self.media.request(event.camera_id, "clip_redacted", event.event_id, redacted_path(clip), within_s)

    def _note_blur(self, loaded: LoadedConfig) -> None:
        self._blurred = {c.id for c in loaded.config.cameras if c.privacy.blur != "none"}

    def snapshot_file(self, event_id: str, store: EventStore) -> Path | None:
        """Only the copies count: the actors' snapshot paths are on their nodes."""
        copy = self._snapshot_copy(event_id)
        return copy if copy.is_file() else None

    def _snapshot_copy(self, event_id: str) -> Path:
        return self.media_dir / "cluster-snapshots" / f"{event_id}.jpg"

    def prepare_zones(self, loaded: LoadedConfig, text: str, camera: str) -> ZoneEdit:
        """Checked against the frame size on the camera's actor; applied there once saved (when only
        the sending goes unanswered, the group gets the edit with its next pull)."""
        executor = self.executor
        if executor is None or not executor.groups:  # not before the start or after the stop
            return lambda: None
        executor.check_config(loaded, text, camera, self.timeout_s)

        def apply() -> None:
            self._note_blur(loaded)
            try:
                executor.set_config(loaded, text, camera, self.timeout_s)
            except GroupUnavailableError as exc:  # saved; the group gets it with its next pull
                log.warning("zones of camera %s saved; its group gets them when it answers: %s", camera, exc)

        return apply

    def health(self, camera: str) -> HealthStatus | None:
        """Not reported on Ray: the groups' answers carry no health (the incidents still come through)."""
        return None

    def accept_view(self, camera: str, by: str) -> bool:
        """Not offered on Ray (the camera's reference view lives on its group's actor)."""
        raise KeyError(camera)

    def clear_old_view_zones(self, camera: str) -> None:
        """Nothing to forget: a view cannot be accepted on Ray (`accept_view`)."""

    def alert_sinks(self) -> list[AlertSink]:
        worker = None if self._service is None else self._service.event_worker
        return [] if worker is None else list(worker.sinks)

    def _pull_frame(self, camera: str, known: Hashable | None) -> tuple[Hashable, bytes | None] | None:
        """The camera's latest JPEG from its group's actor (`PulledFrameHub`'s fetch); ``None`` before the start."""
        executor = self.executor
        if executor is None or not executor.groups:
            return None
        return executor.frame_jpeg(camera, known, self.timeout_s)

    def _pull_media(self, camera: str, kind: MediaKind, event_id: str) -> bytes | None:
        executor = self.executor
        if executor is None or not executor.groups:
            return None
        return executor.media(camera, kind, event_id, self.timeout_s)
