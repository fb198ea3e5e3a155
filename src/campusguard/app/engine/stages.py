"""What the stages pass each other and need of their parts: `DetectorLike`, `DetectedFrame`,
`put_until` (a bounded put that gives up when the pipeline failed), `wall_time_of`."""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np

from campusguard.app.engine.sources import Frame
from campusguard.detections import Detections

log = logging.getLogger(__name__)


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
