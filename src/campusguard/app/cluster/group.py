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
"""

from __future__ import annotations

import dataclasses
import io
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from campusguard.app.config import CameraConfig, LoadedConfig, WatchConfig
from campusguard.app.events.types import Event
from campusguard.app.service import DetectorFactory, WatchService, default_detector_factory, open_camera
from campusguard.app.sources import FrameSource
from campusguard.errors import CampusGuardError

__all__ = [
    "METRIC_COUNTERS",
    "Ack",
    "Batch",
    "CameraGroup",
    "ClusterError",
    "ConfigSpec",
    "DetectorFactoryMaker",
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
    "inference_ms_total",
    "events",
    "reconnects",
)
"""The `CameraMetrics` counters a group reports to the driver (all grow from 0 per incarnation)."""


class ClusterError(CampusGuardError):
    """The cluster cannot run the cameras: no Ray, no cluster at the address, a group that never started."""


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
    def of(cls, loaded: LoadedConfig, camera_ids: list[str]) -> ConfigSpec:
        """The spec of ``camera_ids``' group (`group_config`) of ``loaded``."""
        data = group_config(loaded, camera_ids).config.model_dump(mode="json")
        keep = set(camera_ids)
        data["cameras"] = [
            c if c["id"] in keep else {"id": c["id"], "source": c["source"], "enabled": False} for c in data["cameras"]
        ]
        path = Path(loaded.path)
        text = None
        if path.is_file() and path.stat().st_size <= MAX_SHIPPED_TEXT:
            text = path.read_text(encoding="utf-8")
        return cls(data, loaded.path, text)

    def load(self) -> LoadedConfig:
        """The `LoadedConfig` again (validated; with line numbers when the text came along)."""
        root = yaml.compose(self.text, Loader=yaml.SafeLoader) if self.text else None
        return LoadedConfig(WatchConfig.model_validate(self.data), self.path, root)


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
        metrics: per camera, the `METRIC_COUNTERS` of this incarnation and ``queue_depth``.
        error: a start-up error (one line, naming the config line); the group did not start.
    """

    incarnation: str
    events: list[tuple[int, Event]] = field(default_factory=list)
    finished: bool = False
    clean: bool = True
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None


class Outbox:
    """The group's event store: numbered updates kept until acknowledged (thread-safe).

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
    """

    def __init__(
        self,
        loaded: LoadedConfig | ConfigSpec,
        camera_ids: list[str],
        *,
        detector_factory: DetectorFactoryMaker | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
        max_batch: int = 256,
    ) -> None:
        self.loaded = group_config(loaded.load() if isinstance(loaded, ConfigSpec) else loaded, camera_ids)
        self.camera_ids = list(camera_ids)
        self.incarnation = uuid.uuid4().hex
        self.outbox = Outbox()
        self.max_batch = max_batch
        make = detector_factory or default_detector_factory
        self.service = WatchService(
            self.loaded, detector_factory=make(self.loaded), opener=opener, out=io.StringIO(), store=self.outbox
        )
        self._started = False
        self._error: str | None = None
        self._clean: bool | None = None

    def pull(self, ack: Ack | None = None, stop: bool = False) -> Batch:
        """Forget what ``ack`` acknowledges (if it is meant for this incarnation); return what is pending.

        The first call starts the service; a start-up failure comes back as ``Batch.error``.
        ``stop``: the driver is stopping; a group restarted after `stop` was sent learns it here.
        """
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
        )

    def stop(self) -> None:
        """Ask the cameras to end; open incidents are ended and come out in the next pulls."""
        self.service.stop()

    def metrics(self) -> dict[str, dict[str, float]]:
        """Per camera: the `METRIC_COUNTERS` so far and the current ``queue_depth``."""
        if self._started and self._error is None:
            self.service.refresh_metrics()
        out = {}
        for cam_id, m in self.service.metrics.items():
            values = {k: float(getattr(m, k)) for k in METRIC_COUNTERS}
            values["queue_depth"] = float(m.queue_depth())
            out[cam_id] = values
        return out

    def _start(self) -> None:
        self._started = True
        try:
            self.service.start()
        except CampusGuardError as exc:
            self._error = str(exc)
