"""`NodeCameras`: the console's cameras on one of several nodes sharing PostgreSQL (``serve --node``).

Each camera this node holds the lease of (`campusguard.app.nodes.coordinator`) runs in a
`WatchService` of its own (the config with every other camera disabled), so cameras come and go
one at a time while the others keep running. What the site needs once is done once:

- alerts: the sinks and escalation are opened once per node; the store commits, the node's
  sinks send (`campusguard.app.engine.writer` semantics, one sender per outbox);
- retention: run by the one node holding the site's retention lock (`SiteLeader`);
- the incidents a dead node left open: ended as interrupted by the node that takes its camera
  (each camera service ends its camera's open incidents at its start).

Cameras run by another node are shown from their lease (node, state, rates as that node last
published them); their live view is proxied by the console (`remote_url`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.config import LoadedConfig
from campusguard.app.console.backends import (
    CameraStatus,
    ConsoleCameraState,
    LocalCameras,
    ZoneEdit,
    without_pipeline,
)
from campusguard.app.engine.wiring import DetectorFactory, default_detector_factory, detector_key
from campusguard.app.event_side import EventSide
from campusguard.app.events.protocols import EventDatabase, EventStore
from campusguard.app.events.recorder import AlertRelayLoop
from campusguard.app.events.types import Event
from campusguard.app.media.clips import ClipRecorder
from campusguard.app.media.live import FrameHub, LiveFrame
from campusguard.app.nodes.coordinator import NodeCoordinator, NodeTimings
from campusguard.app.nodes.detectors import SharedDetectors
from campusguard.app.nodes.directory import CameraLease, DirectoryUnavailableError, NodeDirectory, NodeInfo
from campusguard.app.nodes.leader import RETENTION_JOB, SiteLeader
from campusguard.app.nodes.service import NodeService
from campusguard.app.nodes.zone_edits import ZoneEditListener
from campusguard.app.retention.stage import RetentionStage
from campusguard.app.rules.camera_health import HealthStatus
from campusguard.app.service import WatchService

__all__ = ["NodeCameras", "one_camera"]

log = logging.getLogger("campusguard.app.console")


def one_camera(loaded: LoadedConfig, camera: str) -> LoadedConfig:
    """``loaded`` with every camera but ``camera`` disabled (indexes kept, so errors name the right line)."""
    cfg = loaded.config
    cameras = [c if c.id == camera else c.model_copy(update={"enabled": False}) for c in cfg.cameras]
    return LoadedConfig(cfg.model_copy(update={"cameras": cameras}), loaded.path, loaded.root, loaded.text)


class NodeCameras:
    """This node's share of the site's cameras (a `CameraBackend`), coordinated over PostgreSQL.

    Args:
        cameras: the site's enabled cameras' ids.
        clips: the console's clip recorder.
        node: this node's name; url: its console's base URL (others proxy its live views).
        snapshots_dir, media_dir: the media folders (shared by every node).
        detector_factory: ``(model, device, imgsz) -> detector`` (default: `campusguard.Detector`).
        out: where the pipelines' metrics lines go.
        live_fps: most live-view frames per second per camera.
    """

    def __init__(
        self,
        cameras: list[str],
        clips: ClipRecorder,
        *,
        node: str,
        url: str | None,
        snapshots_dir: Path,
        media_dir: Path,
        detector_factory: DetectorFactory | None,
        out: TextIO,
        live_fps: float,
    ) -> None:
        self.camera_ids = list(cameras)
        self.clips = clips
        self.node = node
        self.url = url
        self.snapshots_dir = snapshots_dir
        self.media_dir = media_dir
        self.detector_factory = detector_factory
        self.out = out
        self._hub = FrameHub(cameras, max_fps=live_fps)
        self._services: dict[str, WatchService] = {}
        self._lock = threading.Lock()
        self._started = False
        self.stopped = threading.Event()
        self._facade = NodeService(self.services, lambda: self.retention_stage, self.stopped)
        self.coordinator: NodeCoordinator | None = None
        self.leader: SiteLeader | None = None
        self.retention_stage: RetentionStage | None = None
        self._sinks: list[AlertSink] = []
        self._relay: AlertRelayLoop | None = None  # hands the site's committed updates to this node's sinks
        self._detectors: SharedDetectors | None = None
        self._zone_edits: ZoneEditListener | None = None
        self._loaded: LoadedConfig | None = None
        self._events: EventSide | None = None  # the node's: the console's store, the sinks, the relay
        self._on_event: Callable[[Event], None] | None = None
        self._leases: dict[str, CameraLease] = {}
        self._leases_at = 0.0
        self._stop_timeout_s = 30.0

    # CameraBackend: lifecycle ----------------------------------------------------------------------
    @property
    def hub(self) -> FrameHub:
        return self._hub

    @property
    def service(self) -> NodeService | None:
        return self._facade if self._started else None

    def start(self, loaded: LoadedConfig, store: EventDatabase, on_event: Callable[[Event], None]) -> None:
        config = loaded.config
        url = config.storage.postgresql
        assert url is not None, "nodes need storage.postgresql (checked by serve)"
        self._loaded, self._on_event = loaded, on_event
        self._stop_timeout_s = config.service.stop_timeout_s
        self._events = EventSide.borrowed(loaded, store, self.out)
        self._sinks = self._events.open().sinks  # once per node: sinks, escalation
        self._relay = self._events.open_relay()  # every node relays: a dead one's updates too
        if self._relay is not None:
            self._relay.start()
        self._detectors = SharedDetectors(self.detector_factory or default_detector_factory(loaded))
        n = config.nodes
        timings = NodeTimings(n.heartbeat_s, n.lease_s, n.fence_s, n.dead_s, n.settle_s, n.hold_s)
        preferred = {c.id: c.node for c in config.cameras if c.enabled and c.node}
        self.coordinator = NodeCoordinator(
            NodeDirectory(url, self.node), self, self.camera_ids, preferred=preferred, url=self.url, timings=timings
        )
        self._prepare_detectors(loaded)  # before joining: a camera this node takes starts in seconds
        self.coordinator.start()
        if config.retention.enabled:
            self.leader = SiteLeader(url, RETENTION_JOB, self._lead_retention, self._stop_retention)
            self.leader.start()
        self._started = True

    def _prepare_detectors(self, loaded: LoadedConfig) -> None:
        """Build (and with ``backend: auto``, choose) each detector the cameras need, once, now."""
        assert self._detectors is not None
        for cam in loaded.config.cameras:
            if not cam.enabled:
                continue
            try:
                self._detectors(*detector_key(loaded.config, cam))
            except Exception as exc:  # noqa: BLE001 - the camera's own start reports it, naming the line
                log.warning("node %s: the detector of camera %s could not be prepared: %s", self.node, cam.id, exc)

    def stop(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        clean = True
        if self._zone_edits is not None:
            self._zone_edits.stop()
        if self.coordinator is not None:
            clean = self.coordinator.stop(timeout_s)
        if self.leader is not None:
            self.leader.stop()
        if self._relay is not None:  # what this node committed goes to the sinks before they close
            self._relay.close(max(0.5, deadline - time.monotonic()))
        for sink in self._sinks:
            sink.close(max(0.5, deadline - time.monotonic()))
        self.stopped.set()
        return clean

    def request_stop(self) -> None:
        if self.coordinator is not None:
            self.coordinator.request_stop()
        for service in self.services().values():
            service.stop()

    def close(self) -> None:
        self._hub.close()

    # the coordinator's CameraRunner ----------------------------------------------------------------
    def start_camera(self, camera: str, previous_node: str | None) -> None:
        assert self._loaded is not None and self._events is not None
        loaded = one_camera(self._loaded, camera)
        service = WatchService(
            loaded,
            detector_factory=self._detectors,
            out=self.out,
            on_event=self._stored,
            on_frame=self._on_frame,
            clips_dir=self.clips.out_dir,
            events=self._events.node_camera(loaded, self.node, camera),  # the node's store, its own spool
        )
        service.start()
        with self._lock:
            self._services[camera] = service
        log.info("node %s runs camera %s%s", self.node, camera, f" (was on {previous_node})" if previous_node else "")

    def stop_camera(self, camera: str) -> None:
        with self._lock:
            service = self._services.pop(camera, None)
        if service is None:
            return
        service.stop()
        service.wait(self._stop_timeout_s)
        service.finish(self._stop_timeout_s)

    def camera_status(self, camera: str) -> dict[str, Any]:
        status = self._local_status(camera, (0.0, 0.0), False)
        if status is None:  # taken, its pipeline still starting
            status = without_pipeline(camera, "starting", self.node)
        return asdict(status)

    def services(self) -> dict[str, WatchService]:
        with self._lock:
            return dict(self._services)

    # events --------------------------------------------------------------------------------------
    def _stored(self, event: Event) -> None:
        """A camera service committed ``event``: the node's sinks send it (through the relay when the
        store relays: wake it), then the console hears of it."""
        if self._relay is not None:
            self._relay.wake()
        for sink in self._sinks if self._relay is None else []:
            try:
                sink.send(event)
            except Exception:  # noqa: BLE001 - one sink's failure never stops the others
                log.exception("alert sink %s failed on %s", type(sink).__name__, event.event_id)
        if self._on_event is not None:
            self._on_event(event)

    def _on_frame(self, frame: LiveFrame) -> None:
        self._hub.publish(frame)
        self.clips.add(frame)

    # retention, once per site ----------------------------------------------------------------------
    def _lead_retention(self) -> None:
        assert self._loaded is not None and self._events is not None
        self.retention_stage = self._events.start_retention(self._loaded.config, self.clips.out_dir)

    def _stop_retention(self) -> None:
        stage, self.retention_stage = self.retention_stage, None
        if stage is not None:
            stage.finish()

    # what the console shows ------------------------------------------------------------------------
    def leases(self) -> dict[str, CameraLease]:
        """Every camera's lease, read at most once a second."""
        now = time.monotonic()
        if self.coordinator is not None and now - self._leases_at >= 1.0:
            try:
                self._leases = self.coordinator.directory.leases()
                self._leases_at = now
            except Exception as exc:  # noqa: BLE001 - the directory is away: the last known
                log.debug("leases not read: %s", exc)
        return self._leases

    def nodes(self) -> list[NodeInfo]:
        return [] if self.coordinator is None else self.coordinator.nodes()

    def node_of(self, camera: str) -> str | None:
        """The node that runs ``camera`` now (None: nobody, between a node's death and the takeover)."""
        if camera in self.services():
            return self.node
        lease = self.leases().get(camera)
        return lease.node if lease is not None and lease.valid else None

    def remote_url(self, camera: str) -> str | None:
        """The console URL of the other node that runs ``camera``; None when it runs here or nowhere."""
        node = self.node_of(camera)
        if node is None or node == self.node:
            return None
        return next((n.url for n in self.nodes() if n.name == node), None)

    def _local_status(self, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus | None:
        service = self.services().get(camera)
        if service is None:
            return None
        status = LocalCameras.service_status(service, camera, fps, stopped)
        return CameraStatus(**{**asdict(status), "node": self.node})

    def status(self, camera: str, fps: tuple[float, float], stopped: bool) -> CameraStatus:
        local = self._local_status(camera, fps, stopped)
        if local is not None:
            return local
        if self.coordinator is None:  # before the start, as every backend: no pipeline yet
            return without_pipeline(camera, "stopped" if stopped else "starting")
        if camera in self.coordinator.held():  # taken here, starting
            return without_pipeline(camera, "starting", self.node)
        lease = self.leases().get(camera)
        if lease is None or not lease.valid or lease.node is None or not lease.status:
            state: ConsoleCameraState = "stopped" if stopped else "unassigned"
            return without_pipeline(camera, state)
        published = {k: v for k, v in lease.status.items() if k in CameraStatus.__dataclass_fields__}
        return CameraStatus(**{**published, "name": camera, "node": lease.node})

    def ready(self, within_s: float, stopped: bool) -> bool:
        """The node coordinates (its last renewal is recent) and each camera it runs read a frame lately."""
        coordinator = self.coordinator
        if stopped or coordinator is None or not coordinator.healthy():
            return False
        now = time.monotonic()
        return all(
            any(r.state(False, now) == "live" and now - r.stats.last_frame_at <= within_s for r in s.readers)
            for s in self.services().values()
        )

    def incident_started(self, event: Event) -> None:
        self.clips.request(event.camera_id, event.event_id, event.start_s)

    def snapshot_file(self, event_id: str, store: EventStore) -> Path | None:
        return LocalCameras.media_file(event_id, store, [self.snapshots_dir, self.media_dir])

    def prepare_zones(self, loaded: LoadedConfig, text: str, camera: str) -> ZoneEdit:
        service = self.services().get(camera)
        if service is None:  # runs on another node (or nowhere): it starts from the edited config here
            return lambda: self._adopt(loaded)
        one = one_camera(loaded, camera)
        if camera not in service.analytics:  # offline since its start: built from this when it comes online

            def adopt() -> None:
                service.adopt_config(one)
                self._adopt(loaded)

            return adopt
        parts = service.build_camera_parts(one, camera)

        def apply() -> None:
            service.apply_camera_parts(one, camera, parts)
            self._adopt(loaded)

        return apply

    def _adopt(self, loaded: LoadedConfig) -> None:
        """The config cameras started from now on are built from (a camera taken later has the edit)."""
        self._loaded = loaded

    def publish_zones(self, camera: str, parts: dict[str, Any]) -> None:
        """Tell the other nodes about a zone edit saved here (`ZoneEditListener` on each of them)."""
        if self.coordinator is None:
            return
        try:
            self.coordinator.directory.publish_zones(camera, parts)
        except DirectoryUnavailableError as exc:
            log.error("zone edit of camera %s saved here but not sent to the other nodes: %s", camera, exc)

    def listen_for_zone_edits(self, on_edit: Callable[[str, dict[str, Any], str], None]) -> None:
        """Take the zone edits saved on the other nodes (``on_edit(camera, parts, node)``) until `stop`."""
        if self.coordinator is not None:
            self._zone_edits = ZoneEditListener(self.coordinator.directory, on_edit)
            self._zone_edits.start()

    def health(self, camera: str) -> HealthStatus | None:
        service = self.services().get(camera)
        return None if service is None else service.health_status(camera)

    def accept_view(self, camera: str, by: str) -> bool:
        service = self.services().get(camera)
        if service is None:
            raise KeyError(camera)
        return service.accept_view(camera, by)

    def clear_old_view_zones(self, camera: str) -> None:
        service = self.services().get(camera)
        if service is not None:
            service.clear_old_view_zones(camera)

    def alert_sinks(self) -> list[AlertSink]:
        return list(self._sinks)
