"""`PolygonZone`: a validated polygon and vectorised point-in-polygon tests on box anchors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError

__all__ = ["PolygonZone", "points_in_polygon", "to_pixels"]

Units = Literal["auto", "px", "fraction"]


def to_pixels(points_xy: np.ndarray, resolution_wh: tuple[int, int] | None, units: Units, what: str) -> np.ndarray:
    """Return ``(K, 2) float64`` pixel coordinates from pixels or fractions of the frame.

    Args:
        points_xy: ``(K, 2)`` coordinates, pixels or fractions (0..1) of the frame size.
        resolution_wh: frame ``(width, height)`` in pixels; needed for fractions.
        units: ``"px"``, ``"fraction"``, or ``"auto"`` (fractions when every value is in 0..1).
        what: name of the zone or line, for error messages.
    """
    pts = np.asarray(points_xy, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 2 or not np.all(np.isfinite(pts)):
        raise InvalidInputError(f"{what}: points must be finite [x, y] pairs, got shape {pts.shape}")
    if units not in ("auto", "px", "fraction"):
        raise InvalidInputError(f"{what}: units must be 'auto', 'px' or 'fraction', got {units!r}")
    is_fraction = units == "fraction" or (units == "auto" and bool(np.all((pts >= 0) & (pts <= 1))))
    if not is_fraction:
        return pts
    if resolution_wh is None:
        raise InvalidInputError(f"{what}: coordinates are fractions of the frame but no resolution was given")
    if np.any((pts < 0) | (pts > 1)):
        raise InvalidInputError(f"{what}: fractional coordinates must be in 0..1")
    return pts * np.asarray(resolution_wh, dtype=np.float64)


def _segments_intersect(p1: np.ndarray, p2: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> bool:
    """True if closed segments p1-p2 and q1-q2 share a point (collinear overlap included)."""

    def orient(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
        return float((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))

    def on_segment(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
        return bool(min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1]))

    d1, d2 = orient(q1, q2, p1), orient(q1, q2, p2)
    d3, d4 = orient(p1, p2, q1), orient(p1, p2, q2)
    if ((d1 > 0 > d2) or (d1 < 0 < d2)) and ((d3 > 0 > d4) or (d3 < 0 < d4)):
        return True
    return (
        (d1 == 0 and on_segment(q1, q2, p1))
        or (d2 == 0 and on_segment(q1, q2, p2))
        or (d3 == 0 and on_segment(p1, p2, q1))
        or (d4 == 0 and on_segment(p1, p2, q2))
    )


def _is_self_intersecting(poly: np.ndarray) -> bool:
    """True if any two non-adjacent edges of the closed polygon ``(K, 2)`` touch."""
    k = len(poly)
    edges = [(poly[i], poly[(i + 1) % k]) for i in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            if j == i + 1 or (i == 0 and j == k - 1):
                continue  # adjacent edges share a vertex by construction
            if _segments_intersect(*edges[i], *edges[j]):
                return True
    return False


def points_in_polygon(points_xy: np.ndarray, polygon_xy: np.ndarray) -> np.ndarray:
    """Vectorised even-odd test of ``(N, 2)`` points against a closed ``(K, 2)`` polygon.

    Points on an edge or a vertex count as inside. Returns ``(N,) bool``.
    """
    pts = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    poly = np.asarray(polygon_xy, dtype=np.float64)
    if len(pts) == 0:
        return np.zeros(0, dtype=bool)
    x, y = pts[:, 0:1], pts[:, 1:2]  # (N, 1)
    ax, ay = poly[:, 0][None, :], poly[:, 1][None, :]  # (1, K)
    bx, by = np.roll(poly[:, 0], -1)[None, :], np.roll(poly[:, 1], -1)[None, :]
    # ray casting to +x: count edges straddling the horizontal through the point, right of it
    straddles = (ay > y) != (by > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = ax + (y - ay) * (bx - ax) / (by - ay)
    inside = np.count_nonzero(straddles & (x < x_cross), axis=1) % 2 == 1
    # boundary: collinear with an edge and within its bounding box
    cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
    scale = np.maximum(np.hypot(bx - ax, by - ay), 1e-12)
    within = (
        (x >= np.minimum(ax, bx) - 1e-9)
        & (x <= np.maximum(ax, bx) + 1e-9)
        & (y >= np.minimum(ay, by) - 1e-9)
        & (y <= np.maximum(ay, by) + 1e-9)
    )
    on_edge = np.any((np.abs(cross) / scale <= 1e-9) & within, axis=1)
    return inside | on_edge


class PolygonZone:
    """A named polygon in frame pixels.

    Args:
        polygon_xy: ``(K, 2)`` vertices, K >= 3, in pixels or fractions (0..1) of the frame.
        name: zone name, used in error messages and events.
        resolution_wh: frame ``(width, height)`` in pixels; needed for fractions, and when given
            every vertex must lie inside the frame ``[0, width] x [0, height]``.
        units: ``"px"``, ``"fraction"`` or ``"auto"`` (fractions when every value is in 0..1).

    Raises:
        InvalidInputError: fewer than 3 points, zero area, self-intersecting edges, a vertex
            outside the frame, or fractions without a resolution; the message names the zone.
    """

    def __init__(
        self,
        polygon_xy: np.ndarray | Sequence[Sequence[float]],
        name: str,
        *,
        resolution_wh: tuple[int, int] | None = None,
        units: Units = "auto",
    ) -> None:
        what = f"zone {name!r}"
        pts = np.asarray(polygon_xy, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) < 3:
            raise InvalidInputError(f"{what}: a polygon needs at least 3 [x, y] points, got shape {pts.shape}")
        pts = to_pixels(pts, resolution_wh, units, what)
        if len(pts) > 3 and np.allclose(pts[0], pts[-1]):
            pts = pts[:-1]  # tolerate an explicitly closed ring
        x, y = pts[:, 0], pts[:, 1]
        area = 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
        spread = pts - pts.mean(axis=0)
        if np.linalg.matrix_rank(spread, tol=1e-6 * max(1.0, float(np.abs(pts).max()))) < 2:
            raise InvalidInputError(f"{what}: polygon has zero area (degenerate or collinear points)")
        if _is_self_intersecting(pts):
            raise InvalidInputError(f"{what}: polygon edges intersect each other (self-intersecting)")
        if abs(area) < 1e-6:
            raise InvalidInputError(f"{what}: polygon has zero area (degenerate or collinear points)")
        if resolution_wh is not None:
            w, h = resolution_wh
            if np.any((x < 0) | (x > w) | (y < 0) | (y > h)):
                raise InvalidInputError(f"{what}: polygon extends outside the {w}x{h} frame")
        self.name = name
        self.polygon_xy: np.ndarray = pts.astype(np.float32)
        self.area_px: float = abs(area)
        self.resolution_wh = resolution_wh

    def contains(self, points_xy: np.ndarray) -> np.ndarray:
        """``(N,) bool``: which of the ``(N, 2)`` pixel points lie inside (boundary included)."""
        return points_in_polygon(points_xy, self.polygon_xy)

    def trigger(self, detections: Detections, anchor: str = "bottom_center") -> np.ndarray:
        """``(N,) bool``: which detections have their ``anchor`` point inside the zone."""
        if len(detections) == 0:
            return np.zeros(0, dtype=bool)
        return self.contains(detections.anchor(anchor))

    def __repr__(self) -> str:
        return f"PolygonZone(name={self.name!r}, points={len(self.polygon_xy)})"
