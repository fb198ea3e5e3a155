"""`SharedDetectors`: one detector per (model, device, input size) for all the cameras of a node.

A node runs each camera in a `WatchService` of its own; without this each would load, compile and
(with ``backend: auto``) measure its own copy of the same network, which takes seconds per
camera on a takeover. The shared detector serialises calls with a lock: the cameras of one node
take turns, as the cameras of one `WatchService` take turns in its detection worker.
"""

from __future__ import annotations

import threading

import numpy as np

from campusguard.app.engine.stages import DetectorLike, WarmingDetector
from campusguard.app.engine.wiring import DetectorFactory
from campusguard.detections import Detections

__all__ = ["LockedDetector", "SharedDetectors"]


class LockedDetector:
    """``detector`` with its calls serialised (thread-safe for several camera services)."""

    def __init__(self, detector: DetectorLike) -> None:
        self.detector = detector
        self._lock = threading.Lock()

    @property
    def names(self) -> dict[int, str]:
        return self.detector.names

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        with self._lock:
            return self.detector.predict_batch(images)

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        with self._lock:
            return self.detector.input_hw(frame_hw)

    def warm_up(self, frame_hw: tuple[int, int]) -> None:
        if isinstance(self.detector, WarmingDetector):
            with self._lock:
                self.detector.warm_up(frame_hw)


class SharedDetectors:
    """A `DetectorFactory` that builds each (model, device, imgsz) once through ``factory`` and shares it."""

    def __init__(self, factory: DetectorFactory) -> None:
        self.factory = factory
        self._made: dict[tuple[str | None, str, object], LockedDetector] = {}
        self._lock = threading.Lock()

    def __call__(self, model: str | None, device: str, imgsz: int | tuple[int, int] | None) -> DetectorLike:
        key = (model, device, imgsz)
        with self._lock:  # one build at a time: two cameras starting together share the first's
            if key not in self._made:
                self._made[key] = LockedDetector(self.factory(model, device, imgsz))
            return self._made[key]
