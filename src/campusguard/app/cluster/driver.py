"""`ClusterWatch`: the `watch` driver when cameras run in groups elsewhere (Ray actors, or in-process).

The driver owns the event store and the alert sinks. It pulls each group's batches of events
(`CameraGroup.pull`), commits each update through the event writer's `EventWorker.handle`
(store first, then sinks), and acknowledges the batch in its next pull: delivery is at least
once. What a restarted group sends again is dropped before the store and the sinks when the
same update (event id, phase and content) was already handled, and re-written harmlessly
otherwise (stores upsert on the deterministic event id), so each incident is stored once and
each of its updates is alerted once. Updates the store does not take after a stop go to the
event spool (`EventWorker`), which `ClusterWatch.start` replays before the groups start.

Incidents a dead group leaves open are ended by the driver (phase ``end``, ``end_s`` the
incident's start, ``details.ended_by`` saying why): at once for live cameras, whose restarted
group cannot raise them again (their stream time moved on), and, for file cameras, which re-run
from the start and raise the same ids again, when the restarted group finishes without having
ended them. The same happens to every open incident of a group given up after
``cluster.restart_timeout_s``.

Incidents an earlier driver left open when it was killed are ended as interrupted, as `WatchService`
does (`campusguard.app.events.interrupted`, when the event side's `Ownership.ends_dead_runs`): the
live cameras' once the spool is replayed, the files' when their group finishes unless the new run
raised them again.

The executor (`GroupExecutor`) is the only part that knows where groups run: `LocalExecutor`
here, `campusguard.app.cluster.ray_executor.RayExecutor` on a Ray cluster.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TextIO

from campusguard.app.cluster.group import (
    METRIC_COUNTERS,
    Ack,
    Batch,
    CameraGroup,
    ClusterError,
    DetectorFactoryMaker,
    camera_groups,
)
from campusguard.app.config import CameraConfig, LoadedConfig
from campusguard.app.engine.metrics import CameraMetrics, MetricsReporter
from campusguard.app.engine.sources import CameraState, FrameSource
from campusguard.app.engine.wiring import open_camera
from campusguard.app.engine.writer import EventWorker
from campusguard.app.event_side import EventSide
from campusguard.app.events.types import Event
from campusguard.app.infra.sdnotify import systemd
from campusguard.app.lifecycle import StopAndWait
from campusguard.app.retention import RetentionCleaner
from campusguard.app.retention.stage import RetentionStage
from campusguard.errors import ConfigError

__all__ = ["ClusterWatch", "GroupExecutor", "LocalExecutor", "Unavailable", "update_key"]

log = logging.getLogger("campusguard.app.cluster")


@dataclass(frozen=True)
class Unavailable:
    """A group that did not answer a pull (its actor died or is restarting); ``reason`` says why."""

    reason: str


class GroupExecutor(Protocol):
    """Where camera groups run. ``poll`` waits at most ``timeout_s`` and returns the groups that answered;
    after ``stop`` every pull carries the stop, so a group restarted later stops too."""

    def start(self, groups: list[list[str]]) -> None: ...

    def poll(self, acks: dict[int, Ack | None], timeout_s: float) -> dict[int, Batch | Unavailable]: ...

    def stop(self) -> None: ...

    def close(self) -> None: ...

    def describe(self, group: int) -> str: ...


class LocalExecutor:
    """Every group in this process (one `CameraGroup` each): the same driver without a cluster."""

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        detector_factory: DetectorFactoryMaker | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
    ) -> None:
        self.loaded = loaded
        self.detector_factory = detector_factory
        self.opener = opener
        self.groups: list[CameraGroup] = []
        self.stopping = False

    def start(self, groups: list[list[str]]) -> None:
        self.groups = [
            CameraGroup(self.loaded, ids, detector_factory=self.detector_factory, opener=self.opener) for ids in groups
        ]

    def poll(self, acks: dict[int, Ack | None], timeout_s: float) -> dict[int, Batch | Unavailable]:
        out: dict[int, Batch | Unavailable] = {g: self.groups[g].pull(ack, self.stopping) for g, ack in acks.items()}
        time.sleep(timeout_s)
        return out

    def stop(self) -> None:
        self.stopping = True
        for group in self.groups:
            group.stop()

    def close(self) -> None:
        self.stop()

    def describe(self, group: int) -> str:
        return "this process"


def update_key(event: Event) -> tuple[str, str, str]:
    """What makes two deliveries the same update: event id, phase and content (wall-clock fields aside).

    ``started_at``, ``ended_at`` and ``snapshot_path`` differ between a run and its re-run and
    are left out.
    """
    data = event.to_dict()
    for key in ("started_at", "ended_at", "snapshot_path"):
        data.pop(key, None)
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return event.event_id, event.phase, digest


@dataclass
class _GroupState:
    """The driver's view of one group."""

    cameras: list[str]
    incarnation: str | None = None
    ack: Ack | None = None
    restarts: int = 0
    finished: bool = False
    clean: bool = True
    unavailable_since: float | None = None
    last_counters: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)


class ClusterWatch(StopAndWait):
    """`watch` with camera groups on an executor; same lifecycle as `WatchService` (start, stop, wait, finish).

    Args:
        loaded: the validated config (its ``cluster`` section sizes the groups).
        executor: where the groups run.
        out: where metrics lines and stdout alerts go.
        on_event: called with every update handed to the sinks.
        events: the event side the driver owns for every group (`EventSide`, `Ownership.OWNED` or
            ``BORROWED``: ``serve --ray``'s console store, left open at the end); the groups' own
            sides are `Ownership.GROUP`. Default: `EventSide.owned` (the config's storage).
        clips_dir: the console's clip folder (``serve --ray`` copies the groups' clips there), looked
            after by retention.

    The driver runs the retention stage (`campusguard.app.retention.stage`) like `WatchService`:
    incidents expire in the store, logs are trimmed, and the config's media folders are kept
    within their limits where they are reachable from the driver; each group looks after its
    continuous recordings on its own node (its `WatchService`'s side is `Ownership.GROUP`).
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        executor: GroupExecutor,
        *,
        out: TextIO | None = None,
        on_event: Callable[[Event], None] | None = None,
        events: EventSide | None = None,
        clips_dir: Path | None = None,
    ) -> None:
        self.loaded = loaded
        self.config = loaded.config
        self.executor = executor
        self.out = out or sys.stdout
        self.on_event = on_event
        self.events = events if events is not None else EventSide.owned(loaded, self.out)
        if not (self.events.ownership.has_sinks and self.events.ownership.writes_spool):
            raise ValueError(f"the cluster driver owns its event side, not {self.events.ownership.value}")
        self.clips_dir = clips_dir
        self.retention: RetentionCleaner | None = None
        self._retention_stage: RetentionStage | None = None
        self.stop_event = threading.Event()
        self.failed = threading.Event()
        self.groups: list[_GroupState] = []
        self.cameras: dict[str, CameraConfig] = {c.id: c for c in self.config.cameras if c.enabled}
        self.metrics: dict[str, CameraMetrics] = {}
        self._depth: dict[str, int] = {}
        self.frame_sizes: dict[str, tuple[int, int]] = {}  # camera -> (width, height) as its group probed it
        self._states: dict[str, CameraState] = {}  # camera -> its reader's state at its group's last answer
        self._base: dict[str, dict[str, float]] = {}
        self._seen: set[tuple[str, str, str]] = set()
        self._open: dict[str, tuple[int, str | None, Event]] = {}  # event id -> (group, incarnation, latest)
        self.event_worker: EventWorker | None = None
        self.reporter: MetricsReporter | None = None
        self.duplicates = 0  # deliveries dropped as already handled
        self.orphans_ended = 0
        self._thread: threading.Thread | None = None
        self._started = False
        self._finished = False

    # lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Open the store and sinks, start the groups and wait until each has started (or say why not)."""
        groups = camera_groups(self.loaded)
        if not groups:
            raise ConfigError(f"{self.loaded.where(('cameras',))}: no enabled camera to watch")
        opened = self.events.open()
        self.event_worker = EventWorker(
            queue.Queue(),
            opened.store,
            opened.sinks,
            list(self.cameras),
            self.failed,
            self.on_event,
            stop=self.stop_event,
            spool=self.events.spool(),
            interrupted=self.events.interrupted({c.id: c.is_live() for c in self.cameras.values()}),  # a dead run's
            close_store=self.events.closes_store,
        )
        self.groups = [_GroupState(ids) for ids in groups]
        for cam_id in self.cameras:
            self.metrics[cam_id] = CameraMetrics(cam_id, queue_depth=functools.partial(self._queue_depth, cam_id))
            self._base[cam_id] = dict.fromkeys(METRIC_COUNTERS, 0.0)
        try:
            self.event_worker.replay_spool()  # what an earlier run spooled goes first
            self.event_worker.end_interrupted_at_start()  # then what it left open on live cameras
            self.executor.start(groups)
            self._wait_started()
        except BaseException:
            self.executor.close()
            self.event_worker.close()
            raise
        for g, state in enumerate(self.groups):
            log.info("camera group %d (%s) on %s", g, ", ".join(state.cameras), self.executor.describe(g))
        self._start_reporter()
        self._retention_stage = self.events.start_retention(self.config, self.clips_dir)
        if self._retention_stage is not None:
            self.retention = self._retention_stage.cleaner
        self._thread = threading.Thread(target=self._run, name="cluster-driver", daemon=True)
        self._thread.start()
        self._started = True

    def _last_thread(self) -> threading.Thread | None:
        return self._thread  # the poll loop: ends once every group has finished and its events are committed

    def finish(self, timeout_s: float = 30.0) -> bool:
        """Print the final metrics; True when every group ran cleanly and nothing was given up."""
        done = self.wait(timeout_s)
        if not self._finished and self._started:
            self._finished = True
            self._reporter_stop.set()
            if self._retention_stage is not None:
                self._retention_stage.finish()
            assert self.reporter is not None
            self.reporter.final()
            restarts = sum(g.restarts for g in self.groups)
            log.info(
                "cluster: %d group restart(s), %d re-sent update(s) dropped, %d incident(s) ended by the driver",
                restarts,
                self.duplicates,
                self.orphans_ended,
            )
        return done and not self.failed.is_set() and all(g.clean for g in self.groups)

    def refresh_metrics(self) -> None:
        """Nothing to do: the counters are copied in from each group's answer (as `WatchService.refresh_metrics`)."""

    def camera_state(self, camera_id: str) -> CameraState:
        """The camera's `CameraState`: its group's (finished: ``stopped`` or ``failed``; not answering:
        ``reconnecting``), else what its reader said in the group's last answer (`CameraReader.state`)."""
        state = next((g for g in self.groups if camera_id in g.cameras), None)
        if state is None:
            return "stopped" if self._finished else "starting"
        if state.finished:
            return "stopped" if state.clean else "failed"
        if state.unavailable_since is not None:
            return "reconnecting"
        reported = self._states.get(camera_id)
        if reported is not None:
            return reported
        m = self.metrics.get(camera_id)
        return "live" if m is not None and m.frames_in > 0 else "starting"

    # the loop -------------------------------------------------------------------------------
    def _wait_started(self) -> None:
        """Pull every group once: that starts it; a start-up error is raised here as one line."""
        waiting = set(range(len(self.groups)))
        deadline = time.monotonic() + self.config.cluster.restart_timeout_s
        while waiting:
            if time.monotonic() > deadline:
                c = self.config.cluster
                raise ClusterError(
                    f"camera group(s) {sorted(waiting)} did not start within {c.restart_timeout_s:g} s: does the "
                    f"cluster have what each actor asks for (num_cpus {c.num_cpus:g}, num_gpus {c.num_gpus:g}, "
                    f"resources {c.resources})?"
                )
            for g, reply in self.executor.poll(dict.fromkeys(waiting), self.config.cluster.poll_interval_s).items():
                if isinstance(reply, Batch) and reply.error is not None:
                    raise ConfigError(reply.error)
                if isinstance(reply, Batch):
                    waiting.discard(g)
                    self._take(g, reply)

    def _run(self) -> None:
        assert self.event_worker is not None
        stop_sent = False
        try:
            while any(not g.finished for g in self.groups):
                if self.stop_event.is_set() and not stop_sent:
                    self.executor.stop()
                    stop_sent = True
                acks = {i: g.ack for i, g in enumerate(self.groups) if not g.finished}
                replies = self.executor.poll(acks, self.config.cluster.poll_interval_s)
                for g, reply in replies.items():
                    if isinstance(reply, Unavailable):
                        self._unavailable(g, reply)
                    else:
                        self._take(g, reply)
                if not self.failed.is_set():
                    systemd().watchdog()  # the driver's poll loop is its liveness (rate-limited by the notifier)
        except Exception:
            log.exception("cluster driver crashed")
            self.failed.set()
        finally:
            for g in range(len(self.groups)):
                self._end_orphans(g, "driver stopped")
            self.executor.close()
            self.event_worker.close()

    def _take(self, g: int, batch: Batch) -> None:
        state = self.groups[g]
        state.unavailable_since = None
        if batch.error is not None:
            log.error("camera group %d failed to restart: %s", g, batch.error)
            self._give_up(g)
            return
        if state.incarnation is not None and batch.incarnation != state.incarnation:
            self._restarted(g, batch.incarnation)
        state.incarnation = batch.incarnation
        for seq, event in batch.events:
            self._deliver(g, event)
            state.ack = Ack(batch.incarnation, seq)
        self._take_metrics(state, batch.metrics)
        for cam_id in state.cameras:  # only this answer's states: a restarted group's readers start anew
            self._states.pop(cam_id, None)
        self._states.update(batch.states)
        if batch.finished:
            state.finished, state.clean = True, batch.clean
            self._end_orphans(g, "camera group ended without ending it")
            self._cameras_ended(g)

    def _deliver(self, g: int, event: Event) -> None:
        assert self.event_worker is not None
        key = update_key(event)
        if key in self._seen:
            self.duplicates += 1
        else:
            self.event_worker.handle(event)  # commit, then the sinks
            self._seen.add(key)
        if event.is_open:
            self._open[event.event_id] = (g, self.groups[g].incarnation, event)
        else:
            self._open.pop(event.event_id, None)

    def _restarted(self, g: int, incarnation: str) -> None:
        state = self.groups[g]
        state.restarts += 1
        state.ack = None
        log.warning(
            "camera group %d (%s) restarted (restart %d), now on %s; its cameras resume",
            g,
            ", ".join(state.cameras),
            state.restarts,
            self.executor.describe(g),
        )
        for cam_id, counters in state.last_counters.items():  # keep the driver's counters growing
            for k in METRIC_COUNTERS:
                self._base[cam_id][k] += counters.get(k, 0.0)
        state.last_counters = {}
        live = {e for e, (gg, inc, ev) in self._open.items() if gg == g and self.cameras[ev.camera_id].is_live()}
        for event_id in live:
            self._end(event_id, "camera group restarted; a live stream cannot raise it again")

    def _unavailable(self, g: int, reply: Unavailable) -> None:
        state = self.groups[g]
        now = time.monotonic()
        if state.unavailable_since is None:
            state.unavailable_since = now
            log.warning("camera group %d unavailable (%s); waiting for Ray to restart it", g, reply.reason)
        elif now - state.unavailable_since > self.config.cluster.restart_timeout_s:
            log.error("camera group %d gave no answer for %.0f s; giving it up", g, now - state.unavailable_since)
            self._give_up(g)

    def _give_up(self, g: int) -> None:
        state = self.groups[g]
        state.finished, state.clean = True, False
        self.failed.set()
        self._end_orphans(g, "camera group given up")
        self._cameras_ended(g)

    def _cameras_ended(self, g: int) -> None:
        """Group ``g`` finished: the incidents an earlier run left open on its file cameras that
        this run did not raise again are ended as interrupted (`EventWorker.end_of_stream`)."""
        if self.event_worker is None:  # not started: nothing was read
            return
        for cam_id in self.groups[g].cameras:
            self.event_worker.end_of_stream(cam_id)

    def _end_orphans(self, g: int, reason: str) -> None:
        for event_id in [e for e, (gg, _, _) in self._open.items() if gg == g]:
            self._end(event_id, reason)

    def _end(self, event_id: str, reason: str) -> None:
        """End an incident its group left open: phase end at its own start time, saying why."""
        g, _, event = self._open[event_id]
        ended = dataclasses.replace(
            event,
            phase="end",
            end_s=event.start_s,
            end_frame=event.start_frame,
            ended_at=datetime.now(UTC),
            details={**event.details, "ended_by": f"cluster: {reason}"},
            sequence=event.sequence + 1,  # the end is its incident's last update
        )
        self.orphans_ended += 1
        log.warning("ending incident %s of camera %s: %s", event_id, event.camera_id, reason)
        self._deliver(g, ended)

    # metrics --------------------------------------------------------------------------------
    def _take_metrics(self, state: _GroupState, metrics: dict[str, dict[str, float]]) -> None:
        for cam_id, counters in metrics.items():
            m = self.metrics.get(cam_id)
            if m is None:
                continue
            for k in METRIC_COUNTERS:
                value = self._base[cam_id][k] + counters.get(k, 0.0)
                setattr(m, k, value if k.endswith("_ms_total") else int(value))
            self._depth[cam_id] = int(counters.get("queue_depth", 0))
            if "width" in counters and "height" in counters:
                self.frame_sizes[cam_id] = (int(counters["width"]), int(counters["height"]))
            state.last_counters[cam_id] = counters

    def _queue_depth(self, cam_id: str) -> int:
        """The camera's frame-queue depth at its group's last answer."""
        return self._depth.get(cam_id, 0)

    def _start_reporter(self) -> None:
        outputs = self.config.outputs
        self._reporter_stop = threading.Event()
        self.reporter = MetricsReporter(
            list(self.metrics.values()), self._reporter_stop, outputs.metrics_interval_s, self.out, outputs.metrics_file
        )
        threading.Thread(target=self.reporter.run, name="metrics", daemon=True).start()
