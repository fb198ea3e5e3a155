"""`ConsoleRuntime`: the running pipeline as the console's HTTP layer sees it.

It starts the same `WatchService` as ``campusguard watch`` and adds what a console needs on
the side of the pipeline, none of which can slow it down:

- `FrameHub` (live view and snapshots: the analytics threads swap in their latest frame;
  JPEG encoding only while someone watches);
- `ClipRecorder` (a bounded ring buffer of recent frames per camera; an MP4 clip around
  each incident's start, written on its own thread);
- `EventBus` (each event, read back from the store after its commit, to every subscriber);
- Prometheus registries (`campusguard.app.console.prom.PipelineMetrics`: its sampler), read at scrape time;
- live zone, line, rule and privacy-mask edits (`put_zones`): the file's side (revisions, the
  save lock, validation, the atomic rewrite with a backup) is `campusguard.app.config.editor.ConfigEditor`'s;
  the runtime swaps the edit into the running camera between two frames (unchanged rules keep
  their state) and, with nodes, tells the other nodes.

Where the cameras run is one `campusguard.app.console.backends.CameraBackend`: `LocalCameras`
(this process), or with ``ray_address`` (``serve --ray``) `ClusterCameras`, groups on Ray actors
(`campusguard.app.cluster`) that the same features reach through actor calls: the live view
pulls each watched camera's latest JPEG from its actor, incident snapshots and clips are copied
from the actors into the media folders, and zone edits are checked and applied by the camera's
actor (and kept for its restarts).

Everything here is thread-safe and synchronous; the web layer calls it from worker threads.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import time
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from campusguard.app.cluster.group import DetectorFactoryMaker, GroupUnavailableError
from campusguard.app.config import CameraConfig, load_config
from campusguard.app.config.editor import (
    EDITABLE_PARTS,
    ConfigEditor,
    ZonesSave,
    camera_parts,
    check_edit,
    editable_state,
)
from campusguard.app.config.privacy import BlurMode
from campusguard.app.config.retention import parse_free
from campusguard.app.console.backends import (
    MEDIA_EVENT_ID,
    CameraBackend,
    CameraState,
    CameraStatus,
    ClusterCameras,
    HealthStatus,
    LocalCameras,
)
from campusguard.app.console.eventbus import EventBus, EventSubscription
from campusguard.app.console.node_cameras import NodeCameras
from campusguard.app.console.prom import PipelineMetrics
from campusguard.app.engine.wiring import DetectorFactory, open_config_store
from campusguard.app.events.protocols import EventDatabase
from campusguard.app.events.types import Event
from campusguard.app.infra.diskspace import VolumeState, disk_health
from campusguard.app.media.clips import ClipRecorder
from campusguard.app.media.live import FrameHub, Viewer
from campusguard.app.media.policy import media_blur
from campusguard.app.media.redact import redacted_path
from campusguard.app.nodes.service import NodeService
from campusguard.errors import ConfigError

log = logging.getLogger("campusguard.app.console")

if TYPE_CHECKING:
    from campusguard.app.cluster.driver import ClusterWatch
    from campusguard.app.service import WatchService

__all__ = [
    "CameraState",
    "CameraStatus",
    "ConsoleRuntime",
    "GroupUnavailableError",
]

@dataclasses.dataclass(frozen=True)
class StorageStatus:
    """The data volume and the media on it (`ConsoleRuntime.storage_status`, ``GET /api/v1/storage``)."""

    free_bytes: int
    total_bytes: int
    media_bytes: dict[str, int]
    max_media_bytes: int | None
    min_free_bytes: int
    full_volumes: list[VolumeState]


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
        ray_address: run the cameras in groups on the Ray cluster at this address (``serve --ray``,
            `ClusterCameras`); frames, media and zone edits then go through actor calls, and a
            group that does not answer in time (restarting) raises `GroupUnavailableError`.
        group_detector_factory: with ``ray_address``, builds each group's detector factory
            (default: `campusguard.Detector` from the config).
        cluster_timeout_s: with ``ray_address``, how long a frame or zone request waits for
            its group's actor, seconds.
        node: run as this node of the site (``serve --node``, `NodeCameras`): the cameras are
            shared with the other nodes on the config's PostgreSQL store and taken over from a dead one.
        node_url: with ``node``, this console's base URL (the other nodes proxy its live views).

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
        group_detector_factory: DetectorFactoryMaker | None = None,
        cluster_timeout_s: float = 5.0,
        node: str | None = None,
        node_url: str | None = None,
    ) -> None:
        self.config_path = Path(config_path)
        self.node = node
        self.ray_address = ray_address
        self.loaded = load_config(self.config_path)
        config = self.loaded.config
        self.media_dir = (
            Path(media_dir)
            if media_dir
            else Path(config.storage.media) if config.storage.media else Path(config.storage.sqlite).parent / "media"
        )
        if config.outputs.snapshots_dir is None and ray_address is None:  # on Ray: each actor's own folder
            outputs = config.outputs.model_copy(update={"snapshots_dir": str(self.media_dir / "snapshots")})
            self.loaded.config = config.model_copy(update={"outputs": outputs})
        self.snapshots_dir = Path(self.loaded.config.outputs.snapshots_dir or self.media_dir / "snapshots")
        self.clips_dir = self.media_dir / "clips"
        self.out = out or sys.stdout
        self.ready_within_s = ready_within_s
        self._camera_ids = [c.id for c in self.loaded.config.cameras if c.enabled]
        self.store: EventDatabase = open_config_store(self.loaded)  # lent to the pipeline (`EventSide.borrowed`)
        self.clips = ClipRecorder(self.clips_dir, pre_s=clip_pre_s, post_s=clip_post_s)
        self.cameras: CameraBackend = self._camera_backend(
            detector_factory, live_fps, ray_address, group_detector_factory, cluster_timeout_s, node_url
        )
        self.bus = EventBus()
        self.metrics = PipelineMetrics(
            lambda: self.service,
            camera_states=lambda: {c.name: c.state for c in self.camera_status()},
            sink_health=self.mqtt_connected,
            site_nodes=self.node_table,
        )
        self.registry, self.viewer_registry = self.metrics.registry, self.metrics.viewer_registry
        self.editor = ConfigEditor(self.config_path)  # zone edits: the file's revisions, lock and rewrite
        # each camera's editable parts as its pipeline was last given them (at the start, or its
        # last save): a hand edit of the file reaches a running camera only with a save to it
        self._applied = {c.id: camera_parts(c) for c in self.loaded.config.cameras}
        self._stopped = False

    def _camera_backend(
        self,
        detector_factory: DetectorFactory | None,
        live_fps: float,
        ray_address: str | None,
        group_detector_factory: DetectorFactoryMaker | None,
        cluster_timeout_s: float,
        node_url: str | None,
    ) -> CameraBackend:
        if ray_address is not None:
            return ClusterCameras(
                self._camera_ids,
                ray_address,
                self.clips,
                media_dir=self.media_dir,
                detector_factory=group_detector_factory,
                out=self.out,
                live_fps=live_fps,
                timeout_s=cluster_timeout_s,
            )
        if self.node is not None:
            return NodeCameras(
                self._camera_ids,
                self.clips,
                node=self.node,
                url=node_url,
                snapshots_dir=self.snapshots_dir,
                media_dir=self.media_dir,
                detector_factory=detector_factory,
                out=self.out,
                live_fps=live_fps,
            )
        return LocalCameras(
            self._camera_ids,
            self.clips,
            snapshots_dir=self.snapshots_dir,
            media_dir=self.media_dir,
            detector_factory=detector_factory,
            out=self.out,
            live_fps=live_fps,
        )

    @property
    def hub(self) -> FrameHub:
        """The cameras' live view and snapshots (`CameraBackend.hub`)."""
        return self.cameras.hub

    @property
    def service(self) -> WatchService | ClusterWatch | NodeService | None:
        """The running pipeline: `WatchService`, the cluster driver `ClusterWatch` with ``ray_address``,
        or a node's `NodeService` with ``node``; ``None`` before a successful `start`."""
        return self.cameras.service

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the pipeline (probe sources, load models, start workers) and the side threads.

        Raises:
            ConfigError, SourceError, ModelLoadError: what ``campusguard watch`` would refuse.
        """
        self.cameras.start(self.loaded, self.store, self._on_event)  # one store: events, retention, reads
        if isinstance(self.cameras, NodeCameras):  # zone edits saved on the other nodes' consoles
            self.cameras.listen_for_zone_edits(self._zones_from_another_node)
        self.clips.start()
        self.metrics.start()

    def request_stop(self) -> None:
        """Ask the cameras to stop without waiting (safe from a signal handler); `stop` finishes."""
        self.cameras.request_stop()

    def stop(self, timeout_s: float = 30.0) -> bool:
        """End open events (committed), write pending clips, close viewers, subscriptions and the store;
        False when the cameras did not end within ``timeout_s`` seconds or a worker failed."""
        if self._stopped:
            return True
        self._stopped = True
        deadline = time.monotonic() + timeout_s
        clean = self.cameras.stop(timeout_s)
        self.metrics.stop()
        self.cameras.close()
        self.clips.close(max(1.0, deadline - time.monotonic()))  # pending clips, within the stop's time
        self.bus.close()
        self.store.close()
        return clean

    def __enter__(self) -> ConsoleRuntime:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # pipeline hooks (pipeline threads) --------------------------------------------------------
    def _on_event(self, event: Event) -> None:
        """Called by the event worker after the store's commit: counters, clip, push."""
        if event.phase == "start":
            self.metrics.event_started(event)
            self.cameras.incident_started(event)
        data = self.event_json(event.event_id)
        if data is not None:
            self.bus.publish(data)

    # cameras --------------------------------------------------------------------------------
    def camera_names(self) -> list[str]:
        """Ids of the enabled cameras, in config order."""
        return list(self._camera_ids)

    def _check_camera(self, camera: str) -> None:
        if camera not in self._camera_ids:
            raise KeyError(camera)

    def remote_url(self, camera: str) -> str | None:
        """With nodes: the console URL of the other node that runs ``camera`` (its live view is
        proxied there); None when it runs here, nowhere, or there are no nodes."""
        cameras = self.cameras
        return cameras.remote_url(camera) if isinstance(cameras, NodeCameras) else None

    def node_table(self) -> list[dict[str, Any]] | None:
        """With nodes: every node of the site, when it was last seen, and the cameras it runs; None without."""
        cameras = self.cameras
        if not isinstance(cameras, NodeCameras):
            return None
        leases = cameras.leases()
        return [
            {
                "name": n.name,
                "url": n.url,
                "host": n.host,
                "live": not n.stopped and n.age_s <= self.loaded.config.nodes.dead_s,
                "stopped": n.stopped,
                "started_at": n.started_at,
                "seen_at": n.seen_at,
                "seen_s_ago": round(n.age_s, 3),
                "cameras": sorted(c for c, lease in leases.items() if lease.valid and lease.node == n.name),
                "this_node": n.name == cameras.node,
            }
            for n in cameras.nodes()
        ]

    def camera_status(self) -> list[CameraStatus]:
        """Every enabled camera's state and rates."""
        return [self.cameras.status(c, self.metrics.fps(c), self._stopped) for c in self._camera_ids]

    def ready(self) -> bool:
        """True when the pipeline runs and some camera read a frame within ``ready_within_s`` seconds
        (on Ray: is live as of its group's last answer); the others are in `cameras_down`."""
        return self.cameras.ready(self.ready_within_s, self._stopped)

    def cameras_down(self) -> dict[str, str]:
        """The enabled cameras that are not live, with their state (``offline``, ``reconnecting``, ...)."""
        return {c.name: c.state for c in self.camera_status() if c.state != "live"}

    def camera_health(self, camera: str) -> HealthStatus | None:
        """The camera's health now (`CameraBackend.health`): ``None`` when its health is off, it is not
        running, or on Ray. ``KeyError`` for an unknown camera."""
        self._check_camera(camera)
        return self.cameras.health(camera)

    def problem_since(self, status: HealthStatus) -> datetime | None:
        """Wall-clock time the camera's current health problem began: its open incident's start less the
        time the problem had lasted by then (`Event.onset_s`); ``None`` while the incident is not stored yet."""
        if status.event_id is None:
            return None
        event = self.store.get(status.event_id)
        if event is None or event.started_at is None:
            return None
        onset_s = event.start_s if event.onset_s is None else event.onset_s
        return event.started_at - timedelta(seconds=max(0.0, event.start_s - onset_s))

    def accept_view(self, camera: str, by: str) -> bool:
        """Make the camera's current view its reference (`CameraBackend.accept_view`); False when
        nothing was measured yet.

        Raises:
            KeyError: unknown camera, not running, its health off, or on Ray.
        """
        self._check_camera(camera)
        return self.cameras.accept_view(camera, by)

    def disk_problems(self) -> list[str]:
        """One line per full volume (path, free bytes, the last write that failed), for ``/readyz``."""
        return [
            f"disk full: {v} has {st.free_bytes} bytes free ({st.last_error})"
            for v, st in sorted(disk_health().full_volumes().items())
        ]

    def storage_status(self) -> StorageStatus:
        """Free and total bytes of the volume holding the media folder, media kept by kind (the
        retention cleanup's last pass; none on Ray or before the first pass), the limits, full volumes."""
        folder = self.media_dir if self.media_dir.exists() else self.config_path.parent
        usage = shutil.disk_usage(folder)
        retention = self.loaded.config.retention
        service = self.service
        cleaner = getattr(service, "retention", None)
        kept = dict(cleaner.metrics.kept_bytes) if cleaner is not None else {}
        return StorageStatus(
            free_bytes=usage.free,
            total_bytes=usage.total,
            media_bytes=kept,
            max_media_bytes=retention.max_media_bytes(),
            min_free_bytes=parse_free(retention.min_free, usage.total),
            full_volumes=list(disk_health().full_volumes().values()),
        )

    def snapshot_jpeg(self, camera: str, redacted: bool = False) -> bytes | None:
        """JPEG of the camera's latest annotated frame (``None`` before the first); ``KeyError`` if unknown.

        ``redacted``: with the camera's blur applied (a viewer-role client); the same as sharp
        for a camera without blur.

        Raises:
            GroupUnavailableError: on Ray, the camera's group did not answer in time (restarting).
        """
        self._check_camera(camera)
        return self.hub.snapshot_jpeg(camera, redacted)

    def open_viewer(self, camera: str, maxsize: int = 2, redacted: bool = False) -> Viewer:
        """A live viewer (``get(timeout) -> JPEG bytes | None``, ``close()``); ``KeyError`` if unknown.

        ``redacted``: it gets the camera's blurred frames. On Ray a viewer gets no frames while
        the camera's group restarts.
        """
        self._check_camera(camera)
        return self.hub.open_viewer(camera, maxsize, redacted)

    def camera_blur(self, camera: str) -> BlurMode | None:
        """The camera's ``privacy.blur`` as now configured; ``None`` for a camera the config no longer names."""
        cam = next((c for c in self.loaded.config.cameras if c.id == camera), None)
        return None if cam is None else cam.privacy.blur

    def media_blur(self, camera: str, recorded: str | None) -> str:
        """The blur viewers get on an incident's media (`campusguard.app.media.policy.media_blur`):
        the stricter of ``recorded`` (the event's ``media_blur``, the policy its media were made
        under) and the camera's blur now; unknown (``None``, a camera no longer in the config) is
        the strictest."""
        return media_blur(recorded, self.camera_blur(camera))

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

    def event_media(
        self,
        event_id: str,
        kind: Literal["snapshot", "clip"],
        *,
        viewer_of: str | None = None,
        recorded_blur: str | None = None,
    ) -> Path | None:
        """The event's snapshot JPEG or clip MP4, only if it is a file under the runtime's media folders.

        ``viewer_of`` (a viewer-role client; the event's camera, from the record the caller holds,
        with ``recorded_blur``, the record's ``media_blur``): unless `media_blur` is ``none`` (the
        media were made without blur and the camera, still in the config, has none), the redacted
        variant only (`campusguard.app.media.redact.redacted_path`), never the sharp file: ``None``
        when there is none (media written before the blur was switched on).
        """
        sharp = self._sharp_media(event_id, kind)
        if sharp is None or viewer_of is None or self.media_blur(viewer_of, recorded_blur) == "none":
            return sharp
        variant = redacted_path(sharp)
        return variant if variant.is_file() else None

    def _sharp_media(self, event_id: str, kind: Literal["snapshot", "clip"]) -> Path | None:
        if not isinstance(event_id, str) or not MEDIA_EVENT_ID.match(event_id):  # media names are built from ids
            return None
        if kind == "clip":
            path = self.clips.path_for(event_id)
            return path if path.is_file() else None
        if kind != "snapshot":
            return None
        return self.cameras.snapshot_file(event_id, self.store)

    # zones ----------------------------------------------------------------------------------
    def get_zones(self, camera: str) -> dict[str, Any]:
        """``{"zones", "lines", "rules", "privacy"}`` of a camera as the running config has them (every
        rule with its name: `RuleConfigBase.display_name` where the file gives none); ``KeyError`` if unknown."""
        self._check_camera(camera)
        return editable_state(self._running_camera(camera))

    def _running_camera(self, camera: str) -> CameraConfig:
        """The camera's section of the running config; ``KeyError`` where it names no such camera."""
        cam = next((c for c in self.loaded.config.cameras if c.id == camera), None)
        if cam is None:
            raise KeyError(camera)
        return cam

    def zones_revision(self, camera: str) -> tuple[dict[str, Any], str]:
        """The camera's zones as they stand in the config file on disk now, and their revision
        (`ConfigEditor.camera_view`: the ``ETag`` of the zones API, the ``If-Match`` of `save_zones`).
        Where the file no longer validates or no longer names the camera, the running config's zones
        (a save then says why it cannot be made).

        Raises:
            KeyError: unknown camera.
            ConfigSaveError: the config file cannot be read.
        """
        self._check_camera(camera)
        return self.editor.camera_view(camera, self.loaded)

    def put_zones(
        self, camera: str, body: dict[str, Any], if_match: str | Collection[str] | None = None
    ) -> dict[str, Any]:
        """`save_zones`, answering the camera's zones as saved."""
        return self.save_zones(camera, body, if_match).zones

    def save_zones(
        self, camera: str, body: dict[str, Any], if_match: str | Collection[str] | None = None, *, publish: bool = True
    ) -> ZonesSave:
        """Replace a camera's zones, lines, rules and privacy masks: validate, apply live, rewrite the
        YAML (the previous version kept as ``.bak`` and among the last `REVISIONS_KEPT` revisions).

        ``body`` has any of `EDITABLE_PARTS` (a missing key keeps what the camera has). Rules naming a
        zone or line that no longer exists make it invalid. Rules the edit leaves as they were (and
        whose zone or line is unchanged) keep running: their ongoing incidents go on. Every rule is
        written with its name (generated as ``<kind>:<zone or line>`` where it has none), so later
        edits and the audit know it by that name. A save that changes nothing (the camera's section
        in the file, and what its pipeline runs, are already what the edit asks for) writes nothing.

        Under the save lock the file is read as it is now and only this camera's section is
        replaced: every other camera's section, and the rest of the file, are written back as they
        are on disk (saved by another admin, or edited by hand), never from an older copy. Such a
        hand edit of another camera reaches the console's view of it with this save, and that
        camera's running pipeline with a save to it (or a restart).

        A save, also one that changes nothing, forgets the zones recorded when the camera's new view
        was accepted (camera health's ``zones_on_old_view``): the admin has looked at them on the new view.

        Args:
            camera: the camera's id.
            body: the edit.
            if_match: the camera's revision (or revisions) the edit was made on (`zones_revision`);
                ``None``: any.
            publish: with nodes, tell the other nodes (they write it into their config files, and the
                node running the camera applies it); False for an edit that came from another node.

        Raises:
            KeyError: unknown camera.
            RevisionConflictError: the camera's section is no longer at ``if_match`` (another admin
                saved it, or it was edited in the file, since); carries its revision now. Changes
                to other cameras are no conflict.
            ConfigError: the body is invalid, a zone leaves the camera's frame, or a rule names an
                unknown class; the message names the field of the body (``rules[0].zone: ...``) and
                never the server's config path.
            ConfigSaveError: the config file could not be read or rewritten, or no longer names the
                camera (renamed or removed by hand); nothing changed.
            GroupUnavailableError: on Ray, the camera's group did not answer the check in time
                (restarting); nothing changed. (When only the sending goes unanswered, the file is
                saved and the group gets the edit with its next pull.)
        """
        self._check_camera(camera)
        body = check_edit(body)
        with self.editor.lock:  # the save, and what the runtime keeps of it, as one step
            saved = self.editor.save(
                camera,
                body,
                if_match,
                self.loaded,
                applied=self._applied.get(camera),
                prepare=lambda loaded, text: self.cameras.prepare_zones(loaded, text, camera),
            )
            if saved.config is not None and saved.parts is not None:
                self.loaded, self._applied[camera] = saved.config, saved.parts
            self.cameras.clear_old_view_zones(camera)  # saved on the view it has now: checked
            if publish and saved.changed and isinstance(self.cameras, NodeCameras):
                self.cameras.publish_zones(camera, self._applied[camera])
            return saved

    def _zones_from_another_node(self, camera: str, parts: dict[str, Any], node: str) -> None:
        """A zone edit saved on ``node``'s console: into this node's config file, applied where it runs here."""
        if camera not in self._camera_ids:
            return
        saved = self.save_zones(camera, parts, None, publish=False)
        if saved.changed:
            log.info("zones of camera %s as saved on node %s: written here%s", camera, node,
                     " and applied" if camera in self.cameras_running_here() else "")

    def cameras_running_here(self) -> set[str]:
        """With nodes, the cameras this node runs now (every enabled camera without nodes)."""
        cameras = self.cameras
        return set(cameras.services()) if isinstance(cameras, NodeCameras) else set(self._camera_ids)

    def replay_zones(self, camera: str, body: dict[str, Any], *, days: float = 7.0) -> Any:
        """What the camera's edited zones, lines and rules (``body``, as `save_zones` takes it) would
        have raised over its stored tracks of the last ``days``, against its stored incidents and their
        outcomes (`campusguard.app.tracks.replay.ReplayResult`); nothing is saved or applied.

        Raises:
            KeyError: unknown camera.
            ConfigError: the body is invalid (the message names its field), or a rule cannot be built
                for the recorded frames.
        """
        from datetime import UTC, datetime, timedelta

        from campusguard.app.tracks.replay import run_replay

        self._check_camera(camera)
        if not isinstance(body, dict) or set(body) - set(EDITABLE_PARTS):
            raise ConfigError(f"the body must be an object with {', '.join(map(repr, EDITABLE_PARTS))}")
        loaded = self.editor.edited(camera, body)
        since = datetime.now(UTC) - timedelta(days=days)
        return run_replay(loaded, since=since, cameras={camera}, store=self.store)

    # metrics --------------------------------------------------------------------------------
    def count_outcome(self, rule: str, outcome: str) -> None:
        """One more ``outcome`` recorded for an incident of ``rule`` (`PipelineMetrics.count_outcome`)."""
        self.metrics.count_outcome(rule, outcome)

    def mqtt_connected(self) -> dict[str, bool]:
        """Each connection the alert sinks keep (an MQTT sink's broker, ``host:port``) and whether it is
        up now (``/readyz``, metrics): what each sink reports of itself (`SinkHealth`)."""
        from campusguard.app.alerts.protocol import SinkHealth

        return {k: v for s in self.cameras.alert_sinks() if isinstance(s, SinkHealth) for k, v in s.health().items()}
