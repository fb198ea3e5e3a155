"""Drawing detections on frames (boxes, class names, confidences, track ids)."""

from __future__ import annotations

import cv2
import numpy as np

from campusguard.detections import Detections

__all__ = ["color_for", "draw_detections"]

_PALETTE = np.array(
    [
        (56, 56, 255),
        (151, 157, 255),
        (31, 112, 255),
        (29, 178, 255),
        (49, 210, 207),
        (10, 249, 72),
        (23, 204, 146),
        (134, 219, 61),
        (52, 147, 26),
        (187, 212, 0),
        (168, 153, 44),
        (255, 194, 0),
        (147, 69, 52),
        (255, 115, 100),
        (236, 24, 0),
        (255, 56, 132),
        (133, 0, 82),
        (255, 56, 203),
        (200, 149, 255),
        (199, 55, 255),
    ],
    dtype=np.uint8,
)


def color_for(index: int) -> tuple[int, int, int]:
    """A stable BGR colour for a class or track index."""
    c = _PALETTE[int(index) % len(_PALETTE)]
    return int(c[0]), int(c[1]), int(c[2])


def draw_detections(
    frame: np.ndarray,
    detections: Detections,
    names: dict[int, str] | None = None,
    thickness: int = 2,
    copy: bool = True,
) -> np.ndarray:
    """Draw boxes and labels on a ``(H, W, 3) uint8`` BGR frame; returns the drawn frame."""
    out = frame.copy() if copy else frame
    scale = max(0.4, min(out.shape[:2]) / 1000)
    for i in range(len(detections)):
        x1, y1, x2, y2 = (int(round(v)) for v in detections.xyxy[i])
        cls = int(detections.class_id[i])
        tid = None if detections.tracker_id is None else int(detections.tracker_id[i])
        color = color_for(cls if tid is None else tid)
        cv2.rectangle(out, (x1, y1), (x2, y2), color, thickness, cv2.LINE_AA)
        label = (
            (names or {}).get(cls, str(cls)) + f" {detections.confidence[i]:.2f}" + ("" if tid is None else f" #{tid}")
        )
        (tw, th), base = cv2.getTextSize(label, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        y_text = max(y1, th + base)
        cv2.rectangle(out, (x1, y_text - th - base), (x1 + tw, y_text), color, -1)
        cv2.putText(out, label, (x1, y_text - base), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), 1, cv2.LINE_AA)
    return out
