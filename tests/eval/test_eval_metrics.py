"""COCO mAP through faster-coco-eval, checked against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.eval import evaluate_detections
from campusguard.eval.metrics import match_at_iou
from campusguard.ops.boxes import box_iou

NAMES = {0: "person", 1: "car"}


def make_detections(xyxy, class_id, confidence=None) -> Detections:
    xyxy = np.asarray(xyxy, np.float32).reshape(-1, 4)
    conf = np.ones(len(xyxy), np.float32) if confidence is None else np.asarray(confidence, np.float32)
    return Detections(xyxy=xyxy, confidence=conf, class_id=np.asarray(class_id, np.int64))


def test_perfect_predictions_score_one() -> None:
    truths = [make_detections([[10, 10, 50, 80], [100, 100, 200, 150]], [0, 1]), make_detections([[5, 5, 30, 30]], [0])]
    preds = [make_detections(t.xyxy, t.class_id, np.full(len(t), 0.9)) for t in truths]
    m = evaluate_detections(preds, truths, NAMES)
    assert m.map50_95 == pytest.approx(1.0)
    assert m.map50 == pytest.approx(1.0)
    assert m.precision == pytest.approx(1.0) and m.recall == pytest.approx(1.0)
    assert {k: v.ap50_95 for k, v in m.per_class.items()} == pytest.approx({0: 1.0, 1: 1.0})
    assert m.per_class[0].num_instances == 2 and m.num_instances == 3 and m.num_images == 2


def test_shifted_box_matches_only_iou_thresholds_below_its_iou() -> None:
    # GT 100x100; a shift of d along x gives IoU (100-d)/(100+d) = 0.82 for d = 18/1.82:
    # a match at IoU thresholds 0.50..0.80 (7 of 10), none at 0.85..0.95 => mAP50-95 = 0.7
    d = 100 * 0.18 / 1.82
    truth = make_detections([[0, 0, 100, 100]], [0])
    pred = make_detections([[d, 0, 100 + d, 100]], [0], [0.9])
    iou = float(box_iou(pred.xyxy, truth.xyxy)[0, 0])
    assert 0.80 < iou < 0.85
    m = evaluate_detections([pred], [truth], NAMES)
    assert m.map50_95 == pytest.approx(0.7)
    assert m.map50 == pytest.approx(1.0)


def test_false_positive_ranked_first_halves_precision() -> None:
    # car: FP at 0.9 then TP at 0.8 -> precision 0.5 at every recall -> AP 0.5; person perfect
    truths = [make_detections([[0, 0, 10, 10], [50, 50, 90, 90]], [0, 1])]
    preds = [make_detections([[0, 0, 10, 10], [0, 50, 20, 70], [50, 50, 90, 90]], [0, 1, 1], [0.95, 0.9, 0.8])]
    m = evaluate_detections(preds, truths, NAMES)
    assert m.per_class[1].ap50_95 == pytest.approx(0.5)
    assert m.per_class[0].ap50_95 == pytest.approx(1.0)
    assert m.map50_95 == pytest.approx(0.75)


def test_missed_object_caps_recall() -> None:
    # 1 of 2 objects found: precision 1 at the 51 recall points 0.00..0.50, 0 beyond => AP 51/101
    truths = [make_detections([[0, 0, 10, 10], [20, 20, 40, 40]], [0, 0])]
    preds = [make_detections([[0, 0, 10, 10]], [0], [0.7])]
    m = evaluate_detections(preds, truths, NAMES)
    assert m.map50_95 == pytest.approx(51 / 101)
    assert m.recall == pytest.approx(0.5) and m.precision == pytest.approx(1.0)
    assert 1 not in m.per_class  # no ground truth for car: not averaged


def test_no_predictions_scores_zero() -> None:
    truths = [make_detections([[0, 0, 10, 10]], [0])]
    m = evaluate_detections([Detections.empty()], truths, NAMES)
    assert m.map50_95 == 0.0 and m.map50 == 0.0


@pytest.mark.parametrize(
    ("preds", "truths", "message"),
    [
        ([Detections.empty()], [], "predictions for 1 images but ground truth for 0"),
        ([make_detections([[0, 0, 1, 1]], [5])], [make_detections([[0, 0, 1, 1]], [0])], r"class ids \[5\] not in"),
        ([Detections.empty()], [Detections.empty()], "no ground-truth boxes"),
    ],
)
def test_bad_inputs(preds, truths, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        evaluate_detections(preds, truths, NAMES)


def test_one_object_found_twice_keeps_recall_at_most_one() -> None:
    # det A (0.9) overlaps the object with IoU 0.64, det B (0.8) with IoU 0.9: at IoU 0.5 A is the
    # match and B a duplicate. (faster-coco-eval's extended_metrics counts both as true
    # positives, since each matched at some IoU threshold, and reports recall 2.)
    truth = make_detections([[0, 0, 100, 100]], [0])
    pred = make_detections([[0, 0, 100, 64], [0, 0, 100, 90]], [0, 0], [0.9, 0.8])
    m = evaluate_detections([pred], [truth], NAMES)
    assert m.recall == pytest.approx(1.0) and m.precision == pytest.approx(1.0)  # best F1 at threshold 0.9
    assert m.per_class[0].recall <= 1.0


def test_precision_recall_at_best_macro_f1_by_hand() -> None:
    # person: 2 objects; detections 0.9 TP, 0.8 FP, 0.7 TP.
    # threshold 0.9: P 1, R .5, F1 .667; 0.8: P .5, R .5, F1 .5; 0.7: P 2/3, R 1, F1 .8 (best)
    truth = make_detections([[0, 0, 10, 10], [50, 50, 60, 60]], [0, 0])
    pred = make_detections([[0, 0, 10, 10], [20, 20, 30, 30], [50, 50, 60, 60]], [0, 0, 0], [0.9, 0.8, 0.7])
    m = evaluate_detections([pred], [truth], NAMES)
    assert m.precision == pytest.approx(2 / 3) and m.recall == pytest.approx(1.0)


def test_match_at_iou_is_greedy_by_confidence_within_class() -> None:
    truth = make_detections([[0, 0, 10, 10], [0, 0, 10, 10]], [0, 1])
    pred = make_detections([[0, 0, 10, 9], [0, 0, 10, 10], [0, 0, 10, 10]], [0, 0, 1], [0.5, 0.9, 0.3])
    np.testing.assert_array_equal(match_at_iou(pred, truth, 0.5), [False, True, True])
