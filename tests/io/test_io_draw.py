"""`campusguard.io.draw`: the annotator family, one colour and one label per box."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.detections import Detections
from campusguard.io.draw import BoxAnnotator, LabelAnnotator, box_label, color_for, color_of, draw_detections


def make_detections(tracker_id: list[int] | None = None) -> Detections:
    return Detections(
        np.array([[10, 20, 60, 90], [30, 30, 50, 50]], np.float32),
        np.array([0.87, 0.5], np.float32),
        np.array([0, 2], np.int64),
        None if tracker_id is None else np.array(tracker_id, np.int64),
    )


@pytest.mark.parametrize(
    ("tracker_id", "labels", "keys"),
    [
        (None, ["person 0.87", "car 0.50"], [0, 2]),
        ([7, 8], ["#7 person 0.87", "#8 car 0.50"], [7, 8]),
        ([-1, 4], ["person 0.87", "#4 car 0.50"], [0, 4]),  # a negative id is untracked
    ],
)
def test_labels_and_colours(tracker_id, labels, keys):
    det = make_detections(tracker_id)
    names = {0: "person", 2: "car"}
    assert [box_label(det, i, names) for i in range(len(det))] == labels
    assert [color_of(det, i) for i in range(len(det))] == [color_for(k) for k in keys]


def test_a_class_without_a_name_is_labelled_by_its_id():
    assert box_label(make_detections(), 1) == "2 0.50"


def test_annotators_draw_in_place_and_compose():
    det = make_detections([3, 4])
    scene = np.zeros((120, 120, 3), np.uint8)
    assert BoxAnnotator(2).annotate(scene, det) is scene
    assert tuple(scene[20, 30]) == color_for(3)  # top edge of the first box
    plain = LabelAnnotator({0: "person"}, 0.4, filled=False).annotate(np.zeros_like(scene), det)
    assert plain.any()
    drawn = draw_detections(np.zeros_like(scene), det, {0: "person"})
    assert drawn.any() and drawn.shape == scene.shape


def test_draw_detections_copies_unless_told():
    frame = np.zeros((50, 50, 3), np.uint8)
    draw_detections(frame, make_detections())
    assert not frame.any()
    assert draw_detections(frame, make_detections(), copy=False) is frame
    assert frame.any()
