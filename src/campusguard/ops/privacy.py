"""Privacy on frames: masks filled solid, and persons or their heads made unrecognisable.

- `FrameMask`: polygons (pixels or fractions of the frame) filled with one colour, in place. The
  pixel polygons are worked out once per frame size, so masking a frame is one ``cv2.fillPoly``
  over the masked pixels only.
- `redaction_boxes`: the parts of person boxes to hide: the whole box (``persons``) or its top
  `HEAD_FRACTION` (``faces``: the head of an upright person, shoulders included).
- `redact_boxes`: each box's pixels shrunk to a few cells (`REDACT_CELLS` along its longer side)
  and stretched back bilinearly, a heavy blur under which no face or clothing detail is left.
- `shapes_inside_polygons`, `shape_inside_polygon`: which polygon (a mask) each polygon or
  segment lies inside (a zone or line there would never see anything), with Shapely.

Coordinates are frame pixels (x right, y down) unless ``units`` says fractions; images are
``(H, W, 3) uint8`` BGR.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal

import cv2
import numpy as np
import shapely

from campusguard.zones.polygon import Units, to_pixels

__all__ = [
    "HEAD_FRACTION",
    "REDACT_CELLS",
    "FrameMask",
    "RedactMode",
    "person_class_ids",
    "redact_boxes",
    "redaction_boxes",
    "shape_inside_polygon",
    "shapes_inside_polygons",
]

RedactMode = Literal["persons", "faces"]
HEAD_FRACTION = 0.3
"""``faces``: the top 30 % of a person box (head and shoulders of someone standing)."""
REDACT_CELLS = 6
"""Cells along the longer side a redacted box is reduced to (a face gets at most 6 x 6)."""
PERSON_NAMES = frozenset({"person"})
"""Class names whose boxes are redacted."""


class FrameMask:
    """Polygons filled with one flat colour on every frame.

    Args:
        polygons: ``[(points, units)]``: each ``(K, 2)`` vertices in ``units`` (``pixels``,
            ``fraction`` of the frame, or ``auto``); already checked (`polygon_problem`).
        fill_bgr: the colour, ``(blue, green, red)`` 0..255.
        reference_wh: the frame size (width, height) pixel coordinates are given for; a frame of
            another size (a camera that came back at another resolution) gets them scaled, so a
            mask keeps covering the same part of the scene. None: pixels are taken as they are.
    """

    def __init__(
        self,
        polygons: Sequence[tuple[Sequence[Sequence[float]] | np.ndarray, Units]],
        fill_bgr: Sequence[int] = (0, 0, 0),
        reference_wh: tuple[int, int] | None = None,
    ) -> None:
        self.polygons = [(np.asarray(p, dtype=np.float64).reshape(-1, 2), units) for p, units in polygons]
        self.fill_bgr = tuple(int(c) for c in fill_bgr)
        self.reference_wh = reference_wh
        self._cache: tuple[tuple[int, int], list[np.ndarray]] | None = None

    def __bool__(self) -> bool:
        return bool(self.polygons)

    def polygons_px(self, resolution_wh: tuple[int, int]) -> list[np.ndarray]:
        """``(K, 2) float64`` pixel polygons for frames of ``resolution_wh`` (width, height)."""
        ref = self.reference_wh
        if ref is None or ref == resolution_wh:
            return [to_pixels(p, resolution_wh, units, "privacy mask") for p, units in self.polygons]
        scale = np.asarray(resolution_wh, np.float64) / np.asarray(ref, np.float64)
        return [to_pixels(p, ref, units, "privacy mask") * scale for p, units in self.polygons]

    def _fill_polygons(self, resolution_wh: tuple[int, int]) -> list[np.ndarray]:
        cache = self._cache
        if cache is None or cache[0] != resolution_wh:
            # 4 bits of sub-pixel precision: fractions of odd frame sizes land where they should
            polys = [np.round(p * 16).astype(np.int32).reshape(-1, 1, 2) for p in self.polygons_px(resolution_wh)]
            cache = self._cache = (resolution_wh, polys)
        return cache[1]

    def apply(self, image: np.ndarray) -> np.ndarray:
        """Fill the masks on ``image`` (in place when it is writable, else on a copy); returns the image."""
        if not self.polygons:
            return image
        if not image.flags.writeable:
            image = image.copy()
        polys = self._fill_polygons((int(image.shape[1]), int(image.shape[0])))
        cv2.fillPoly(image, polys, self.fill_bgr, lineType=cv2.LINE_8, shift=4)
        return image

    def coverage(self, resolution_wh: tuple[int, int]) -> np.ndarray:
        """``(H, W) bool``: the pixels `apply` fills on a frame of ``resolution_wh``."""
        w, h = resolution_wh
        canvas = np.zeros((h, w), np.uint8)
        if self.polygons:
            cv2.fillPoly(canvas, self._fill_polygons(resolution_wh), 1, lineType=cv2.LINE_8, shift=4)
        return canvas.astype(bool)


def person_class_ids(names: Mapping[int, str], person_names: Collection[str] = PERSON_NAMES) -> np.ndarray:
    """``(M,) int64`` class ids whose name is one of ``person_names``."""
    return np.asarray(sorted(i for i, n in names.items() if n in person_names), dtype=np.int64)


def redaction_boxes(xyxy: np.ndarray, mode: RedactMode, head_fraction: float = HEAD_FRACTION) -> np.ndarray:
    """``(N, 4) float32`` areas to hide of ``(N, 4)`` person boxes: whole boxes, or their top ``head_fraction``."""
    boxes = np.asarray(xyxy, dtype=np.float32).reshape(-1, 4).copy()
    if mode == "faces":
        boxes[:, 3] = boxes[:, 1] + (boxes[:, 3] - boxes[:, 1]) * head_fraction
    elif mode != "persons":
        raise ValueError(f"redaction mode must be 'persons' or 'faces', got {mode!r}")
    return boxes


def redact_boxes(image: np.ndarray, xyxy: np.ndarray, *, cells: int = REDACT_CELLS, margin: float = 0.05) -> np.ndarray:
    """Make each box of ``image`` unrecognisable, in place; returns ``image``.

    Args:
        image: ``(H, W, 3) uint8`` BGR, modified.
        xyxy: ``(N, 4)`` boxes in ``image``'s pixels (clipped to it).
        cells: the box is reduced to this many cells along its longer side (area average), then
            stretched back bilinearly: no detail smaller than a sixth of the box survives.
        margin: each box grows by this fraction of its size on every side (loose boxes).
    """
    h, w = image.shape[:2]
    for x1, y1, x2, y2 in np.asarray(xyxy, dtype=np.float64).reshape(-1, 4):
        mx, my = (x2 - x1) * margin, (y2 - y1) * margin
        ix1, iy1 = max(0, int(np.floor(x1 - mx))), max(0, int(np.floor(y1 - my)))
        ix2, iy2 = min(w, int(np.ceil(x2 + mx))), min(h, int(np.ceil(y2 + my)))
        bw, bh = ix2 - ix1, iy2 - iy1
        if bw < 2 or bh < 2:
            continue
        scale = cells / max(bw, bh)
        small_wh = (max(1, round(bw * scale)), max(1, round(bh * scale)))
        roi = image[iy1:iy2, ix1:ix2]
        small = cv2.resize(roi, small_wh, interpolation=cv2.INTER_AREA)
        roi[...] = cv2.resize(small, (bw, bh), interpolation=cv2.INTER_LINEAR)
    return image


def shapes_inside_polygons(
    shapes: Sequence[tuple[np.ndarray | Sequence[Sequence[float]], bool]], polygons: Sequence[np.ndarray]
) -> list[int | None]:
    """For each shape, the index of the first polygon it lies inside (boundary included), or None.

    Args:
        shapes: ``[(points, closed)]``: each ``(K, 2)`` vertices of a polygon (``closed``: the last
            vertex joins the first) or of a polyline, such as a line's two end points.
        polygons: ``(M, 2)`` simple polygons (already checked, `polygon_problem`), same units.

    One Shapely ``STRtree`` of the polygons answers every shape at once (``covered_by``: no point of
    the shape outside the polygon; exact for any simple polygon, concave ones included): only the
    polygons whose bounding box holds the shape's are tested, with prepared geometries.
    """
    out: list[int | None] = [None] * len(shapes)
    if not shapes or not polygons:
        return out
    tree = shapely.STRtree([shapely.Polygon(np.asarray(p, np.float64).reshape(-1, 2)) for p in polygons])
    geoms, which = [], []
    for n, (points, closed) in enumerate(shapes):
        pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        if len(pts) >= (3 if closed else 2):
            geoms.append(shapely.Polygon(pts) if closed else shapely.LineString(pts))
            which.append(n)
    if not geoms:
        return out
    shape_idx, polygon_idx = tree.query(geoms, predicate="covered_by")
    for s, p in zip(shape_idx.tolist(), polygon_idx.tolist(), strict=True):
        n = which[s]
        current = out[n]
        out[n] = p if current is None else min(current, p)
    return out


def shape_inside_polygon(points_xy: np.ndarray, polygon_xy: np.ndarray, *, closed: bool) -> bool:
    """Whether a shape lies inside a polygon (boundary included): `shapes_inside_polygons` of one.

    Args:
        points_xy: ``(K, 2)`` the shape's vertices: a polygon (``closed``) or a polyline, such as a
            line's two end points.
        polygon_xy: ``(M, 2)`` the polygon, same units.
        closed: the shape's last vertex joins its first.
    """
    return shapes_inside_polygons([(points_xy, closed)], [polygon_xy])[0] is not None
