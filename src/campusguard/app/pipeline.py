"""Pipeline workers: one class per stage, each with `run()`, joined by bounded queues of typed messages.

::

    CameraReader (one per camera)  --FrameQueue-->  DetectionWorker (shared, batches across cameras)
        --queue[DetectedFrame]-->  AnalyticsWorker (one per camera: track, rules, annotate, snapshots)
        --queue[EventMessage]-->   EventWorker (`campusguard.app.events.writer`: store commit, then alert sinks)
    Watchdog: stalled sources reconnect, dead workers stop the pipeline.

Every stage forwards `EndOfStream` for a camera once that camera is done, so a shutdown
(stop event, end of files) drains in order: open events are ended by the analytics workers and
committed by the event worker before it closes the store and the sinks.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from campusguard.app.annotate import AnnotatedVideoWriter
from campusguard.app.events.types import Event
from campusguard.app.events.writer import EventMessage
from campusguard.app.live import LiveFrame, render_live_frame
from campusguard.app.metrics import CameraMetrics
from campusguard.app.rules import RuleEngine
from campusguard.app.sources import CameraReader, EndOfStream, Frame, FrameQueue
from campusguard.detections import Detections
from campusguard.motion import MotionGate, RegionPlan, crop_regions, merge_region_detections
from campusguard.ops.boxes import resize_boxes
from campusguard.tracking import Tracker

__all__ = [
    "AnalyticsWorker",
    "CameraGeometry",
    "DetectedFrame",
    "DetectionWorker",
    "DetectorLike",
    "TrackedBoxes",
    "Watchdog",
    "WorkerThread",
    "put_until",
]

log = logging.getLogger("campusguard.app.pipeline")


# protocols of the parts the workers drive ---------------------------------------------------
class DetectorLike(Protocol):
    """What detection needs from `campusguard.Detector`."""

    @property
    def names(self) -> dict[int, str]: ...

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]: ...

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]: ...


# messages ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class DetectedFrame:
    """A frame with its detections (``xyxy`` in this frame's pixels) and its share of inference time (ms)."""

    frame: Frame
    detections: Detections
    inference_ms: float


def put_until(q: queue.Queue, item: object, give_up: Callable[[], bool], poll_s: float = 0.1) -> bool:
    """Put ``item`` on a bounded queue, waiting for room; False if ``give_up()`` turns true first."""
    while True:
        try:
            q.put(item, timeout=poll_s)
            return True
        except queue.Full:
            if give_up():
                return False


def wall_time_of(frame: Frame) -> datetime:
    """Local wall-clock time at which ``frame`` was read (timezone-aware)."""
    return datetime.fromtimestamp(time.time() - (time.monotonic() - frame.read_at)).astimezone()


class TrackedBoxes:
    """The latest tracked boxes of one camera: written by its analytics worker, read by detection.

    One reference is swapped per update (an atomic assignment), so the reader never sees a
    half-written value and neither side takes a lock.
    """

    def __init__(self) -> None:
        self._latest: tuple[np.ndarray, tuple[int, int]] | None = None

    def publish(self, xyxy: np.ndarray, resolution_wh: tuple[int, int]) -> None:
        """Replace the boxes (``(N, 4)`` xyxy in pixels of a ``resolution_wh`` frame)."""
        self._latest = (np.array(xyxy, np.float32).reshape(-1, 4), resolution_wh)

    def boxes_for(self, frame_wh: tuple[int, int]) -> np.ndarray:
        """The latest boxes in pixels of a ``frame_wh`` frame (``(0, 4)`` before the first update)."""
        latest = self._latest
        if latest is None:
            return np.zeros((0, 4), np.float32)
        xyxy, from_wh = latest
        return resize_boxes(xyxy, from_wh, frame_wh)


_WHOLE_FRAME = RegionPlan("full", "disabled")


# detection ---------------------------------------------------------------------------------
class DetectionWorker:
    """Runs detection for all cameras, batching frames across cameras.

    Takes frames round-robin from the cameras' queues until ``batch_size`` frames are in hand
    or ``batch_wait_s`` has passed since the first; frames of cameras sharing a detector go in
    one `predict_batch` call, which groups them by network input shape.

    Args:
        inputs: camera id to its frame queue.
        outputs: camera id to the queue of its analytics worker.
        detectors: camera id to its detector (cameras may share one object).
        metrics: camera id to its counters.
        stop: shared stop event; after it is set queued frames are skipped, ends still forwarded.
        failed: set when any worker died; puts then give up.
        doorbell: set by every frame queue put.
        batch_size: most frames per inference batch.
        batch_wait_s: longest wait for a fuller batch, seconds.
        gates: camera id to its motion gate (cameras without one are detected whole); a frame
            planned "skip" gets no detections and no detector call, a "regions" frame sends its
            crops, batched with the other frames and crops in the same `predict_batch` call.
        tracked: camera id to its analytics worker's latest tracked boxes, which the gate keeps
            in the detection set so objects that stand still are not lost; the boxes of the
            camera's previous frame are kept too (the analytics worker may be a frame or more
            behind).
        merge_iou: IoU of the class-aware NMS that joins boxes of overlapping crops.
    """

    def __init__(
        self,
        inputs: dict[str, FrameQueue],
        outputs: dict[str, queue.Queue],
        detectors: dict[str, DetectorLike],
        metrics: dict[str, CameraMetrics],
        stop: threading.Event,
        failed: threading.Event,
        doorbell: threading.Event,
        batch_size: int = 4,
        batch_wait_s: float = 0.005,
        gates: dict[str, MotionGate] | None = None,
        tracked: dict[str, TrackedBoxes] | None = None,
        merge_iou: float = 0.7,
    ) -> None:
        self.inputs = inputs
        self.outputs = outputs
        self.detectors = detectors
        self.metrics = metrics
        self.stop = stop
        self.failed = failed
        self.doorbell = doorbell
        self.batch_size = batch_size
        self.batch_wait_s = batch_wait_s
        self.gates = gates or {}
        self.tracked = tracked or {}
        self.merge_iou = merge_iou
        self._frame_wh: dict[str, tuple[int, int]] = {}
        self._last_boxes: dict[str, np.ndarray] = {}  # gated cameras' boxes of their last detected frame
        self.heartbeat = time.monotonic()
        self.batches = 0
        self._order = list(inputs)
        self._rr = 0

    def _take_round(self, items: list[Frame | EndOfStream], open_cams: set[str]) -> bool:
        """Take one item from each open camera, starting after the last one served; True if any."""
        took = False
        cams = [c for c in self._order if c in open_cams]
        start = self._rr % max(1, len(cams))
        for cam in cams[start:] + cams[:start]:
            if sum(isinstance(i, Frame) for i in items) >= self.batch_size:
                break
            if cam in self.gates and any(isinstance(i, Frame) and i.camera_id == cam for i in items):
                continue  # a gated camera's next frame is planned with this one's detections
            item = self.inputs[cam].get_nowait()
            if item is not None:
                items.append(item)
                took = True
                if isinstance(item, EndOfStream):
                    open_cams.discard(cam)
        self._rr += 1
        return took

    def _collect(self, open_cams: set[str]) -> list[Frame | EndOfStream]:
        items: list[Frame | EndOfStream] = []
        deadline: float | None = None
        while True:
            self.doorbell.clear()
            while self._take_round(items, open_cams):
                pass
            n_frames = sum(isinstance(i, Frame) for i in items)
            gated_in = {i.camera_id for i in items if isinstance(i, Frame) and i.camera_id in self.gates}
            if (
                n_frames >= self.batch_size
                or not open_cams
                or any(isinstance(i, EndOfStream) for i in items)
                or open_cams <= gated_in  # every open camera is gated and has its one frame in the batch
            ):
                return items
            now = time.monotonic()
            if items:
                deadline = deadline if deadline is not None else now + self.batch_wait_s
                if now >= deadline:
                    return items
                self.doorbell.wait(deadline - now)
            else:
                self.heartbeat = now
                self.doorbell.wait(0.1)
                if self.failed.is_set():
                    return items

    def run(self) -> None:
        """Detect until every camera has ended."""
        open_cams = set(self.inputs)
        while open_cams and not self.failed.is_set():
            items = self._collect(open_cams)
            self.heartbeat = time.monotonic()
            frames = [i for i in items if isinstance(i, Frame)]
            if frames and not self.stop.is_set():
                for msg in self._detect(frames):
                    self._put(msg.frame.camera_id, msg)
            for item in items:
                if isinstance(item, EndOfStream):
                    self._put(item.camera_id, item)

    def _plan(self, frame: Frame) -> RegionPlan:
        """What the detector sees of ``frame``: its camera's gate decides, else the whole frame."""
        gate = self.gates.get(frame.camera_id)
        if gate is None:
            return _WHOLE_FRAME
        wh = frame.resolution_wh
        if self._frame_wh.setdefault(frame.camera_id, wh) != wh:  # a reconnect changed the frame size
            self._frame_wh[frame.camera_id] = wh
            gate.reset()
        keep = [self._last_boxes.get(frame.camera_id, np.zeros((0, 4), np.float32))]
        if frame.camera_id in self.tracked:
            keep.append(self.tracked[frame.camera_id].boxes_for(wh))
        return gate.plan(frame.image, frame.timestamp_s, np.concatenate(keep))

    def _detect(self, frames: list[Frame]) -> list[DetectedFrame]:
        by_detector: dict[int, list[Frame]] = {}
        for f in frames:
            by_detector.setdefault(id(self.detectors[f.camera_id]), []).append(f)
        out: list[DetectedFrame] = []
        for group in by_detector.values():
            detector = self.detectors[group[0].camera_id]
            plans = [self._plan(f) for f in group]
            crops = [crop_regions(f.image, plan) for f, plan in zip(group, plans, strict=True)]
            images = [im for c in crops for im in c]
            t0 = time.perf_counter()
            dets = detector.predict_batch(images) if images else []
            ms_per_image = (time.perf_counter() - t0) * 1000 / max(1, len(images))
            if images:
                self.batches += 1
            start = 0
            for f, plan, c in zip(group, plans, crops, strict=True):
                own = dets[start : start + len(c)]
                start += len(c)
                share_ms = ms_per_image * len(c)
                self._count(self.metrics[f.camera_id], plan, share_ms)
                merged = merge_region_detections(plan, own, self.merge_iou, f.resolution_wh)
                if f.camera_id in self.gates:
                    self._last_boxes[f.camera_id] = merged.xyxy
                out.append(DetectedFrame(f, merged, share_ms))
        out.sort(key=lambda m: (m.frame.camera_id, m.frame.index))  # per-camera order kept
        return out

    @staticmethod
    def _count(m: CameraMetrics, plan: RegionPlan, share_ms: float) -> None:
        m.frames_detected += 1
        m.detector_images += plan.calls if plan.kind != "skip" else 0
        m.frames_skipped += plan.kind == "skip"
        m.frames_regions += plan.kind == "regions"
        m.inference_ms_total += share_ms
        m.inference_seconds.observe(share_ms / 1000)

    def _put(self, camera_id: str, item: DetectedFrame | EndOfStream) -> None:
        put_until(self.outputs[camera_id], item, self.failed.is_set)


# analytics ---------------------------------------------------------------------------------
@dataclass
class CameraGeometry:
    """A camera's zones and lines in pixels of its reference frame size (for drawing).

    Attributes:
        resolution_wh: the frame size rules were built for; frames of another size (after a
            reconnect) have their boxes scaled to it.
        zones: ``(name, (K, 2) float32 polygon)``.
        lines: ``(name, (2, 2) float32 end points)``.
    """

    resolution_wh: tuple[int, int]
    zones: Sequence[tuple[str, np.ndarray]] = ()
    lines: Sequence[tuple[str, np.ndarray]] = ()


def scale_detections(det: Detections, from_wh: tuple[int, int], to_wh: tuple[int, int]) -> Detections:
    """Detections with ``xyxy`` rescaled from a frame of ``from_wh`` to one of ``to_wh`` (new object)."""
    if from_wh == to_wh or len(det) == 0:
        return det
    xyxy = resize_boxes(det.xyxy, from_wh, to_wh)
    return Detections(xyxy, det.confidence, det.class_id, det.tracker_id, dict(det.data))


class AnalyticsWorker:
    """Tracking, rules, snapshots and the annotated video of one camera.

    Args:
        camera_id: the camera.
        inbox: its `DetectedFrame` / `EndOfStream` queue.
        events_out: the event worker's queue.
        tracker: this camera's tracker.
        rules: this camera's rules.
        geometry: zones and lines in the reference frame's pixels.
        names: class id to name.
        metrics: this camera's counters.
        failed: set when any worker died; puts then give up.
        video: annotated video writer, or None.
        snapshots_dir: folder for event-start JPEGs, or None.
        on_frame: called with each processed frame as a `LiveFrame` (the live view and clips);
            must not block.
        tracked_out: where this camera's tracked boxes are published after every frame (for
            its motion gate), or None.
    """

    def __init__(
        self,
        camera_id: str,
        inbox: queue.Queue,
        events_out: queue.Queue,
        tracker: Tracker,
        rules: RuleEngine,
        geometry: CameraGeometry,
        names: dict[int, str],
        metrics: CameraMetrics,
        failed: threading.Event,
        video: AnnotatedVideoWriter | None = None,
        snapshots_dir: Path | None = None,
        on_frame: Callable[[LiveFrame], None] | None = None,
        tracked_out: TrackedBoxes | None = None,
    ) -> None:
        self.camera_id = camera_id
        self.inbox = inbox
        self.events_out = events_out
        self.tracker = tracker
        self.rules = rules
        self.geometry = geometry
        self.names = names
        self.metrics = metrics
        self.failed = failed
        self.video = video
        self.snapshots_dir = snapshots_dir
        self.on_frame = on_frame
        self.tracked_out = tracked_out
        self.heartbeat = time.monotonic()
        self._open: dict[str, Event] = {}  # event_id -> latest open state, for drawing
        self._last_ts = 0.0
        self._last_frame: Frame | None = None
        self._pending: tuple[RuleEngine, CameraGeometry] | None = None
        self._pending_lock = threading.Lock()

    def replace_rules(self, rules: RuleEngine, geometry: CameraGeometry) -> None:
        """Swap in new rules and zones before the next frame (thread-safe; the tracker is kept).

        The old rules' open events are ended at the last processed frame's time.
        """
        with self._pending_lock:
            self._pending = (rules, geometry)

    def _apply_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        self._finish()
        self.rules, self.geometry = pending

    def run(self) -> None:
        """Process frames until the camera's `EndOfStream`; then end open events and close the video."""
        try:
            while not self.failed.is_set():
                try:
                    item = self.inbox.get(timeout=0.2)
                except queue.Empty:
                    self.heartbeat = time.monotonic()
                    continue
                self.heartbeat = time.monotonic()
                if isinstance(item, EndOfStream):
                    self._finish()
                    self._close_video()  # before the end goes on: `WatchService.wait` returns once events end
                    put_until(self.events_out, item, self.failed.is_set)
                    return
                self.process(item)
        finally:
            self._close_video()

    def _close_video(self) -> None:
        if self.video is not None:
            self.video.close()

    def process(self, msg: DetectedFrame) -> list[Event]:
        """Track, evaluate rules and annotate one frame; return the events it raised."""
        self._apply_pending()
        frame = msg.frame
        wall = wall_time_of(frame)
        dets = scale_detections(msg.detections, frame.resolution_wh, self.geometry.resolution_wh)
        tracked = self.tracker.update(dets, frame.timestamp_s)
        if self.tracked_out is not None:
            self.tracked_out.publish(tracked.xyxy, self.geometry.resolution_wh)
        events = self.rules.update(frame.timestamp_s, tracked, frame.index, wall)
        self._last_ts = frame.timestamp_s
        self._last_frame = frame
        for ev in events:
            self._emit(ev, frame)
        if self.video is not None or self.on_frame is not None:
            live = self._live_frame(frame, tracked)
            if self.video is not None:
                self.video.write(render_live_frame(live))
            if self.on_frame is not None:
                self.on_frame(live)
        self.metrics.frames_processed += 1
        return events

    def _emit(self, ev: Event, frame: Frame | None) -> None:
        if ev.phase == "start" and self.snapshots_dir is not None and frame is not None:
            ev = ev.with_snapshot(str(self._snapshot(ev, frame)))
        elif ev.event_id in self._open and self._open[ev.event_id].snapshot_path:
            ev = ev.with_snapshot(self._open[ev.event_id].snapshot_path)  # type: ignore[arg-type]
        if ev.phase == "end" or ev.end_s is not None:
            self._open.pop(ev.event_id, None)
        else:
            self._open[ev.event_id] = ev
        self.metrics.events += 1
        put_until(self.events_out, EventMessage(ev), self.failed.is_set)

    def _snapshot(self, ev: Event, frame: Frame) -> Path:
        assert self.snapshots_dir is not None
        self.snapshots_dir.mkdir(parents=True, exist_ok=True)
        path = (
            self.snapshots_dir
            / f"{self.camera_id}_{frame.index:07d}_{ev.rule_name.replace(':', '-')}_{ev.event_id[:8]}.jpg"
        )
        cv2.imwrite(str(path), frame.image)
        return path

    def _live_frame(self, frame: Frame, tracked: Detections) -> LiveFrame:
        """The frame with what the annotated view draws on it (nothing is drawn or copied here)."""
        open_events = list(self._open.values())
        return LiveFrame(
            camera_id=self.camera_id,
            index=frame.index,
            timestamp_s=frame.timestamp_s,
            image=frame.image,
            detections=tracked,
            names=self.names,
            resolution_wh=self.geometry.resolution_wh,
            zones=self.geometry.zones,
            lines=self.geometry.lines,
            alert_zones=[e.zone for e in open_events],
            incidents=[f"{e.rule_kind} in {e.zone} ({frame.timestamp_s - e.start_s:.0f} s)" for e in open_events],
            header=f"{self.camera_id}  t={frame.timestamp_s:7.1f} s  frame {frame.index}",
        )

    def _finish(self) -> None:
        """End every open event at the last frame's time."""
        wall = wall_time_of(self._last_frame) if self._last_frame is not None else None
        for ev in self.rules.close(self._last_ts, wall):
            self._emit(ev, None)


# watchdog ----------------------------------------------------------------------------------
class WorkerThread(threading.Thread):
    """A daemon thread around a worker's ``run`` that records whether the work returned.

    A crash is logged here; stopping the pipeline is the `Watchdog`'s job, which also catches
    a thread ended by `SystemExit` (``threading`` drops those without a word).
    """

    def __init__(self, name: str, target: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self._work = target
        self.returned = False

    def run(self) -> None:
        try:
            self._work()
            self.returned = True
        except Exception:
            log.exception("worker %s crashed", self.name)


class Watchdog:
    """Reconnects live sources that stalled, and stops the pipeline when a worker thread died.

    Args:
        readers: the camera readers.
        threads: worker threads that must stay alive until their work returns.
        stop: the pipeline's stop event, set here when a worker died.
        failed: set here when a worker died.
        done: ends the watchdog's own loop (set once the pipeline has finished).
        period_s: seconds between checks.
    """

    def __init__(
        self,
        readers: Sequence[CameraReader],
        threads: Sequence[WorkerThread],
        stop: threading.Event,
        failed: threading.Event,
        *,
        done: threading.Event,
        period_s: float = 1.0,
    ) -> None:
        self.readers = list(readers)
        self.threads = list(threads)
        self.stop = stop
        self.failed = failed
        self.done = done
        self.period_s = period_s
        self.stalls = 0

    def check(self, now: float | None = None) -> None:
        """One round of checks."""
        now = time.monotonic() if now is None else now
        for r in self.readers:
            if r.live and r.stalled(now):
                log.warning("camera %s: no frame for %.1f s; reconnecting", r.camera_id, now - r.stats.last_frame_at)
                r.stats.last_frame_at = now  # one request per stall period
                self.stalls += 1
                r.request_reconnect()
        dead = [t.name for t in self.threads if not t.is_alive() and not t.returned]
        if dead and not self.failed.is_set():
            log.error("worker %s died; stopping the pipeline", ", ".join(dead))
            self.failed.set()
            self.stop.set()

    def run(self) -> None:
        while not self.done.wait(self.period_s):
            self.check()
