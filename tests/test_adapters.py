"""`to_records`: JSON-ready rows, with boolean per-detection flags such as ``fallen``."""

from __future__ import annotations

import numpy as np

from campusguard.adapters import to_records
from campusguard.detections import Detections


def test_records_carry_boolean_flags_and_skip_other_data():
    dets = Detections(
        np.array([[0, 0, 10, 20], [5, 5, 40, 15]], np.float32),
        [0.9, 0.5],
        [0, 0],
        data={"fallen": np.array([False, True]), "embedding": np.zeros((2, 4), np.float32)},
    )
    recs = to_records(dets, {0: "person"})
    assert [r["fallen"] for r in recs] == [False, True]
    assert all("embedding" not in r for r in recs)
    assert recs[1] == {
        "xyxy": [5.0, 5.0, 40.0, 15.0],
        "confidence": 0.5,
        "class_id": 0,
        "class_name": "person",
        "fallen": True,
    }


def test_records_without_data_are_unchanged():
    (rec,) = to_records(Detections(np.array([[1, 2, 3, 4]], np.float32), [0.25], [2]), {2: "car"})
    assert rec == {"xyxy": [1.0, 2.0, 3.0, 4.0], "confidence": 0.25, "class_id": 2, "class_name": "car"}
