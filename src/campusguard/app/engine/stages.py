"""What the stages pass each other and need of their parts: `DetectorLike` (`start_detection`), `DetectedFrame`,
`put_until` (a bounded put that gives up when the pipeline failed), `wall_time_of`."""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from campusguard.app.engine.sources import Frame
from campusguard.backends.base import Started
from campusguard.detections import Detections

if TYPE_CHECKING:
    from campusguard.detector import PendingDetections

log = logging.getLogger(__name__)


# protocols of the parts the workers drive ---------------------------------------------------
class DetectorLike(Protocol):
    """What detection needs from `campusguard.Detector`."""

    @property
    def names(self) -> dict[int, str]: ...

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]: ...

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]: ...


@runtime_checkable
class SubmittingDetector(DetectorLike, Protocol):
    """A detector that starts a batch and may return while its network runs (`campusguard.Detector.submit`,
    whose `PendingDetections` says ``running``), so detection can prepare the next batch meanwhile; `collect`
    waits for one submission's detections."""

    def submit(self, images: list[np.ndarray]) -> PendingDetections: ...

    def collect(self, pending: PendingDetections) -> list[Detections]: ...


@runtime_checkable
class WarmingDetector(DetectorLike, Protocol):
    """A detector that can prepare for a frame size before the first frame (`campusguard.Detector.warm_up`)."""

    def warm_up(self, frame_hw: tuple[int, int]) -> None: ...


def start_detection(detector: DetectorLike, images: list[np.ndarray]) -> Started[list[Detections]]:
    """``images`` started on ``detector``: a `SubmittingDetector` may still run when this returns, any
    other has finished."""
    if isinstance(detector, SubmittingDetector):
        pending = detector.submit(images)
        return Started(lambda: detector.collect(pending), running=pending.running)
    return Started.finished(detector.predict_batch(images))


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
