"""Factories shared by tests (import as ``from factories import build_detections``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from campusguard.detections import Detections


def build_detections(
    xyxy: Sequence[Sequence[float]] | np.ndarray,
    confidence: Sequence[float] | float = 0.9,
    class_id: Sequence[int] | int = 0,
    tracker_id: Sequence[int] | None = None,
) -> Detections:
    """`Detections` from plain lists; scalar ``confidence``/``class_id`` are broadcast to every row."""
    boxes = np.asarray(xyxy, dtype=np.float32).reshape(-1, 4)
    n = len(boxes)
    conf = np.broadcast_to(np.asarray(confidence, dtype=np.float32), (n,)).copy()
    cls = np.broadcast_to(np.asarray(class_id, dtype=np.int64), (n,)).copy()
    tid = None if tracker_id is None else np.asarray(tracker_id, dtype=np.int64)
    return Detections(boxes, conf, cls, tid)
