import numpy as np
import pytest

from campusguard.detections import Detections
from factories import build_detections as make_detections


def test_shapes_and_dtypes_are_normalised():
    d = make_detections([[0, 0, 10, 10], [5, 5, 20, 20]], [0.5, 0.7], [1, 2])
    assert d.xyxy.dtype == np.float32 and d.xyxy.shape == (2, 4)
    assert d.confidence.dtype == np.float32
    assert d.class_id.dtype == np.int64
    assert len(d) == 2


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"xyxy": np.zeros((2, 3)), "confidence": np.zeros(2), "class_id": np.zeros(2)}, "shape"),
        ({"xyxy": np.zeros((2, 4)), "confidence": np.zeros(3), "class_id": np.zeros(2)}, "disagree"),
        (
            {"xyxy": np.zeros((2, 4)), "confidence": np.zeros(2), "class_id": np.zeros(2), "tracker_id": np.zeros(1)},
            "tracker_id",
        ),
        (
            {"xyxy": np.zeros((2, 4)), "confidence": np.zeros(2), "class_id": np.zeros(2), "data": {"x": np.zeros(3)}},
            "data",
        ),
    ],
)
def test_bad_shapes_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Detections(**kwargs)


def test_empty_and_slicing_slices_every_field():
    assert len(Detections.empty()) == 0
    d = make_detections([[0, 0, 1, 1], [1, 1, 2, 2], [2, 2, 3, 3]], [0.1, 0.2, 0.3], [0, 1, 2], [7, 8, 9]).with_data(
        label=np.array(["a", "b", "c"])
    )
    sub = d[d.confidence > 0.15]
    np.testing.assert_array_equal(sub.class_id, [1, 2])
    np.testing.assert_array_equal(sub.tracker_id, [8, 9])
    np.testing.assert_array_equal(sub.data["label"], ["b", "c"])
    assert len(d[0]) == 1 and d[0].class_id[0] == 0
    assert len(d[1:]) == 2
    assert len(d[np.zeros(3, bool)]) == 0


def test_frozen_and_operations_return_new_objects():
    d = make_detections([[0, 0, 10, 10]])
    with pytest.raises(AttributeError):
        d.xyxy = np.zeros((1, 4))  # type: ignore[misc]
    t = d.with_tracker_id(np.array([5]))
    assert d.tracker_id is None and t.tracker_id[0] == 5


def test_anchor_and_area():
    d = make_detections([[0, 0, 10, 20]])
    np.testing.assert_allclose(d.anchor(), [[5, 20]])
    np.testing.assert_allclose(d.anchor("center"), [[5, 10]])
    np.testing.assert_allclose(d.area, [200])


def test_merge_keeps_tracker_ids_only_if_all_have_them():
    a = make_detections([[0, 0, 1, 1]], tracker_id=[1])
    b = make_detections([[1, 1, 2, 2]], tracker_id=[2])
    c = make_detections([[1, 1, 2, 2]])
    np.testing.assert_array_equal(Detections.merge([a, b]).tracker_id, [1, 2])
    assert Detections.merge([a, c]).tracker_id is None
    assert len(Detections.merge([])) == 0
