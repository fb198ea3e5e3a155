"""Drawing detections on frames: one small annotator family, one colour and one label per box.

Modelled on supervision's ``annotators/base.py``: each annotator draws one kind of thing with
``annotate(scene, detections) -> scene``, and they compose (`draw_detections` is boxes then labels).
Every picture the package draws takes its box colours from `color_for` and its box labels from
`box_label`: ``campusguard predict --save`` (`draw_detections`) and the watch view, live view,
clips and annotated videos (`campusguard.app.media.annotate.draw_overlay`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import cv2
import numpy as np

from campusguard.detections import Detections

__all__ = [
    "Annotator",
    "BoxAnnotator",
    "LabelAnnotator",
    "box_label",
    "color_for",
    "color_of",
    "draw_detections",
]

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
_WHITE = (255, 255, 255)


def color_for(index: int) -> tuple[int, int, int]:
    """A stable BGR colour for a class or track index."""
    c = _PALETTE[int(index) % len(_PALETTE)]
    return int(c[0]), int(c[1]), int(c[2])


def _tracker_id(detections: Detections, i: int) -> int | None:
    """The track id of box ``i``, ``None`` when untracked (no ids, or a negative one)."""
    tids = detections.tracker_id
    if tids is None or int(tids[i]) < 0:
        return None
    return int(tids[i])


def color_of(detections: Detections, i: int) -> tuple[int, int, int]:
    """The colour of box ``i``: by its track id when tracked (one colour per object), else by class."""
    tid = _tracker_id(detections, i)
    return color_for(int(detections.class_id[i]) if tid is None else tid)


def box_label(detections: Detections, i: int, names: dict[int, str] | None = None) -> str:
    """The label of box ``i``: ``#<track id> <class name> <confidence>`` (no ``#id`` when untracked)."""
    cls = int(detections.class_id[i])
    tid = _tracker_id(detections, i)
    return f"{'' if tid is None else f'#{tid} '}{(names or {}).get(cls, str(cls))} {detections.confidence[i]:.2f}"


def _corners(detections: Detections, i: int) -> tuple[int, int, int, int]:
    x1, y1, x2, y2 = (int(round(float(v))) for v in detections.xyxy[i])
    return x1, y1, x2, y2


class Annotator(Protocol):
    """Draws one kind of thing for every box onto ``scene`` (``(H, W, 3) uint8`` BGR, modified and returned)."""

    def annotate(self, scene: np.ndarray, detections: Detections) -> np.ndarray: ...


@dataclass(frozen=True)
class BoxAnnotator:
    """The box outline of each detection, in its `color_of` colour (``thickness`` in pixels)."""

    thickness: int = 2

    def annotate(self, scene: np.ndarray, detections: Detections) -> np.ndarray:
        for i in range(len(detections)):
            x1, y1, x2, y2 = _corners(detections, i)
            cv2.rectangle(scene, (x1, y1), (x2, y2), color_of(detections, i), self.thickness, cv2.LINE_AA)
        return scene


@dataclass(frozen=True)
class LabelAnnotator:
    """The `box_label` of each detection above its box's top-left corner.

    Attributes:
        names: class id to name (the id itself when missing).
        text_scale: OpenCV font scale.
        filled: white text on a box of the detection's colour; else text in that colour.
    """

    names: dict[int, str] = field(default_factory=dict)
    text_scale: float = 0.5
    filled: bool = True

    def annotate(self, scene: np.ndarray, detections: Detections) -> np.ndarray:
        font = cv2.FONT_HERSHEY_SIMPLEX
        for i in range(len(detections)):
            x1, y1, _, _ = _corners(detections, i)
            color, label = color_of(detections, i), box_label(detections, i, self.names)
            if not self.filled:
                cv2.putText(scene, label, (x1, max(10, y1 - 3)), font, self.text_scale, color, 1, cv2.LINE_AA)
                continue
            (tw, th), base = cv2.getTextSize(label, font, self.text_scale, 1)
            y_text = max(y1, th + base)
            cv2.rectangle(scene, (x1, y_text - th - base), (x1 + tw, y_text), color, -1)
            cv2.putText(scene, label, (x1, y_text - base), font, self.text_scale, _WHITE, 1, cv2.LINE_AA)
        return scene


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
    out = BoxAnnotator(thickness).annotate(out, detections)
    return LabelAnnotator(names or {}, scale, filled=True).annotate(out, detections)
