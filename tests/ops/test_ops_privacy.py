"""Privacy masks and redaction on frames (`campusguard.ops.privacy`)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from campusguard.ops.privacy import (
    FrameMask,
    person_class_ids,
    redact_boxes,
    redaction_boxes,
    shape_inside_polygon,
    shapes_inside_polygons,
)


def _noise(h: int = 120, w: int = 160, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    ("polygon", "units", "covered", "kept"),
    [
        (
            [[0, 0], [160, 0], [160, 40], [0, 40]],
            "pixels",
            (slice(0, 40), slice(0, 160)),
            (slice(42, 120), slice(0, 160)),
        ),
        (
            [[0, 0], [1, 0], [1, 0.25], [0, 0.25]],
            "fraction",
            (slice(0, 30), slice(0, 160)),
            (slice(32, 120), slice(0, 160)),
        ),
        (
            [[80, 60], [160, 60], [160, 120], [80, 120]],
            "pixels",
            (slice(60, 120), slice(80, 160)),
            (slice(0, 58), slice(0, 160)),
        ),
    ],
)
def test_a_mask_fills_its_polygon_with_one_colour_and_leaves_the_rest(
    polygon: list[list[float]], units: str, covered: tuple[slice, slice], kept: tuple[slice, slice]
) -> None:
    image = _noise()
    before = image.copy()
    mask = FrameMask([(polygon, units)], fill_bgr=(10, 20, 30))  # type: ignore[list-item]
    out = mask.apply(image)
    assert out is image  # in place: no copy of the frame
    assert np.all(out[covered] == (10, 20, 30))
    np.testing.assert_array_equal(out[kept], before[kept])
    assert mask.coverage((160, 120))[covered].all()
    assert not mask.coverage((160, 120))[kept].any()


def test_a_mask_follows_the_frame_size_and_copies_a_read_only_frame() -> None:
    mask = FrameMask([([[0, 0], [1, 0], [1, 0.5], [0, 0.5]], "fraction")])
    small = mask.apply(_noise(40, 60))
    assert np.all(small[:20] == 0) and small[21:].any()
    frozen = _noise(100, 80)
    frozen.flags.writeable = False
    out = mask.apply(frozen)
    assert out is not frozen and np.all(out[:50] == 0)
    assert frozen[:50].any()


def test_an_empty_mask_changes_nothing() -> None:
    image = _noise()
    before = image.copy()
    assert not FrameMask([])
    np.testing.assert_array_equal(FrameMask([]).apply(image), before)


def test_person_ids_and_redaction_boxes() -> None:
    assert person_class_ids({0: "person", 1: "car", 2: "bicycle"}).tolist() == [0]
    boxes = np.array([[10, 20, 50, 120]], np.float32)
    np.testing.assert_allclose(redaction_boxes(boxes, "persons"), boxes)
    np.testing.assert_allclose(redaction_boxes(boxes, "faces"), [[10, 20, 50, 50]])
    with pytest.raises(ValueError, match="persons"):
        redaction_boxes(boxes, "everything")  # type: ignore[arg-type]


def _sharpness(image: np.ndarray) -> float:
    return float(cv2.Laplacian(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY), cv2.CV_64F).var())


def test_redacting_a_box_removes_its_detail_and_nothing_outside() -> None:
    image = _noise(200, 200)
    before = image.copy()
    redact_boxes(image, np.array([[40, 40, 120, 160]]), margin=0.0)
    inside, outside = image[40:160, 40:120], image[:, 130:]
    assert _sharpness(inside) < _sharpness(before[40:160, 40:120]) / 100
    assert float(inside.astype(np.float64).var()) < float(before[40:160, 40:120].astype(np.float64).var()) / 20
    np.testing.assert_array_equal(outside, before[:, 130:])


def test_redacting_boxes_at_the_edge_or_empty_is_safe() -> None:
    image = _noise(50, 50)
    redact_boxes(image, np.array([[-10, -10, 20, 20], [49.5, 49.5, 60, 60], [5, 5, 5, 5]]))
    redact_boxes(image, np.zeros((0, 4)))


@pytest.mark.parametrize(
    ("shape", "closed", "inside"),
    [
        ([[10, 10], [20, 10], [20, 20]], True, True),
        ([[0, 0], [100, 0], [100, 50]], True, True),  # on the boundary counts as inside
        ([[10, 10], [120, 10], [20, 20]], True, False),  # a vertex outside
        ([[10, 10], [90, 10]], False, True),
        ([[10, 80], [90, 80]], False, False),
        ([[10, 40], [90, 40]], False, False),  # ends inside, middle through the notch
    ],
)
def test_shape_inside_a_concave_polygon(shape: list[list[float]], closed: bool, inside: bool) -> None:
    # a U: the notch x 40..60, y 30..50 is outside
    u = np.array([[0, 0], [100, 0], [100, 50], [60, 50], [60, 30], [40, 30], [40, 50], [0, 50]], float)
    assert shape_inside_polygon(np.array(shape, float), u, closed=closed) is inside


def test_pixel_masks_keep_covering_the_same_scene_part_at_another_resolution() -> None:
    """A camera that comes back at half its resolution: a mask in pixels of the first frame is scaled."""
    corner = [[120, 90], [160, 90], [160, 120], [120, 120]]  # bottom-right quarter-ish of 160x120
    scaled = FrameMask([(corner, "pixels")], reference_wh=(160, 120)).apply(_noise(60, 80))
    assert np.all(scaled[46:, 61:] == 0) and scaled[:44].any()
    unscaled = FrameMask([(corner, "pixels")]).apply(_noise(60, 80))  # without a reference: off the frame
    assert unscaled[46:, 61:].any()


def test_each_shape_gets_the_first_polygon_it_lies_inside_among_many() -> None:
    """One query for every shape against every polygon (an STRtree): the first holding polygon by
    index, boundary included; a shape across two polygons, or outside all, gets None."""
    squares = [
        np.array([[x, y], [x + 10, y], [x + 10, y + 10], [x, y + 10]], float)
        for y in range(0, 100, 10)
        for x in range(0, 100, 10)
    ]
    big = np.array([[0, 0], [100, 0], [100, 100], [0, 100]], float)  # holds everything: index 100
    polygons = [*squares, big]
    shapes = [
        (np.array([[52, 31], [58, 31], [55, 38]], float), True),  # inside square (5, 3): index 35
        (np.array([[50, 30], [60, 30], [60, 40], [50, 40]], float), True),  # equal to it: on its boundary
        (np.array([[15, 15], [25, 15], [20, 18]], float), True),  # across two squares: only the big one
        (np.array([[71, 95], [79, 95]], float), False),  # a line inside square (7, 9): index 97
        (np.array([[-5, 5], [5, 5], [0, 8]], float), True),  # partly outside everything
    ]
    assert shapes_inside_polygons(shapes, polygons) == [35, 35, 100, 97, None]
    assert shapes_inside_polygons(shapes, squares) == [35, 35, None, 97, None]
    assert shapes_inside_polygons([], polygons) == [] and shapes_inside_polygons(shapes, []) == [None] * 5
