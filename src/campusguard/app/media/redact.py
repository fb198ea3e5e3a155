"""Blur by role: the redacted variants of frames and media files that viewers are given.

With a camera's ``privacy.blur`` set, every frame carries the areas to hide (person boxes, or
their heads) from the detections the pipeline already made (`redaction_areas`). The live view
encodes a redacted JPEG only when a viewer-role client asks; incident snapshots and clips are
written twice, sharp and redacted (`redacted_path`: ``<name>.redacted<suffix>`` next to the
sharp file), so serving is a choice of file by role, and retention deletes both together.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from campusguard.detections import Detections
from campusguard.ops.privacy import RedactMode, person_class_ids, redact_boxes, redaction_boxes

__all__ = ["REDACTED_TAG", "redact_image", "redacted_path", "redaction_areas", "sharp_path"]

REDACTED_TAG = ".redacted"
"""What a redacted media file's name adds before its suffix."""


def redacted_path(sharp: Path) -> Path:
    """Where the redacted variant of the media file ``sharp`` is written (``a.jpg`` -> ``a.redacted.jpg``)."""
    return sharp.with_name(f"{sharp.stem}{REDACTED_TAG}{sharp.suffix}")


def sharp_path(path: Path) -> Path:
    """The sharp file a media file belongs to: itself, or the original of a redacted variant."""
    stem = path.stem
    return path.with_name(stem[: -len(REDACTED_TAG)] + path.suffix) if stem.endswith(REDACTED_TAG) else path


def redaction_areas(mode: RedactMode, names: dict[int, str], *detections: Detections) -> np.ndarray:
    """``(N, 4) float32`` areas to hide of the person boxes in ``detections`` (all in the same frame's pixels).

    Several sets are joined: a frame's raw detections (a person not yet tracked) and the tracked
    boxes (one the detector missed this frame).
    """
    persons = person_class_ids(names)
    boxes = [d.xyxy[np.isin(d.class_id, persons)] for d in detections if len(d)]
    if not boxes:
        return np.zeros((0, 4), np.float32)
    return redaction_boxes(np.unique(np.concatenate(boxes), axis=0), mode)  # a tracked box is often the raw one


def redact_image(image: np.ndarray, areas_xyxy: np.ndarray, areas_wh: tuple[int, int]) -> np.ndarray:
    """A redacted copy of ``image``; ``areas_xyxy`` are in pixels of a frame of ``areas_wh`` (scaled to the image)."""
    out = image.copy()
    h, w = out.shape[:2]
    areas = np.asarray(areas_xyxy, np.float64).reshape(-1, 4)
    if (w, h) != areas_wh and len(areas):
        areas = areas * np.array([w / areas_wh[0], h / areas_wh[1]] * 2)
    return redact_boxes(out, areas)
