import numpy as np
import pytest

from campusguard.ops.boxes import box_iou, clip_boxes, resize_boxes, scale_boxes, xywh_to_xyxy, xyxy_to_xywh


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([0, 0, 10, 10], [0, 0, 10, 10], 1.0),
        ([0, 0, 10, 10], [5, 0, 15, 10], 50 / 150),
        ([0, 0, 10, 10], [20, 20, 30, 30], 0.0),
        ([0, 0, 0, 0], [0, 0, 0, 0], 0.0),
    ],
)
def test_box_iou(a, b, expected):
    np.testing.assert_allclose(box_iou(np.array([a]), np.array([b])), [[expected]])


def test_box_iou_empty_shapes():
    assert box_iou(np.zeros((0, 4)), np.zeros((3, 4))).shape == (0, 3)


def test_xywh_roundtrip():
    xywh = np.array([[10, 20, 4, 6]], np.float32)
    np.testing.assert_allclose(xywh_to_xyxy(xywh), [[8, 17, 12, 23]])
    np.testing.assert_allclose(xyxy_to_xywh(xywh_to_xyxy(xywh)), xywh)


def test_scale_boxes_undoes_letterbox_and_clips():
    # a 100x50 (w x h) frame letterboxed into 64x64: ratio 0.64, padding top 16
    boxes = np.array([[0, 16, 64, 48], [-5, 10, 70, 60]], np.float32)
    out = scale_boxes(boxes, 0.64, (0, 16), (100, 50))
    np.testing.assert_allclose(out[0], [0, 0, 100, 50], atol=1e-4)
    assert out[1].min() >= 0 and out[1, 2] <= 100 and out[1, 3] <= 50


def test_clip_boxes():
    np.testing.assert_allclose(clip_boxes(np.array([[-1, -2, 11, 12]], np.float32), (10, 10)), [[0, 0, 10, 10]])


@pytest.mark.parametrize(
    ("from_wh", "to_wh", "expected"),
    [
        ((640, 360), (320, 180), [[5, 10, 50, 90]]),
        ((100, 100), (200, 50), [[20, 10, 200, 90]]),
    ],
)
def test_resize_boxes_maps_between_frame_sizes(from_wh, to_wh, expected):
    out = resize_boxes(np.array([[10, 20, 100, 180]], np.float32), from_wh, to_wh)
    np.testing.assert_allclose(out, expected)
    assert out.dtype == np.float32


def test_resize_boxes_keeps_the_array_when_nothing_changes():
    xyxy = np.array([[1, 2, 3, 4]], np.float32)
    assert resize_boxes(xyxy, (10, 10), (10, 10)) is xyxy
    empty = np.zeros((0, 4), np.float32)
    assert resize_boxes(empty, (10, 10), (20, 20)) is empty


def test_box_rescaling_is_written_once():
    """`resize_boxes` is the one frame-size rescale: the pipeline's copies use it (issue 23)."""
    from pathlib import Path

    import campusguard.app.engine.analytics as analytics
    import campusguard.app.engine.detection as detection

    for stage in (analytics, detection):
        assert "sx, sy" not in Path(stage.__file__).read_text()
