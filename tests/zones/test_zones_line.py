"""LineZone: crossings per track, direction, segment extent, hysteresis, validation."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.errors import InvalidInputError
from campusguard.zones import LineZone, line_problem, side_of_line


def _feet(make_detections, points, tracker_ids):
    """Detections whose bottom-centres are ``points``."""
    return make_detections([[x - 10, y - 40, x + 10, y] for x, y in points], tracker_id=tracker_ids)


def test_side_of_line_sign_convention():
    # a line drawn left to right: "right" (positive) is below it on screen (y grows downwards)
    d = side_of_line(np.array([[5, 10], [5, -10]]), np.array([0, 0]), np.array([10, 0]))
    np.testing.assert_allclose(d, [10, -10])


@pytest.mark.parametrize(
    ("ys", "in_side", "hysteresis", "expected_in", "expected_out"),
    [
        ([40, 45, 55, 60], "right", 0, 1, 0),  # moving down into "right"
        ([60, 55, 45, 40], "right", 0, 0, 1),
        ([60, 55, 45, 40], "left", 0, 1, 0),
        ([40, 60, 40, 60], "right", 0, 2, 1),
        ([40, 51, 49, 51, 49, 40], "right", 0, 2, 2),  # jitter on the line counts without hysteresis
        ([40, 51, 49, 51, 49, 40], "right", 3, 0, 0),  # ... and not with a 3 px band
        ([40, 49, 51, 49, 51, 60], "right", 3, 1, 0),
        ([40, 50, 50, 60], "right", 0, 1, 0),  # standing on the line keeps the old side
        ([40, 40, 40], "right", 0, 0, 0),
    ],
)
def test_crossings_table(make_detections, ys, in_side, hysteresis, expected_in, expected_out):
    line = LineZone((0, 50), (100, 50), "door", in_side=in_side, hysteresis_px=hysteresis)
    n_in = n_out = 0
    for y in ys:
        c = line.update(_feet(make_detections, [(50, y)], [1]))
        n_in += int(c.crossed_in.sum())
        n_out += int(c.crossed_out.sum())
    assert (n_in, n_out) == (expected_in, expected_out)
    assert (line.in_count, line.out_count) == (expected_in, expected_out)


def test_passing_beyond_the_segment_end_is_not_a_crossing(make_detections):
    line = LineZone((0, 50), (100, 50), "door")
    for y in (40, 60):
        c = line.update(_feet(make_detections, [(150, y)], [1]))
    assert not c.crossed_in.any() and line.in_count == 0


def test_tracks_are_independent_and_masks_aligned(make_detections):
    line = LineZone((0, 50), (100, 50), "door")
    line.update(_feet(make_detections, [(20, 40), (80, 60), (50, 40)], [1, 2, 3]))
    c = line.update(_feet(make_detections, [(50, 40), (20, 60), (80, 40)], [3, 1, 2]))
    np.testing.assert_array_equal(c.crossed_in, [False, True, False])
    np.testing.assert_array_equal(c.crossed_out, [False, False, True])
    assert (c.in_count, c.out_count) == (1, 1)


def test_untracked_rows_are_ignored_and_untracked_input_rejected(make_detections):
    line = LineZone((0, 50), (100, 50), "door")
    for y in (40, 60):
        c = line.update(_feet(make_detections, [(50, y)], [-1]))
    assert line.in_count == 0 and not c.crossed_in.any()
    with pytest.raises(InvalidInputError, match="'door'"):
        line.update(make_detections([[0, 0, 10, 10]]))


def test_stale_tracks_are_forgotten(make_detections):
    line = LineZone((0, 50), (100, 50), "door", forget_after_updates=5)
    line.update(_feet(make_detections, [(50, 40)], [7]))
    for _ in range(6):
        line.update(make_detections([], tracker_id=[]))
    c = line.update(_feet(make_detections, [(50, 60)], [7]))
    assert line.in_count == 0 and not c.crossed_in.any()


def test_fractions_and_reset(make_detections):
    line = LineZone((0, 0.5), (1, 0.5), "mid", resolution_wh=(200, 100))
    np.testing.assert_allclose([line.start_xy, line.end_xy], [[0, 50], [200, 50]])
    for y in (40, 60):
        line.update(_feet(make_detections, [(100, y)], [1]))
    assert line.in_count == 1
    line.reset()
    assert (line.in_count, line.out_count) == (0, 0)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (((10, 10), (10, 10)), {}, "same point"),
        (((0, 50), (300, 50)), {"resolution_wh": (200, 100)}, "outside the 200x100 frame"),
        (((0, 50), (100, 50)), {"in_side": "up"}, "in_side"),
        (((0, 50), (100, 50)), {"hysteresis_px": -1}, "hysteresis_px"),
    ],
)
def test_invalid_lines(args, kwargs, message):
    with pytest.raises(InvalidInputError, match=message) as info:
        LineZone(*args, "door", **kwargs)
    assert "'door'" in str(info.value)


@pytest.mark.parametrize(("stitch_radius", "expected_in"), [(0.5, 1), (0.0, 0)])
def test_id_switch_at_the_line_still_counts_once(make_detections, stitch_radius, expected_in):
    line = LineZone((0, 50), (100, 50), "door", stitch_radius=stitch_radius)
    line.update(_feet(make_detections, [(50, 40), (90, 60)], [1, 2]))
    line.update(make_detections([], tracker_id=[]))  # missed frame, then the tracker gives a new id
    c = line.update(_feet(make_detections, [(50, 60), (90, 60)], [7, 2]))
    assert line.in_count == expected_in and c.crossed_in.tolist() == [bool(expected_in), False]


@pytest.mark.parametrize(
    ("points", "problem"),
    [
        ([(0, 0), (10, 0)], None),
        ([(0.2, 0.5), (0.8, 0.5)], None),
        ([(3, 4), (3, 4)], "same point"),
        ([(3, 4)], "2 end points, got 1"),
        ([(0, float("nan")), (1, 1)], "finite"),
    ],
)
def test_line_problem(points, problem):
    found = line_problem(points)
    assert (found is None) if problem is None else (problem in (found or ""))
