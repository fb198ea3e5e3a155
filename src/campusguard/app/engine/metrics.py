"""Per-camera metrics: input FPS, processed FPS, inference ms, queue depth, dropped frames.

Counters live in one `CameraMetrics` per camera; each counter has a single writer thread
(reader, detection or analytics), so plain attribute updates are enough. Frame rates are
worked out in one place, `frame_rates` (frames between two samples of the counters over the
seconds between them): `MetricsReporter` (the ``[metrics]`` lines) uses it on the interval since its
last report, `FrameRates` (the console's ``/metrics`` and camera list) on a sliding window of
samples, so the two differ only by the window they look at.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TextIO

__all__ = [
    "CameraMetrics",
    "CounterSample",
    "FrameRates",
    "LatencyHistogram",
    "MetricsReporter",
    "MetricsSnapshot",
    "format_snapshot",
    "frame_rates",
]

# upper bounds in seconds: 1 ms .. 10 s, dense where CPU and GPU inference of one frame fall
LATENCY_BUCKETS_S: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


# the motion gate's own work per frame: 50 us .. 50 ms
GATE_BUCKETS_S: tuple[float, ...] = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05)


@dataclass
class LatencyHistogram:
    """Counts of durations per bucket (cumulative view in `cumulative`); one writer thread.

    Attributes:
        bounds_s: bucket upper bounds in seconds, increasing (an implicit +Inf bucket follows).
        counts: observations per bucket, ``len(bounds_s) + 1`` entries (the last is +Inf).
        sum_s: sum of all observations, seconds.
    """

    bounds_s: tuple[float, ...] = LATENCY_BUCKETS_S
    counts: list[int] = field(default_factory=list)
    sum_s: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds_s) + 1)

    def observe(self, seconds: float) -> None:
        """Count one duration."""
        self.counts[bisect.bisect_left(self.bounds_s, seconds)] += 1
        self.sum_s += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """``(upper bound, observations <= bound)`` per bucket, ending with ``(inf, count)``."""
        out, total = [], 0
        for bound, n in zip((*self.bounds_s, float("inf")), list(self.counts), strict=True):
            total += n
            out.append((bound, total))
        return out


@dataclass
class CameraMetrics:
    """Running counters of one camera (never reset; rates come from differences).

    Attributes:
        frames_in: frames read from the source.
        frames_dropped: frames dropped by the drop-oldest queue.
        frames_processed: frames that went through tracking and rules.
        inference_ms_total: this camera's share of batch inference time, milliseconds.
        frames_detected: frames that went through detection (gated frames included).
        detector_images: images sent to the detector for this camera (whole frames and crops).
        frames_skipped: frames the motion gate skipped (no detector call).
        frames_regions: frames detected on motion and track crops instead of the whole frame.
        events: event updates emitted (start, update, end).
        reconnects: times the source was reopened.
        inference_seconds: histogram of this camera's per-frame share of inference time.
        frames_gate_busy: gated frames sent whole without the gate's work (a busy stretch).
        gate_ms_total: the motion gate's own work (motion analysis, planning, crops, merge), milliseconds.
        gate_seconds: histogram of the motion gate's own work per gated frame.
        queue_depth: callable returning the current depth of the camera's frame queue.
    """

    camera_id: str
    frames_in: int = 0
    frames_dropped: int = 0
    frames_processed: int = 0
    frames_detected: int = 0
    detector_images: int = 0
    frames_skipped: int = 0
    frames_regions: int = 0
    inference_ms_total: float = 0.0
    events: int = 0
    reconnects: int = 0
    inference_seconds: LatencyHistogram = field(default_factory=LatencyHistogram, repr=False)
    frames_gate_busy: int = 0
    gate_ms_total: float = 0.0
    gate_seconds: LatencyHistogram = field(default_factory=lambda: LatencyHistogram(GATE_BUCKETS_S), repr=False)
    queue_depth: Callable[[], int] = field(default=lambda: 0, repr=False)

    def observe_gate(self, seconds: float, busy: bool) -> None:
        """Count one gated frame's gate work (``busy``: sent whole without it)."""
        self.gate_ms_total += seconds * 1000
        self.gate_seconds.observe(seconds)
        self.frames_gate_busy += busy


@dataclass(frozen=True)
class CounterSample:
    """A camera's frame counters at one moment (``t``: `time.monotonic` seconds)."""

    t: float
    frames_in: int = 0
    frames_processed: int = 0


def frame_rates(earlier: CounterSample, later: CounterSample) -> tuple[float, float]:
    """``(input fps, processed fps)`` between two samples, rounded to 0.01; zeros over no time."""
    dt = later.t - earlier.t
    if dt <= 0:
        return 0.0, 0.0
    return (
        round((later.frames_in - earlier.frames_in) / dt, 2),
        round((later.frames_processed - earlier.frames_processed) / dt, 2),
    )


class FrameRates:
    """Input and processed frame rates per camera over a sliding window of `CounterSample` (thread-safe).

    Args:
        window_s: the rates are over the samples of the last ``window_s`` seconds (at least two kept).
    """

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self._samples: dict[str, deque[CounterSample]] = {}
        self._lock = threading.Lock()

    def add(self, camera: str, now: float, frames_in: int, frames_processed: int) -> None:
        with self._lock:
            q = self._samples.setdefault(camera, deque())
            q.append(CounterSample(now, frames_in, frames_processed))
            while len(q) > 2 and now - q[0].t > self.window_s:
                q.popleft()

    def fps(self, camera: str) -> tuple[float, float]:
        """``(input fps, processed fps)`` over the window; zeros with fewer than two samples."""
        with self._lock:
            q = self._samples.get(camera)
            if not q or len(q) < 2:
                return 0.0, 0.0
            earlier, later = q[0], q[-1]
        return frame_rates(earlier, later)


@dataclass(frozen=True)
class MetricsSnapshot:
    """Rates of one camera over an interval, and totals so far."""

    camera_id: str
    interval_s: float
    input_fps: float
    processed_fps: float
    inference_ms: float
    queue_depth: int
    dropped: int
    frames_processed: int
    events: int
    reconnects: int
    detector_images: int = 0
    frames_skipped: int = 0
    frames_regions: int = 0
    frames_gate_busy: int = 0
    gate_ms: float = 0.0  # the motion gate's own work per gated frame over the interval

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _snapshot(m: CameraMetrics, prev: dict[str, float], interval_s: float) -> MetricsSnapshot:
    det = m.frames_detected - prev.get("frames_detected", 0)
    inf = m.inference_ms_total - prev.get("inference_ms_total", 0.0)
    gated = m.gate_seconds.count - prev.get("gated_frames", 0)
    gate_ms = m.gate_ms_total - prev.get("gate_ms_total", 0.0)
    input_fps, processed_fps = frame_rates(
        CounterSample(0.0, int(prev.get("frames_in", 0)), int(prev.get("frames_processed", 0))),
        CounterSample(interval_s, m.frames_in, m.frames_processed),
    )
    return MetricsSnapshot(
        camera_id=m.camera_id,
        interval_s=round(interval_s, 3),
        input_fps=input_fps,
        processed_fps=processed_fps,
        inference_ms=round(inf / det, 2) if det else 0.0,
        queue_depth=int(m.queue_depth()),
        dropped=m.frames_dropped,
        frames_processed=m.frames_processed,
        events=m.events,
        reconnects=m.reconnects,
        detector_images=m.detector_images,
        frames_skipped=m.frames_skipped,
        frames_regions=m.frames_regions,
        frames_gate_busy=m.frames_gate_busy,
        gate_ms=round(gate_ms / gated, 3) if gated else 0.0,
    )


def format_snapshot(s: MetricsSnapshot) -> str:
    """One human-readable line of a snapshot."""
    return (
        f"[metrics] {s.camera_id}: in {s.input_fps:.1f} fps, processed {s.processed_fps:.1f} fps, "
        f"inference {s.inference_ms:.1f} ms/frame, queue {s.queue_depth}, dropped {s.dropped}, "
        f"frames {s.frames_processed}, incident messages {s.events} (start, update and end), reconnects {s.reconnects}"
        + (
            f", motion: skipped {s.frames_skipped}, crops {s.frames_regions}, busy {s.frames_gate_busy}, "
            f"detector images {s.detector_images}, gate {s.gate_ms:.2f} ms/frame"
            if s.frames_skipped or s.frames_regions or s.frames_gate_busy
            else ""
        )
    )


class MetricsReporter:
    """Prints per-camera rates every ``interval_s`` seconds (0: never) and a summary at `final`.

    Args:
        metrics: the cameras' counters.
        stop: shared stop event.
        interval_s: seconds between reports; 0 reports only at the end.
        out: where lines go.
        jsonl_path: also append each snapshot as a JSON line here.
        refresh: called before each snapshot to pull counters owned elsewhere (e.g. reader stats).
    """

    def __init__(
        self,
        metrics: list[CameraMetrics],
        stop: threading.Event,
        interval_s: float,
        out: TextIO,
        jsonl_path: str | None = None,
        refresh: Callable[[], None] | None = None,
    ) -> None:
        self.metrics = metrics
        self.stop = stop
        self.interval_s = interval_s
        self.out = out
        self.jsonl_path = jsonl_path
        self.refresh = refresh or (lambda: None)
        self._started = time.monotonic()
        self._prev_t = self._started
        self._prev: dict[str, dict[str, float]] = {m.camera_id: {} for m in metrics}

    def _counters(self, m: CameraMetrics) -> dict[str, float]:
        counters = ("frames_in", "frames_processed", "frames_detected", "inference_ms_total", "gate_ms_total")
        return {k: getattr(m, k) for k in counters} | {"gated_frames": m.gate_seconds.count}

    def report(self, since_start: bool = False) -> list[MetricsSnapshot]:
        """Print one line per camera with rates since the last report (or since start)."""
        self.refresh()
        now = time.monotonic()
        interval = now - (self._started if since_start else self._prev_t)
        snaps = []
        for m in self.metrics:
            prev = {} if since_start else self._prev[m.camera_id]
            snaps.append(_snapshot(m, prev, interval))
            self._prev[m.camera_id] = self._counters(m)
        self._prev_t = now
        for s in snaps:
            print(format_snapshot(s), file=self.out, flush=True)
        if self.jsonl_path:
            with open(self.jsonl_path, "a", encoding="utf-8") as fh:
                for s in snaps:
                    fh.write(json.dumps({"final": since_start, **s.to_dict()}) + "\n")
        return snaps

    def run(self) -> None:
        """Report every ``interval_s`` until stopped."""
        if self.interval_s <= 0:
            return
        while not self.stop.wait(self.interval_s):
            self.report()

    def final(self) -> list[MetricsSnapshot]:
        """Print the whole-run averages."""
        return self.report(since_start=True)
