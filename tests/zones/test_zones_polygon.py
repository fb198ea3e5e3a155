"""PolygonZone: validation naming the zone, fractions, vectorised containment, bottom-centre trigger."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone, points_in_polygon, polygon_problem, to_pixels, units_problem

SQUARE = [[10, 10], [110, 10], [110, 110], [10, 110]]
# a "U": concave, the notch x in (40, 80), y < 80 is outside
U_SHAPE = [[0, 0], [40, 0], [40, 80], [80, 80], [80, 0], [120, 0], [120, 120], [0, 120]]


@pytest.mark.parametrize(
    ("polygon", "kwargs", "message"),
    [
        ([[0, 0], [10, 0]], {}, "at least 3"),
        ([[0, 0], [10, 10], [20, 20]], {}, "zero area"),
        ([[5, 5], [5, 5], [5, 5], [5, 5]], {}, "zero area"),
        ([[0, 0], [100, 100], [100, 0], [0, 100]], {}, "self-intersecting"),  # bow tie
        ([[0, 0], [50, 0], [50, 50], [0, 50], [25, -10]], {}, "self-intersecting"),
        (SQUARE, {"resolution_wh": (100, 100)}, "outside the 100x100 frame"),
        ([[0, 0], [0.5, 0], [0.5, 0.5]], {}, "no resolution"),
        ([[0, 0], [2, 0], [2, 2]], {"units": "fraction", "resolution_wh": (10, 10)}, "0..1"),
        ([[0, 0], [np.nan, 0], [2, 2]], {}, "finite"),
    ],
)
def test_invalid_polygons_raise_naming_the_zone(polygon, kwargs, message):
    with pytest.raises(InvalidInputError, match=message) as info:
        PolygonZone(polygon, "gate", **kwargs)
    assert "'gate'" in str(info.value)


def test_fractions_are_converted_with_resolution():
    zone = PolygonZone([[0, 0], [0.5, 0], [0.5, 1], [0, 1]], "left half", resolution_wh=(640, 360))
    np.testing.assert_allclose(zone.polygon_xy, [[0, 0], [320, 0], [320, 360], [0, 360]])
    assert zone.area_px == pytest.approx(320 * 360)


def test_pixel_units_are_kept_even_when_small():
    zone = PolygonZone([[0, 0], [1, 0], [1, 1], [0, 1]], "tiny", units="pixels")
    np.testing.assert_allclose(zone.polygon_xy, [[0, 0], [1, 0], [1, 1], [0, 1]])


def test_closed_ring_is_accepted():
    zone = PolygonZone([*SQUARE, SQUARE[0]], "ring")
    assert len(zone.polygon_xy) == 4


@pytest.mark.parametrize(
    ("polygon", "points", "expected"),
    [
        (SQUARE, [[50, 50], [10, 50], [110, 110], [5, 50], [50, 111], [200, 200]], [1, 1, 1, 0, 0, 0]),
        (U_SHAPE, [[20, 40], [60, 40], [100, 40], [60, 100], [60, 80], [40, 40], [130, 10]], [1, 0, 1, 1, 1, 1, 0]),
        ([[0, 0], [100, 0], [50, 100]], [[50, 50], [50, 99], [10, 90], [50, 0]], [1, 1, 0, 1]),
    ],
)
def test_contains_table(polygon, points, expected):
    zone = PolygonZone(polygon, "z")
    np.testing.assert_array_equal(zone.contains(np.array(points, dtype=np.float32)), np.array(expected, dtype=bool))


def test_contains_agrees_with_opencv_off_the_boundary():
    rng = np.random.default_rng(0)
    polygon = np.array(U_SHAPE, dtype=np.float32)
    points = rng.uniform(-10, 130, size=(2000, 2)).astype(np.float32)
    dist = np.array([cv2.pointPolygonTest(polygon.reshape(-1, 1, 2), (float(x), float(y)), True) for x, y in points])
    off_boundary = np.abs(dist) > 1e-3
    ours = points_in_polygon(points, polygon)
    np.testing.assert_array_equal(ours[off_boundary], dist[off_boundary] > 0)
    assert 0.2 < ours.mean() < 0.8  # the sample really exercises both answers


@pytest.mark.parametrize("polygon", [SQUARE, U_SHAPE, [[0.5, 0.25], [3.5, 0.5], [2, 3]], [[600, 300], [640, 360], [590, 355]]])
def test_many_points_get_the_answers_each_point_gets_alone(polygon) -> None:
    """A segment's rows at once (the array test, which tests only the points in the polygon's box)
    and one point at a time (the scalar test of a frame's few rows) agree, on edges and vertices too."""
    zone = PolygonZone(polygon, "z")
    rng = np.random.default_rng(1)
    lo, hi = zone.polygon_xy.min(axis=0), zone.polygon_xy.max(axis=0)
    span = np.maximum(hi - lo, 1.0)
    inside_box = rng.uniform(lo - span / 4, hi + span / 4, size=(3000, 2))
    ring = zone.polygon_xy.astype(np.float64)
    edges = ring + (np.roll(ring, -1, axis=0) - ring) * rng.uniform(0, 1, size=(len(ring), 1))
    far = np.array([[-1e6, lo[1]], [1e6, hi[1]], [lo[0], -5.0], [hi[0], 1e9], [np.nan, 1.0]])
    points = np.concatenate([inside_box, ring, edges, hi[None] + 1e-7, lo[None] - 1e-7, far]).astype(np.float32)
    at_once = zone.contains(points)
    alone = np.array([bool(zone.contains(p[None])[0]) for p in points])
    np.testing.assert_array_equal(at_once, alone)
    assert at_once[3000 : 3000 + len(ring)].all() and not at_once[-5:].any()  # vertices in, far points out
    assert 0.1 < at_once[:3000].mean() < 0.9


def test_contains_empty():
    assert PolygonZone(SQUARE, "z").contains(np.zeros((0, 2))).shape == (0,)


def test_trigger_uses_bottom_centre_by_default(make_detections):
    zone = PolygonZone([[0, 100], [200, 100], [200, 200], [0, 200]], "lower band")
    # box 1: centre (50, 80) outside, bottom-centre (50, 120) inside; box 2: the reverse
    dets = make_detections([[30, 40, 70, 120], [130, 100, 170, 220]])
    np.testing.assert_array_equal(zone.trigger(dets), [True, False])
    np.testing.assert_array_equal(zone.trigger(dets, anchor="center"), [False, True])
    assert zone.trigger(make_detections([])).shape == (0,)


@pytest.mark.parametrize(
    ("points", "problem"),
    [
        ([(0, 0), (10, 0), (10, 10)], None),
        ([(0, 0), (10, 0), (10, 10), (0, 10)], None),
        ([(0, 0), (10, 0), (10, 10), (0, 10), (0, 0)], None),  # a closed ring
        ([(0, 0), (0.5, 0), (0.5, 0.5)], None),  # fractions: the same checks
        ([(0, 0), (10, 10), (10, 0), (0, 10)], "self-intersecting: edges 0 and 2"),
        ([(0, 0), (5, 5), (10, 10)], "degenerate"),
        ([(0, 0), (10, 0), (0, 0), (0, 10)], "repeats a point"),
        ([(0, 0), (1, 1)], "at least 3 points, got 2"),
        ([], "at least 3 points, got 0"),
        ([(0, 0), (float("inf"), 0), (1, 1)], "finite"),
    ],
)
def test_polygon_problem(points, problem):
    found = polygon_problem(points)
    assert (found is None) if problem is None else (problem in (found or ""))


@pytest.mark.parametrize(
    ("points", "units", "problem"),
    [
        ([(0, 0), (2, 3)], "pixels", None),
        ([(0, 0), (1, 1)], "fraction", None),
        ([(0, 0), (1.5, 1)], "fraction", "must be in 0..1"),
        ([(0, 0), (1, 1)], "px", "units must be"),
        ([(0, 0, 0)], "pixels", "[x, y] pairs"),
    ],
)
def test_units_problem(points, units, problem):
    found = units_problem(points, units)
    assert (found is None) if problem is None else (problem in (found or ""))


def test_to_pixels_is_the_one_fraction_conversion():
    np.testing.assert_allclose(to_pixels(np.array([[0.5, 0.25]]), (640, 360), "fraction", "z"), [[320, 90]])
    np.testing.assert_allclose(to_pixels(np.array([[0.5, 0.25]]), None, "pixels", "z"), [[0.5, 0.25]])


def _touching_edges_by_pairs(poly: np.ndarray) -> tuple[int, int] | None:
    """The reference: every pair of non-adjacent edges in order, with exact rational arithmetic."""
    from fractions import Fraction

    pts = [(Fraction(float(x)), Fraction(float(y))) for x, y in poly]
    k = len(pts)

    def orient(a, b, c):  # type: ignore[no-untyped-def]
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    def on(a, b, c):  # type: ignore[no-untyped-def]
        return min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1])

    for i in range(k):
        for j in range(i + 2, k):
            if i == 0 and j == k - 1:
                continue
            p1, p2, q1, q2 = pts[i], pts[(i + 1) % k], pts[j], pts[(j + 1) % k]
            d1, d2, d3, d4 = orient(q1, q2, p1), orient(q1, q2, p2), orient(p1, p2, q1), orient(p1, p2, q2)
            if (d1 * d2 < 0 and d3 * d4 < 0) or any(
                d == 0 and on(a, b, c)
                for d, a, b, c in ((d1, q1, q2, p1), (d2, q1, q2, p2), (d3, p1, p2, q1), (d4, p1, p2, q2))
            ):
                return i, j
    return None


def test_the_vectorised_crossing_test_finds_the_pair_a_pair_loop_finds() -> None:
    """Polygons on a small integer grid (many shared points, touching and collinear edges): the
    vectorised test names the same first pair of edges as testing every pair in order."""
    from campusguard.zones.polygon import _self_intersection

    rng = np.random.default_rng(0)
    found = 0
    for _ in range(400):
        poly = rng.integers(0, 6, size=(int(rng.integers(3, 10)), 2)).astype(np.float64)
        expected = _touching_edges_by_pairs(poly)
        assert _self_intersection(poly) == expected, poly.tolist()
        found += expected is not None
    assert 100 < found < 400  # both answers were tried


def test_big_polygons_are_checked_by_blocks_with_the_same_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 256-point star and the same with one vertex pulled across: blocks of a few rows at a time
    (as a polygon of thousands of points is checked) give the answer of one block."""
    from campusguard.zones import polygon as module

    angles = np.arange(256) * 2 * np.pi / 256
    radii = 100 * (0.8 + 0.2 * np.random.default_rng(1).random(256))
    star = np.stack([500 + radii * np.cos(angles), 500 + radii * np.sin(angles)], 1)
    crossed = star.copy()
    crossed[10] = [500 + 150 * np.cos(angles[140]), 500 + 150 * np.sin(angles[140])]
    whole = [module._self_intersection(p) for p in (star, crossed)]
    assert whole[0] is None and whole[1] is not None and polygon_problem(crossed) is not None
    monkeypatch.setattr(module, "_PAIR_BLOCK", 256 * 3)  # 3 rows per block
    assert [module._self_intersection(p) for p in (star, crossed)] == whole
