"""Drawing the watch view: zones, lines, tracked boxes with ids, active incidents; and a video writer.

Boxes and their labels are drawn by the package's one annotator family
(`campusguard.io.draw`: one colour and one label per box, as ``predict --save`` draws them);
zones, lines and the incident panel are the watch view's own. Drawing is in place on a copy the caller owns; `AnnotatedVideoWriter` keeps one open
``cv2.VideoWriter`` per camera and always releases it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from campusguard.detections import Detections
from campusguard.errors import SourceError
from campusguard.io.draw import BoxAnnotator, LabelAnnotator

__all__ = ["AnnotatedVideoWriter", "draw_overlay"]

_ZONE_COLOR = (0, 200, 255)  # BGR amber
_ALERT_COLOR = (0, 0, 255)  # BGR red
_LINE_COLOR = (255, 200, 0)  # BGR cyan-ish
_ALERT_COLOR_TEXT = (80, 80, 255)  # BGR light red: readable on the darkened header panel


def draw_overlay(
    image: np.ndarray,
    detections: Detections,
    names: dict[int, str],
    zones: Sequence[tuple[str, np.ndarray]] = (),
    lines: Sequence[tuple[str, np.ndarray]] = (),
    alert_zones: Sequence[str] = (),
    incidents: Sequence[str] = (),
    header: str | None = None,
) -> np.ndarray:
    """Draw zones, lines, boxes and the active incidents onto ``image`` (modified and returned).

    Args:
        image: ``(H, W, 3) uint8`` BGR frame.
        detections: boxes in this frame's pixels; labelled ``#id class conf`` when tracked.
        names: class id to name.
        zones: ``(name, (K, 2) polygon in pixels)``; zones in ``alert_zones`` are drawn red.
        lines: ``(name, (2, 2) end points in pixels)``.
        alert_zones: names of zones with an open incident.
        incidents: text lines listed in the top-left corner (one per open incident).
        header: optional first line (camera id, time).
    """
    h, w = image.shape[:2]
    scale = max(0.35, min(w, h) / 900)
    thick = max(1, round(min(w, h) / 360))
    for name, poly in zones:
        color = _ALERT_COLOR if name in alert_zones else _ZONE_COLOR
        pts = np.round(poly).astype(np.int32).reshape(-1, 1, 2)
        cv2.polylines(image, [pts], True, color, thick, cv2.LINE_AA)
        x, y = pts[:, 0, 0].min(), pts[:, 0, 1].min()
        cv2.putText(
            image,
            name,
            (int(x) + 3, int(y) + int(14 * scale + 4)),
            cv2.FONT_HERSHEY_SIMPLEX,
            scale,
            color,
            1,
            cv2.LINE_AA,
        )
    for name, pts in lines:
        p = np.round(pts).astype(np.int32)
        cv2.line(image, tuple(p[0]), tuple(p[1]), _LINE_COLOR, thick, cv2.LINE_AA)
        cv2.putText(image, name, tuple(p[0] + 4), cv2.FONT_HERSHEY_SIMPLEX, scale, _LINE_COLOR, 1, cv2.LINE_AA)
    BoxAnnotator(thick).annotate(image, detections)
    LabelAnnotator(names, scale * 0.9, filled=False).annotate(image, detections)
    texts = ([header] if header else []) + [f"! {t}" for t in incidents]
    if texts:
        (_, text_h), base = cv2.getTextSize("Ag", cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
        step = text_h + base + 4  # one text line, so stacked lines never overlap
        width = max(cv2.getTextSize(t, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0] for t in texts)
        panel = image[: 4 + step * len(texts), : min(w, width + 12)]
        panel[:] = (panel * 0.35).astype(np.uint8)  # darkened panel behind the text: readable on any scene
        for k, text in enumerate(texts):
            color = (255, 255, 255) if k == 0 and header else _ALERT_COLOR_TEXT
            cv2.putText(image, text, (6, 2 + text_h + k * step), cv2.FONT_HERSHEY_SIMPLEX, scale, color, 1, cv2.LINE_AA)
    return image


class AnnotatedVideoWriter:
    """MP4 files for one camera, in segments, keeping the first frame size (later frames are resized to it).

    An MP4 muxer keeps an index entry per frame in memory until the file is closed, so a writer
    that never closes grows without bound; segments of ``segment_frames`` frames keep it flat.
    The first segment is ``path``, later ones ``<stem>.001.mp4``, ``<stem>.002.mp4``, ...

    Args:
        path: output ``.mp4`` file of the first segment (folder created).
        fps: frames per second of the output.
        segment_frames: frames per file (None: one file).
    """

    def __init__(self, path: str | Path, fps: float, segment_frames: int | None = None) -> None:
        self.path = Path(path)
        self.fps = float(fps)
        self.segment_frames = segment_frames
        self.paths: list[Path] = []
        self._writer: cv2.VideoWriter | None = None
        self._size_wh: tuple[int, int] | None = None
        self._in_segment = 0
        self.frames = 0

    def _open(self, size_wh: tuple[int, int]) -> cv2.VideoWriter:
        k = len(self.paths)
        path = self.path if k == 0 else self.path.with_name(f"{self.path.stem}.{k:03d}{self.path.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), self.fps, size_wh)
        if not writer.isOpened():
            raise SourceError(f"cannot write annotated video {path}")
        self.paths.append(path)
        self._in_segment = 0
        return writer

    def write(self, image: np.ndarray) -> None:
        """Append one ``(H, W, 3) uint8`` BGR frame."""
        if self._size_wh is None:
            self._size_wh = (int(image.shape[1]), int(image.shape[0]))
        if self._writer is not None and self.segment_frames is not None and self._in_segment >= self.segment_frames:
            self._writer.release()
            self._writer = None
        if self._writer is None:
            self._writer = self._open(self._size_wh)
        if (image.shape[1], image.shape[0]) != self._size_wh:
            image = cv2.resize(image, self._size_wh, interpolation=cv2.INTER_AREA)
        self._writer.write(image)
        self._in_segment += 1
        self.frames += 1

    def close(self) -> None:
        """Finish the current file (idempotent)."""
        if self._writer is not None:
            self._writer.release()
            self._writer = None
