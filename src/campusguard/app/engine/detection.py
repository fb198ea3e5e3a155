"""The detection stage: `DetectionWorker` batches frames across cameras (motion gate, crops) and
`TrackedBoxes` hands the analytics stage's latest boxes back to the gate."""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

import numpy as np

from campusguard.app.engine.metrics import CameraMetrics
from campusguard.app.engine.sources import EndOfStream, Frame, FrameQueue
from campusguard.app.engine.stages import DetectedFrame, DetectorLike, put_until, start_detection
from campusguard.app.infra.throttle import LogThrottle
from campusguard.backends.base import Started
from campusguard.detections import Detections
from campusguard.motion import MotionGate, RegionPlan, crop_regions, merge_region_detections
from campusguard.ops.boxes import resize_boxes

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class _Started:
    """One detector's share of a batch, started: its frames, their plans, crops and gate seconds, the
    detection in progress, how many images it holds and the seconds starting it took."""

    frames: list[Frame]
    plans: list[RegionPlan]
    crops: list[list[np.ndarray]]
    gate_s: list[float]
    started: Started[list[Detections]]
    images: int
    start_s: float


# detection ---------------------------------------------------------------------------------
class DetectionWorker:
    """Runs detection for all cameras, batching frames across cameras.

    Takes frames round-robin from the cameras' queues until ``batch_size`` frames are in hand
    or ``batch_wait_s`` has passed since the first; frames of cameras sharing a detector go in
    one call (`start_detection`), which groups them by network input shape. On a detector that runs
    asynchronously (OpenVINO's streams) one batch stays in flight while the next is prepared (`run`).

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
        # DEBUG lines per camera and gate decision, or per batch shape, every 10 s: readable over hours
        self._debug = LogThrottle(log, interval_s=10.0)
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
            if cam in self.gates and not self._room(cam, items):
                continue  # a gated camera's next frame is planned with this one's detections
            item = self.inputs[cam].get_nowait()
            if item is not None:
                items.append(item)
                took = True
                if isinstance(item, EndOfStream):
                    open_cams.discard(cam)
        self._rr += 1
        return took

    def _room(self, cam: str, items: list[Frame | EndOfStream]) -> bool:
        """Whether a gated camera may add a frame to the batch: one planned frame at a time, or as
        many as its gate sends whole without planning (a busy stretch batches like an ungated camera)."""
        taken = sum(isinstance(i, Frame) and i.camera_id == cam for i in items)
        return taken < max(1, self.gates[cam].bypass_frames)

    def _collect(self, open_cams: set[str]) -> list[Frame | EndOfStream]:
        items: list[Frame | EndOfStream] = []
        deadline: float | None = None
        while True:
            self.doorbell.clear()
            while self._take_round(items, open_cams):
                pass
            n_frames = sum(isinstance(i, Frame) for i in items)
            gated_in = {c for c in self.gates if c in open_cams and not self._room(c, items)}
            if (
                n_frames >= self.batch_size
                or not open_cams
                or any(isinstance(i, EndOfStream) for i in items)
                or open_cams <= gated_in  # every open camera is gated and has all the frames it may add
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
        """Detect until every camera has ended.

        A batch whose network still runs when it is started (`Started.running`: OpenVINO's streams)
        stays in flight while the next one is taken from the queues, letterboxed and started, and is
        finished (post-processing, merging, hand-over) after that: the host's work for one batch overlaps
        the network's for the other. Only what is queued now joins a batch while another is in flight (a
        live camera's frame is never held back for it); a frame that needs the one in flight (a gated camera
        planning with its previous frame's boxes) waits for it to finish, and a camera's end is handed on
        after every batch started before it."""
        open_cams = set(self.inputs)
        flight: list[_Started] = []
        while (open_cams or flight) and not self.failed.is_set():
            if flight and not any(g.started.running for g in flight):
                self._finish(flight)
                flight = []
            if not flight:
                items = self._collect(open_cams)
            else:
                items = self._take_ready(open_cams)
                if not items or not self._may_overlap(flight, items):
                    self._finish(flight)
                    flight = []
                    if not items:
                        continue
            self.heartbeat = time.monotonic()
            frames = [i for i in items if isinstance(i, Frame)]
            started = self._start(frames) if frames and not self.stop.is_set() else []
            if flight:
                self._finish(flight)
            flight = started
            ends = [i for i in items if isinstance(i, EndOfStream)]
            if ends and flight:
                self._finish(flight)
                flight = []
            for item in ends:
                self._put(item.camera_id, item)
        if flight and not self.failed.is_set():
            self._finish(flight)

    def _take_ready(self, open_cams: set[str]) -> list[Frame | EndOfStream]:
        """What the queues hold now (up to a batch), without waiting."""
        items: list[Frame | EndOfStream] = []
        while self._take_round(items, open_cams):
            pass
        return items

    def _may_overlap(self, flight: list[_Started], items: list[Frame | EndOfStream]) -> bool:
        """Whether ``items`` may start before ``flight`` finishes: no frame of a gated camera that has a frame in
        flight and plans with its boxes (outside a busy stretch). A camera's end is handed on after both."""
        flying = {f.camera_id for g in flight for f in g.frames}
        return not any(
            isinstance(i, Frame)
            and i.camera_id in flying
            and i.camera_id in self.gates
            and self.gates[i.camera_id].bypass_frames == 0
            for i in items
        )

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
        plan = gate.plan(frame.image, frame.timestamp_s, np.concatenate(keep))
        self._debug.debug(
            ("gate", frame.camera_id, plan.kind, plan.reason),
            "camera %s frame %d: gate %s (%s), %d detector image(s)",
            frame.camera_id,
            frame.index,
            plan.kind,
            plan.reason,
            plan.calls if plan.kind != "skip" else 0,
        )
        return plan

    def _start(self, frames: list[Frame]) -> list[_Started]:
        """Plan ``frames`` (gates, crops) and start each detector's share (`start_detection`)."""
        by_detector: dict[int, list[Frame]] = {}
        for f in frames:
            by_detector.setdefault(id(self.detectors[f.camera_id]), []).append(f)
        out: list[_Started] = []
        for group in by_detector.values():
            detector = self.detectors[group[0].camera_id]
            gate_s = [0.0] * len(group)  # each frame's gate work: plan, crops, merge
            plans: list[RegionPlan] = []
            crops: list[list[np.ndarray]] = []
            for j, f in enumerate(group):
                t0 = time.perf_counter()
                plans.append(self._plan(f))
                crops.append(crop_regions(f.image, plans[-1]))
                gate_s[j] = time.perf_counter() - t0
            images = [im for c in crops for im in c]
            t0 = time.perf_counter()
            started = start_detection(detector, images) if images else Started.finished([])
            out.append(_Started(group, plans, crops, gate_s, started, len(images), time.perf_counter() - t0))
        return out

    def _finish(self, flight: list[_Started]) -> None:
        """Wait for ``flight``'s detections, merge each frame's crops and hand the frames on, in order."""
        out: list[DetectedFrame] = []
        for g in flight:
            t0 = time.perf_counter()
            dets = g.started.wait()
            # the host's time on this batch: starting it and waiting for it (not the next batch's work meanwhile)
            ms_per_image = (g.start_s + time.perf_counter() - t0) * 1000 / max(1, g.images)
            if g.images:
                self.batches += 1
                self._debug.debug(
                    ("batch", len(g.frames), g.images),
                    "detector batch %d: %d image(s) from %d frame(s) of %s in %.1f ms",
                    self.batches,
                    g.images,
                    len(g.frames),
                    ", ".join(sorted({f.camera_id for f in g.frames})),
                    ms_per_image * g.images,
                )
            start = 0
            for f, plan, c, spent_s in zip(g.frames, g.plans, g.crops, g.gate_s, strict=True):
                own = dets[start : start + len(c)]
                start += len(c)
                share_ms = ms_per_image * len(c)
                m = self.metrics[f.camera_id]
                self._count(m, plan, share_ms)
                t1 = time.perf_counter()
                merged = merge_region_detections(plan, own, self.merge_iou, f.resolution_wh)
                if f.camera_id in self.gates:
                    self._last_boxes[f.camera_id] = merged.xyxy
                    m.observe_gate(spent_s + time.perf_counter() - t1, busy=plan.reason == "busy")
                out.append(DetectedFrame(f, merged, share_ms))
        out.sort(key=lambda m: (m.frame.camera_id, m.frame.index))  # per-camera order kept
        for msg in out:
            self._put(msg.frame.camera_id, msg)

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
