"""Prometheus metrics of a running pipeline, in a registry of its own (``campusguard_*``).

Nothing here runs per frame: the pipeline keeps its plain counters (`CameraMetrics`, the
readers' stats) and `PipelineCollector` turns a `PipelineSample` of them into metric families
when Prometheus scrapes. Labels are the camera, and for events the rule and its kind, all
taken from the config, so their number is bounded; the event store's counters have none.

`PipelineMetrics` is the console's sampler: what it counts beside the pipeline (frame rates
sampled every second, incident starts, outcomes recorded through the API), the `PipelineSample`
it makes at each scrape, and the two registries that read it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, get_args

from campusguard.app.engine.metrics import FrameRates, LatencyHistogram
from campusguard.app.engine.sources import CameraState
from campusguard.app.infra.diskspace import disk_health
from campusguard.errors import require

if TYPE_CHECKING:
    from campusguard.app.cluster.driver import ClusterWatch
    from campusguard.app.events.types import Event
    from campusguard.app.nodes.service import NodeService
    from campusguard.app.service import WatchService

__all__ = [
    "CAMERA_STATES",
    "CameraSample",
    "PipelineCollector",
    "PipelineMetrics",
    "PipelineSample",
    "build_registry",
    "site_view",
]

CAMERA_STATES: tuple[str, ...] = get_args(CameraState)


@dataclass(frozen=True)
class CameraSample:
    """One camera's counters and rates at scrape time."""

    camera: str
    frames_read: int
    frames_processed: int
    frames_dropped: int
    reconnects: int
    input_fps: float
    processed_fps: float
    queue_depth: int
    inference_seconds: LatencyHistogram
    detector_images: int = 0
    frames_skipped: int = 0
    frames_regions: int = 0
    frames_gate_busy: int = 0
    gate_seconds: LatencyHistogram | None = None  # motion-gated cameras only
    state: str = ""  # `campusguard.app.engine.sources.CameraState`


@dataclass(frozen=True)
class PipelineSample:
    """Everything exported at one scrape: per-camera samples, event starts by (camera, rule, kind),
    and the event worker's store writes that failed and were retried, and updates it spooled."""

    cameras: Sequence[CameraSample] = ()
    events: dict[tuple[str, str, str], int] = field(default_factory=dict)
    store_retries: int = 0
    events_spooled: int = 0
    media_bytes: dict[str, int] = field(default_factory=dict)
    free_bytes: int | None = None
    files_pruned: dict[str, int] = field(default_factory=dict)
    rows_pruned: int = 0
    disk_full: dict[str, bool] = field(default_factory=dict)  # volume a write failed on -> full now
    disk_write_failures: dict[str, int] = field(default_factory=dict)  # kind of write -> failed for lack of room
    mqtt_connected: dict[str, bool] = field(default_factory=dict)  # broker "host:port" -> connected
    site_nodes_live: dict[str, bool] = field(default_factory=dict)  # with nodes: every node of the site -> live
    site_node_cameras: dict[str, int] = field(default_factory=dict)  # with nodes: node -> cameras it runs
    outcomes: dict[tuple[str, str], int] = field(default_factory=dict)  # (rule, outcome) -> recorded since start


def viewer_sample(sample: PipelineSample) -> PipelineSample:
    """``sample`` as a viewer may read it: full volumes by number (``volume-1``), never their paths
    (a mount point names the site's layout; operators and admins get the paths)."""
    if not sample.disk_full:
        return sample
    numbered = {f"volume-{i}": full for i, (_, full) in enumerate(sorted(sample.disk_full.items()), 1)}
    return replace(sample, disk_full=numbered)


class PipelineCollector:
    """A prometheus-client custom collector reading a `PipelineSample` at each scrape.

    Args:
        sample: returns the current sample (called from the scraping thread).
    """

    def __init__(self, sample: Callable[[], PipelineSample]) -> None:
        self.sample = sample

    def describe(self) -> list[Any]:
        return list(self._families(PipelineSample()))

    def collect(self) -> Iterator[Any]:
        yield from self._families(self.sample())

    def _families(self, s: PipelineSample) -> Iterator[Any]:
        core = require("prometheus_client.core", "console")
        cams = ["camera"]

        def counter(name: str, doc: str, attr: str) -> Any:
            fam = core.CounterMetricFamily(f"campusguard_{name}", doc, labels=cams)
            for c in s.cameras:
                fam.add_metric([c.camera], float(getattr(c, attr)))
            return fam

        def gauge(name: str, doc: str, attr: str) -> Any:
            fam = core.GaugeMetricFamily(f"campusguard_{name}", doc, labels=cams)
            for c in s.cameras:
                fam.add_metric([c.camera], float(getattr(c, attr)))
            return fam

        yield counter("frames_read", "Frames read from the camera's source.", "frames_read")
        yield counter("frames_processed", "Frames that went through detection, tracking and rules.", "frames_processed")
        yield counter("frames_dropped", "Frames dropped by the camera's drop-oldest queue.", "frames_dropped")
        yield counter("reconnects", "Times the camera's source was reopened.", "reconnects")
        yield counter(
            "detector_images", "Images sent to the detector for the camera (whole frames and crops).", "detector_images"
        )
        yield counter("frames_skipped", "Frames the motion gate skipped (no detector call).", "frames_skipped")
        yield counter(
            "frames_regions", "Frames detected on motion and track crops instead of the whole frame.", "frames_regions"
        )
        states = core.GaugeMetricFamily(
            "campusguard_camera_state",
            "1 for the camera's state now (starting, live, reconnecting, offline, stopped, failed), 0 for the others.",
            labels=["camera", "state"],
        )
        for c in s.cameras:
            for st in CAMERA_STATES:
                states.add_metric([c.camera, st], float(c.state == st))
        yield states
        yield gauge("input_fps", "Frames read per second over the last seconds.", "input_fps")
        yield gauge("processed_fps", "Frames processed per second over the last seconds.", "processed_fps")
        yield gauge("queue_depth", "Frames waiting between the camera's reader and detection.", "queue_depth")
        hist = core.HistogramMetricFamily(
            "campusguard_inference_latency_seconds",
            "Per-frame share of batched detector inference time.",
            labels=cams,
        )
        for c in s.cameras:
            h = c.inference_seconds
            buckets = [("+Inf" if b == float("inf") else repr(b), float(n)) for b, n in h.cumulative()]
            hist.add_metric([c.camera], buckets, h.sum_s)
        yield hist
        yield counter(
            "frames_gate_busy",
            "Gated frames sent whole without the motion gate's work (busy scene).",
            "frames_gate_busy",
        )
        gate = core.HistogramMetricFamily(
            "campusguard_motion_gate_seconds",
            "The motion gate's own work per gated frame (motion analysis, planning, crops, merge).",
            labels=cams,
        )
        for c in s.cameras:
            if (g := c.gate_seconds) is not None and g.count:
                buckets = [("+Inf" if b == float("inf") else repr(b), float(n)) for b, n in g.cumulative()]
                gate.add_metric([c.camera], buckets, g.sum_s)
        yield gate
        events = core.CounterMetricFamily(
            "campusguard_events", "Incidents raised (event starts).", labels=["camera", "rule", "kind"]
        )
        for (camera, rule, kind), n in sorted(s.events.items()):
            events.add_metric([camera, rule, kind], float(n))
        yield events
        outcomes = core.CounterMetricFamily(
            "campusguard_incident_outcomes",
            "Outcomes operators recorded when resolving incidents (confirmed, false_alarm, nuisance), by rule.",
            labels=["rule", "outcome"],
        )
        for (rule, outcome), n in sorted(s.outcomes.items()):
            outcomes.add_metric([rule, outcome], float(n))
        yield outcomes
        yield core.CounterMetricFamily(
            "campusguard_store_retries",
            "Event store writes that failed (store unavailable) and were tried again or spooled.",
            value=float(s.store_retries),
        )
        yield core.CounterMetricFamily(
            "campusguard_events_spooled",
            "Event updates written to the local spool because the store was unavailable at a stop.",
            value=float(s.events_spooled),
        )
        yield _by_label(
            core.GaugeMetricFamily,
            "campusguard_disk_full",
            "1 while a volume the app writes to is full (media left out), 0 once it has room again.",
            "volume",
            s.disk_full,
        )
        yield _by_label(
            core.CounterMetricFamily,
            "campusguard_disk_write_failures",
            "Writes that failed or were left out for lack of room, by kind (recording, snapshot, event row, ...).",
            "kind",
            s.disk_write_failures,
        )
        yield _by_label(
            core.GaugeMetricFamily,
            "campusguard_mqtt_connected",
            "1 while the MQTT sink holds a connection to its broker, 0 while its messages wait in the outbox.",
            "broker",
            s.mqtt_connected,
        )
        if s.site_nodes_live:  # the site view (serve --node): every node, as this node reads the directory
            yield _by_label(
                core.GaugeMetricFamily,
                "campusguard_site_node_live",
                "With nodes: 1 while the node's heartbeat is recent (every node of the site, as this node sees it).",
                "node",
                s.site_nodes_live,
            )
            yield _by_label(
                core.GaugeMetricFamily,
                "campusguard_site_node_cameras",
                "With nodes: cameras each node of the site holds a valid lease for.",
                "node",
                s.site_node_cameras,
            )
        yield from _retention_families(core, s)


def _by_label(family: Any, name: str, doc: str, label: str, values: Mapping[str, float]) -> Any:
    """A metric family of one label, a sample per key in key order (booleans as 1 and 0)."""
    fam = family(name, doc, labels=[label])
    for key, value in sorted(values.items()):
        fam.add_metric([key], float(value))
    return fam


def _retention_families(core: Any, s: PipelineSample) -> Iterator[Any]:
    """Retention (`campusguard.app.retention`): media kept and pruned by kind, incidents pruned, free space."""
    yield _by_label(
        core.GaugeMetricFamily,
        "campusguard_media_bytes",
        "Bytes of media kept on disk by kind (after the last cleanup pass).",
        "kind",
        s.media_bytes,
    )
    yield _by_label(
        core.CounterMetricFamily,
        "campusguard_retention_files_pruned",
        "Files deleted by retention, by kind.",
        "kind",
        s.files_pruned,
    )
    yield core.CounterMetricFamily(
        "campusguard_retention_rows_pruned", "Incidents deleted by retention.", value=float(s.rows_pruned)
    )
    if s.free_bytes is not None:
        yield core.GaugeMetricFamily(
            "campusguard_data_free_bytes",
            "Free bytes of the fullest data volume (store and media).",
            value=float(s.free_bytes),
        )


def build_registry(sample: Callable[[], PipelineSample]) -> Any:
    """A new ``prometheus_client.CollectorRegistry`` holding only this pipeline's collector."""
    prom = require("prometheus_client", "console")
    registry = prom.CollectorRegistry(auto_describe=True)
    registry.register(PipelineCollector(sample))
    return registry


def site_view(table: Sequence[Mapping[str, Any]] | None) -> dict[str, Any]:
    """With nodes, the site's nodes for the metrics (``table``: the runtime's `node_table`): live or
    not, and how many cameras each runs; nothing without nodes."""
    if not table:
        return {}
    return {
        "site_nodes_live": {n["name"]: n["live"] for n in table},
        "site_node_cameras": {n["name"]: len(n["cameras"]) for n in table},
    }


class PipelineMetrics:
    """The console's metrics of its pipeline: what it counts itself, and the sample each scrape reads.

    - Frame rates: a thread (`start`, `stop`) reads the pipeline's frame counters every
      ``interval_s`` into `FrameRates` (`fps`: the camera status and the metrics both show them).
    - Incident starts by (camera, rule, kind), counted by the event thread after the store's commit
      (`event_started`); outcomes recorded through the API by (rule, outcome) (`count_outcome`).
    - `registry` (operators and admins) and `viewer_registry` (full volumes by number, not path)
      read `sample` at each scrape.

    Args:
        pipeline: the running pipeline, or None before it started.
        camera_states: each camera's reader state now (``live``, ``offline``, ...).
        sink_health: each connection the alert sinks keep, and whether it is up.
        site_nodes: with nodes, every node of the site (`site_view`); None without.
        interval_s: seconds between two samples of the frame counters.
    """

    def __init__(
        self,
        pipeline: Callable[[], WatchService | ClusterWatch | NodeService | None],
        *,
        camera_states: Callable[[], Mapping[str, str]],
        sink_health: Callable[[], dict[str, bool]],
        site_nodes: Callable[[], Sequence[Mapping[str, Any]] | None],
        interval_s: float = 1.0,
    ) -> None:
        self._pipeline = pipeline
        self._camera_states = camera_states
        self._sink_health = sink_health
        self._site_nodes = site_nodes
        self.interval_s = interval_s
        self.registry = build_registry(self.sample)
        self.viewer_registry = build_registry(lambda: viewer_sample(self.sample()))  # no volume paths
        self._rates = FrameRates()
        self._event_starts: Counter[tuple[str, str, str]] = Counter()
        self._lock = threading.Lock()  # counts written by the event thread and the API, read by scrapes
        self._outcomes: dict[tuple[str, str], int] = {}  # (rule, outcome) -> recorded through the API since start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # counting -------------------------------------------------------------------------------
    def event_started(self, event: Event) -> None:
        """One more incident start of the event's camera, rule and kind (``campusguard_events_total``)."""
        with self._lock:
            self._event_starts[(event.camera_id, event.rule_name, event.rule_kind)] += 1

    def count_outcome(self, rule: str, outcome: str) -> None:
        """One more ``outcome`` recorded for an incident of ``rule`` (``campusguard_incident_outcomes_total``)."""
        with self._lock:
            key = (rule, outcome)
            self._outcomes[key] = self._outcomes.get(key, 0) + 1

    def fps(self, camera: str) -> tuple[float, float]:
        """The camera's input and processed frames per second, over the last samples (`FrameRates.fps`)."""
        return self._rates.fps(camera)

    # the rate thread ------------------------------------------------------------------------
    def start(self) -> None:
        """Start sampling the frame counters every ``interval_s``."""
        self._thread = threading.Thread(target=self._watch_rates, name="console-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the sampling thread (waits up to 2 s)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _watch_rates(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_rates()

    def _sample_rates(self) -> None:
        service = self._pipeline()
        if service is None:
            return
        service.refresh_metrics()
        now = time.monotonic()
        for cam, m in list(service.metrics.items()):
            self._rates.add(cam, now, m.frames_in, m.frames_processed)

    # the scrape -----------------------------------------------------------------------------
    def sample(self) -> PipelineSample:
        """Everything exported now (`PipelineSample`); called from the scraping thread."""
        with self._lock:
            events = dict(self._event_starts)
            outcomes = dict(self._outcomes)
        service = self._pipeline()
        if service is None:
            return PipelineSample((), events, outcomes=outcomes)
        service.refresh_metrics()
        worker = service.event_worker  # WatchService's and ClusterWatch's `EventWorker`
        store_retries, spooled = (0, 0) if worker is None else (worker.store_retries, worker.spooled)
        cams = []
        states = self._camera_states()
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
                    frames_gate_busy=m.frames_gate_busy,
                    gate_seconds=m.gate_seconds,
                    state=states.get(cam, ""),
                )
            )
        disk = disk_health()
        sample = PipelineSample(
            cams,
            events,
            store_retries,
            spooled,
            disk_full={v: st.full for v, st in disk.volumes().items()},
            disk_write_failures=dict(disk.failures),
            mqtt_connected=self._sink_health(),
            outcomes=outcomes,
            **site_view(self._site_nodes()),
        )
        retention = getattr(service, "retention", None)  # WatchService's cleanup stage (none on Ray)
        if retention is None:
            return sample
        r = retention.metrics
        return replace(
            sample,
            media_bytes=dict(r.kept_bytes),
            free_bytes=r.free_bytes,
            files_pruned=dict(r.files_pruned),
            rows_pruned=r.rows_pruned,
        )
