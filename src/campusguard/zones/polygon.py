"""`PolygonZone`: a validated polygon and vectorised point-in-polygon tests on box anchors."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError

__all__ = [
    "FrameUnits",
    "PolygonZone",
    "Units",
    "frame_problem",
    "points_in_polygon",
    "polygon_problem",
    "to_pixels",
    "units_problem",
]

FrameUnits = Literal["pixels", "fraction"]
"""How zone and line coordinates are given: ``pixels`` of the frame, or ``fraction`` of its width and height."""
Units = Literal["auto", "pixels", "fraction"]
"""`FrameUnits`, or ``auto``: fractions when every value is in 0..1, else pixels."""


def units_problem(points_xy: np.ndarray | Sequence[Sequence[float]], units: Units) -> str | None:
    """Say what is wrong with coordinates given in ``units`` (not finite [x, y] pairs, fractions outside 0..1), or None."""
    pts = np.asarray(points_xy, dtype=np.float64)
    if pts.size == 0:
        return None  # how many points a shape needs is the shape's check
    if pts.ndim != 2 or pts.shape[1] != 2 or not np.all(np.isfinite(pts)):
        return f"points must be finite [x, y] pairs, got shape {pts.shape}"
    if units not in ("auto", "pixels", "fraction"):
        return f"units must be 'auto', 'pixels' or 'fraction', got {units!r}"
    if units == "fraction" and np.any((pts < 0) | (pts > 1)):
        return "coordinates in units 'fraction' must be in 0..1"
    return None


def to_pixels(points_xy: np.ndarray, resolution_wh: tuple[int, int] | None, units: Units, what: str) -> np.ndarray:
    """Return ``(K, 2) float64`` pixel coordinates from pixels or fractions of the frame.

    Args:
        points_xy: ``(K, 2)`` coordinates, pixels or fractions (0..1) of the frame size.
        resolution_wh: frame ``(width, height)`` in pixels; needed for fractions.
        units: ``"pixels"``, ``"fraction"``, or ``"auto"`` (fractions when every value is in 0..1).
        what: name of the zone or line, for error messages.

    Raises:
        InvalidInputError: see `units_problem`; fractions without ``resolution_wh``.
    """
    problem = units_problem(points_xy, units)
    if problem:
        raise InvalidInputError(f"{what}: {problem}")
    pts = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    is_fraction = units == "fraction" or (units == "auto" and bool(np.all((pts >= 0) & (pts <= 1))))
    if not is_fraction:
        return pts
    if resolution_wh is None:
        raise InvalidInputError(f"{what}: coordinates are fractions of the frame but no resolution was given")
    return pts * np.asarray(resolution_wh, dtype=np.float64)


def frame_problem(points_px: np.ndarray, resolution_wh: tuple[int, int], shape: str) -> str | None:
    """Say which of the ``(K, 2)`` pixel points of a ``shape`` ("polygon", "line") leaves the frame, or None."""
    w, h = resolution_wh
    x, y = points_px[:, 0], points_px[:, 1]
    outside = np.flatnonzero((x < 0) | (x > w) | (y < 0) | (y > h))
    if len(outside) == 0:
        return None
    first = (float(x[outside[0]]), float(y[outside[0]]))
    return f"{shape} extends outside the {w}x{h} frame at {first}"


def _open_ring(pts: np.ndarray) -> np.ndarray:
    """Drop a last vertex that repeats the first (an explicitly closed ring)."""
    return pts[:-1] if len(pts) > 3 and np.array_equal(pts[0], pts[-1]) else pts


def _orient_xy(
    ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray, cx: np.ndarray, cy: np.ndarray
) -> np.ndarray:
    """Twice the signed area of triangles a, b, c, over broadcast arrays of coordinates: its sign says
    on which side of a->b each point c lies."""
    return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)


def _within_box(
    ax: np.ndarray, ay: np.ndarray, bx: np.ndarray, by: np.ndarray, cx: np.ndarray, cy: np.ndarray
) -> np.ndarray:
    """Whether c lies in the bounding box of segment a-b (with `_orient_xy` 0: on the segment)."""
    return (
        (np.minimum(ax, bx) <= cx)
        & (cx <= np.maximum(ax, bx))
        & (np.minimum(ay, by) <= cy)
        & (cy <= np.maximum(ay, by))
    )


_PAIR_BLOCK = 1 << 18
"""Edge pairs tested at once by `_self_intersection` (bounds its temporary arrays to a few MB)."""


def _self_intersection(poly: np.ndarray) -> tuple[int, int] | None:
    """The first two non-adjacent edges ``(i, j)``, ``i < j`` in that order, of the closed polygon
    ``(K, 2)`` that touch (closed segments sharing a point, collinear overlap included), or None.

    Vectorised with NumPy, a block of edges ``i`` against all edges ``j`` at a time: only the pairs
    whose bounding boxes meet get the orientation tests. ``K = 256`` takes well under a
    millisecond, where a pair loop in Python took about 0.15 s.
    """
    k = len(poly)
    ax, ay = poly[:, 0], poly[:, 1]
    bx, by = np.roll(ax, -1), np.roll(ay, -1)
    x0, x1 = np.minimum(ax, bx), np.maximum(ax, bx)
    y0, y1 = np.minimum(ay, by), np.maximum(ay, by)
    j = np.arange(k)[None, :]
    rows = max(1, _PAIR_BLOCK // max(k, 1))
    for start in range(0, k, rows):
        i = np.arange(start, min(k, start + rows))[:, None]
        meet = (x0[i] <= x1[None, :]) & (x0[None, :] <= x1[i]) & (y0[i] <= y1[None, :]) & (y0[None, :] <= y1[i])
        # adjacent edges share a vertex by construction
        pi, pj = np.nonzero(meet & (j > i + 1) & ~((i == 0) & (j == k - 1)))  # row-major: (i, j) order
        if len(pi) == 0:
            continue
        pi = pi + start
        pax, pay, pbx, pby = ax[pi], ay[pi], bx[pi], by[pi]
        qax, qay, qbx, qby = ax[pj], ay[pj], bx[pj], by[pj]
        with np.errstate(over="ignore", invalid="ignore"):  # huge coordinates: inf/nan, as Python floats give
            d1 = _orient_xy(qax, qay, qbx, qby, pax, pay)
            d2 = _orient_xy(qax, qay, qbx, qby, pbx, pby)
            d3 = _orient_xy(pax, pay, pbx, pby, qax, qay)
            d4 = _orient_xy(pax, pay, pbx, pby, qbx, qby)
        proper = (((d1 > 0) & (d2 < 0)) | ((d1 < 0) & (d2 > 0))) & (((d3 > 0) & (d4 < 0)) | ((d3 < 0) & (d4 > 0)))
        touch = (
            ((d1 == 0) & _within_box(qax, qay, qbx, qby, pax, pay))
            | ((d2 == 0) & _within_box(qax, qay, qbx, qby, pbx, pby))
            | ((d3 == 0) & _within_box(pax, pay, pbx, pby, qax, qay))
            | ((d4 == 0) & _within_box(pax, pay, pbx, pby, qbx, qby))
        )
        hit = np.flatnonzero(proper | touch)
        if len(hit):
            return int(pi[hit[0]]), int(pj[hit[0]])
    return None


def polygon_problem(polygon_xy: np.ndarray | Sequence[Sequence[float]]) -> str | None:
    """Say what is wrong with a polygon, in any units, or None.

    Checked in order: finite ``[x, y]`` pairs, at least 3 points (a closed ring's repeated
    last point aside), not all collinear, no repeated point, no crossing edges. These do not
    depend on the units: scaling by the frame size keeps every answer.

    The answer is remembered by the points' values (the last `_KNOWN_POLYGONS` polygons): a
    console save checks each shape when the config is validated and again when the running
    camera's zones are built, and an edit sends every shape while it changes only a few.
    """
    pts = np.asarray(polygon_xy, dtype=np.float64)
    pts = pts.reshape(0, 2) if pts.size == 0 else pts
    return _polygon_problem(pts.shape, pts.tobytes())


_KNOWN_POLYGONS = 1024


@lru_cache(maxsize=_KNOWN_POLYGONS)
def _polygon_problem(shape: tuple[int, ...], data: bytes) -> str | None:
    """`polygon_problem` of the float64 points ``data`` of ``shape``."""
    pts = np.frombuffer(data, dtype=np.float64).reshape(shape)
    problem = units_problem(pts, "auto")
    if problem:
        return problem
    pts = _open_ring(pts)
    if len(pts) < 3:
        return f"a polygon needs at least 3 points, got {len(pts)}"
    scale = max(1.0, float(np.abs(pts).max()))
    if np.linalg.matrix_rank(pts - pts.mean(axis=0), tol=1e-9 * scale) < 2:
        return "polygon is degenerate (zero area: its points are collinear)"
    if len(np.unique(pts, axis=0)) < len(pts):
        return "polygon repeats a point"
    crossing = _self_intersection(pts)
    if crossing is not None:
        return f"polygon is self-intersecting: edges {crossing[0]} and {crossing[1]} cross each other"
    return None


def _edges(polygon_xy: np.ndarray) -> tuple[np.ndarray, ...]:
    """What the point test needs of a closed ``(K, 2)`` polygon, as ``(1, K)`` float64 rows: each
    edge's ends ``ax, ay, bx, by``, its bounding box (less and plus the 1e-9 px tolerance) and length."""
    poly = np.asarray(polygon_xy, dtype=np.float64)
    ax, ay = poly[:, 0][None, :], poly[:, 1][None, :]
    bx, by = np.roll(poly[:, 0], -1)[None, :], np.roll(poly[:, 1], -1)[None, :]
    return (
        ax,
        ay,
        bx,
        by,
        np.minimum(ax, bx) - 1e-9,
        np.maximum(ax, bx) + 1e-9,
        np.minimum(ay, by) - 1e-9,
        np.maximum(ay, by) + 1e-9,
        np.maximum(np.hypot(bx - ax, by - ay), 1e-12),
    )


_SMALL = 48  # points x edges below which the test runs on Python floats (NumPy's per-call cost dominates)


def _edge_rows(edges: tuple[np.ndarray, ...]) -> list[tuple[float, ...]]:
    """The edges of `_edges` as one tuple of Python floats each."""
    return [tuple(float(a[0, k]) for a in edges) for k in range(edges[0].shape[1])]


def _inside_small(pts: list[list[float]], rows: list[tuple[float, ...]]) -> np.ndarray:
    """`_inside` for a few points, on Python floats: the same IEEE double operations in the same
    order as the array code, so the same answers, without NumPy's set-up cost per call."""
    out = np.zeros(len(pts), dtype=bool)
    for i, (x, y) in enumerate(pts):
        crossings = 0
        on_edge = False
        for ax, ay, bx, by, x_lo, x_hi, y_lo, y_hi, scale in rows:
            if (ay > y) != (by > y) and x < ax + (y - ay) * (bx - ax) / (by - ay):
                crossings += 1
            if (
                not on_edge
                and x_lo <= x <= x_hi
                and y_lo <= y <= y_hi
                and abs((bx - ax) * (y - ay) - (by - ay) * (x - ax)) / scale <= 1e-9
            ):
                on_edge = True
        out[i] = on_edge or crossings % 2 == 1
    return out


def _inside(
    points_xy: np.ndarray, edges: tuple[np.ndarray, ...], rows: list[tuple[float, ...]] | None = None
) -> np.ndarray:
    ax, ay, bx, by, x_lo, x_hi, y_lo, y_hi, scale = edges
    pts = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    if len(pts) == 0:
        return np.zeros(0, dtype=bool)
    if len(pts) * ax.shape[1] <= _SMALL:
        return _inside_small(pts.tolist(), _edge_rows(edges) if rows is None else rows)
    out = np.zeros(len(pts), dtype=bool)
    # only a point in the polygon's bounding box (with the edges' tolerance, and a margin for rounding
    # in the crossing's x) can be inside or on an edge: the others are left out of the test
    x0, x1, y0, y1 = float(x_lo.min()), float(x_hi.max()), float(y_lo.min()), float(y_hi.max())
    margin = 1e-9 * max(1.0, abs(x0), abs(x1), abs(y0), abs(y1))
    x, y = pts[:, 0], pts[:, 1]
    near = np.flatnonzero((x >= x0 - margin) & (x <= x1 + margin) & (y >= y0 - margin) & (y <= y1 + margin))
    if len(near) == 0:
        return out
    x, y = x[near][None, :], y[near][None, :]  # (1, M): the edges run down the first axis, (K, M)
    ax, ay, bx, by, x_lo, x_hi, y_lo, y_hi, scale = (e.T for e in edges)
    # ray casting to +x: count edges straddling the horizontal through the point, right of it
    straddles = (ay > y) != (by > y)
    with np.errstate(divide="ignore", invalid="ignore"):
        x_cross = ax + (y - ay) * (bx - ax) / (by - ay)
    inside = np.count_nonzero(straddles & (x < x_cross), axis=0) % 2 == 1
    # boundary: collinear with an edge and within its bounding box
    cross = (bx - ax) * (y - ay) - (by - ay) * (x - ax)
    within = (x >= x_lo) & (x <= x_hi) & (y >= y_lo) & (y <= y_hi)
    on_edge = np.any((np.abs(cross) / scale <= 1e-9) & within, axis=0)
    out[near] = inside | on_edge
    return out


def points_in_polygon(points_xy: np.ndarray, polygon_xy: np.ndarray) -> np.ndarray:
    """Vectorised even-odd test of ``(N, 2)`` points against a closed ``(K, 2)`` polygon.

    Points on an edge or a vertex count as inside. Returns ``(N,) bool``.
    """
    return _inside(points_xy, _edges(polygon_xy))


class PolygonZone:
    """A named polygon in frame pixels.

    Args:
        polygon_xy: ``(K, 2)`` vertices, K >= 3, in pixels or fractions (0..1) of the frame.
        name: zone name, used in error messages and events.
        resolution_wh: frame ``(width, height)`` in pixels; needed for fractions, and when given
            every vertex must lie inside the frame ``[0, width] x [0, height]``.
        units: ``"pixels"``, ``"fraction"`` or ``"auto"`` (fractions when every value is in 0..1).

    Raises:
        InvalidInputError: any `polygon_problem`, a vertex outside the frame, fractions outside
            0..1 or without a resolution; the message names the zone.
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
        given = np.asarray(polygon_xy, dtype=np.float64)  # once: the checks below take the array as it is
        problem = polygon_problem(given)
        if problem:
            raise InvalidInputError(f"{what}: {problem}")
        pts = _open_ring(to_pixels(given, resolution_wh, units, what))
        if resolution_wh is not None:
            problem = frame_problem(pts, resolution_wh, "polygon")
            if problem:
                raise InvalidInputError(f"{what}: {problem}")
        x, y = pts[:, 0], pts[:, 1]
        area = 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
        self.name = name
        self.polygon_xy: np.ndarray = pts.astype(np.float32)
        self._edges = _edges(self.polygon_xy)  # computed once: `contains` runs on every frame
        self._edge_rows = _edge_rows(self._edges)
        self.area_px: float = abs(area)
        self.resolution_wh = resolution_wh

    def contains(self, points_xy: np.ndarray) -> np.ndarray:
        """``(N,) bool``: which of the ``(N, 2)`` pixel points lie inside (boundary included)."""
        return _inside(points_xy, self._edges, self._edge_rows)

    def trigger(self, detections: Detections, anchor: str = "bottom_center") -> np.ndarray:
        """``(N,) bool``: which detections have their ``anchor`` point inside the zone."""
        if len(detections) == 0:
            return np.zeros(0, dtype=bool)
        return self.contains(detections.anchor(anchor))

    def __repr__(self) -> str:
        return f"PolygonZone(name={self.name!r}, points={len(self.polygon_xy)})"
