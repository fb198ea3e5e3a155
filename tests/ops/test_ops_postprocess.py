import numpy as np
import pytest

from campusguard.errors import ModelLoadError
from campusguard.ops.postprocess import decode_yolov8, nms, output_kind, postprocess
from campusguard.ops.preprocess import LetterboxMeta


def head(rows):
    """(1, 4+nc, N) head output from rows of [cx, cy, w, h, s0, s1, ...]."""
    return np.asarray(rows, np.float32).T[None]


def test_nms_suppresses_overlaps_per_class():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10], [50, 50, 60, 60]], np.float32)
    scores = np.array([0.9, 0.8, 0.7, 0.6], np.float32)
    classes = np.array([0, 0, 1, 0])
    np.testing.assert_array_equal(nms(boxes, scores, classes, 0.5), [0, 2, 3])
    np.testing.assert_array_equal(nms(boxes, scores, None, 0.5), [0, 3])


def test_nms_ties_are_broken_by_index():
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.5, 0.5], np.float32)
    assert nms(boxes, scores, None, 0.5).tolist() == [0]
    assert nms(boxes[::-1].copy(), scores, None, 0.5).tolist() == [0]


def test_nms_empty():
    assert nms(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), None, 0.5).shape == (0,)


@pytest.mark.torch
def test_nms_matches_torchvision_on_random_boxes():
    import torch
    import torchvision

    rng = np.random.default_rng(1)
    for _ in range(5):
        xy = rng.uniform(0, 500, (300, 2))
        wh = rng.uniform(5, 120, (300, 2))
        boxes = np.concatenate([xy, xy + wh], 1).astype(np.float32)
        scores = rng.uniform(0, 1, 300).astype(np.float32)
        ours = nms(boxes, scores, None, 0.45)
        theirs = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), 0.45).numpy()
        np.testing.assert_array_equal(ours, theirs)


def test_decode_confidence_filter_classes_and_max_det():
    out = head(
        [
            [50, 50, 20, 20, 0.9, 0.1],
            [52, 50, 20, 20, 0.8, 0.1],  # overlaps the first, same class: suppressed
            [150, 50, 20, 20, 0.1, 0.7],  # class 1
            [250, 50, 20, 20, 0.2, 0.1],  # below conf
        ]
    )
    ((xyxy, conf, cls),) = decode_yolov8(out, 0.25, 0.7)
    np.testing.assert_allclose(conf, [0.9, 0.7])
    np.testing.assert_array_equal(cls, [0, 1])
    np.testing.assert_allclose(xyxy[0], [40, 40, 60, 60])
    ((_, conf1, cls1),) = decode_yolov8(out, 0.25, 0.7, classes=[1])
    assert cls1.tolist() == [1]
    ((_, conf2, _),) = decode_yolov8(out, 0.25, 0.7, max_det=1)
    assert conf2.tolist() == pytest.approx([0.9])


def test_decode_agnostic_merges_across_classes():
    out = head([[50, 50, 20, 20, 0.9, 0.0], [50, 50, 20, 20, 0.0, 0.8]])
    assert len(decode_yolov8(out, 0.25, 0.7)[0][1]) == 2
    assert len(decode_yolov8(out, 0.25, 0.7, agnostic=True)[0][1]) == 1


def test_postprocess_scales_to_original_frame_and_handles_nms_output():
    meta = LetterboxMeta(ratio=0.5, pad_xy=(0, 140), orig_wh=(1280, 720), input_hw=(640, 640))
    raw = head([[320, 320, 100, 100, 0.9, 0.0]])
    (d,) = postprocess(raw, [meta], 0.25, 0.7)
    np.testing.assert_allclose(d.xyxy, [[540, 260, 740, 460]])
    nms_out = np.array([[[270, 270, 370, 370, 0.9, 1], [0, 0, 0, 0, 0.0, 0]]], np.float32)
    (d2,) = postprocess(nms_out, [meta], 0.25, 0.7)
    np.testing.assert_allclose(d2.xyxy, [[540, 260, 740, 460]])
    assert d2.class_id.tolist() == [1]


@pytest.mark.parametrize("shape, kind", [((1, 84, 8400), "raw"), ((1, 300, 6), "nms"), ((1, 6, 8400), "raw")])
def test_output_kind(shape, kind):
    assert output_kind(shape) == kind


@pytest.mark.parametrize("shape", [(1, 1000), (1, 3, 10)])
def test_output_kind_rejects_non_detectors(shape):
    with pytest.raises(ModelLoadError):
        output_kind(shape)


# end-to-end heads (YOLO26): final boxes, the same conf / classes / agnostic / max_det ---------------


def _e2e_rows() -> np.ndarray:
    """One image of ``x1, y1, x2, y2, score, class`` rows as a one-to-one head lists them (one anchor twice)."""
    rows = [
        [10, 10, 50, 50, 0.9, 0],
        [10, 10, 50, 50, 0.6, 2],  # the same anchor's box, second class
        [12, 11, 52, 49, 0.8, 0],  # an overlapping box of the same class: no NMS removes it
        [100, 100, 140, 160, 0.7, 2],
        [200, 200, 220, 220, 0.1, 1],
    ]
    return np.asarray([rows], dtype=np.float32)


def test_end_to_end_output_is_filtered_by_conf_and_sorted():
    from campusguard.ops.postprocess import decode_end_to_end

    out = _e2e_rows()[:, ::-1]  # scores in rising order: the decoder sorts
    xyxy, conf, cls = decode_end_to_end(out, conf_threshold=0.5)[0]
    np.testing.assert_allclose(conf, [0.9, 0.8, 0.7, 0.6])
    assert xyxy.dtype == np.float32 and cls.dtype == np.int64
    assert cls.tolist() == [0, 0, 2, 2]


def test_end_to_end_classes_max_det_and_agnostic():
    from campusguard.ops.postprocess import decode_end_to_end

    out = _e2e_rows()
    assert decode_end_to_end(out, 0.05, classes=[2])[0][2].tolist() == [2, 2]
    assert decode_end_to_end(out, 0.05, max_det=2)[0][1].tolist() == pytest.approx([0.9, 0.8])
    xyxy, conf, cls = decode_end_to_end(out, 0.05, agnostic=True)[0]
    assert conf.tolist() == pytest.approx([0.9, 0.8, 0.7, 0.1])  # the anchor's second class is gone
    assert decode_end_to_end(out, 0.05, agnostic=True, max_det=2)[0][1].tolist() == pytest.approx([0.9, 0.8])
    assert decode_end_to_end(np.zeros((1, 0, 6), np.float32), 0.1, agnostic=True)[0][0].shape == (0, 4)


def test_postprocess_routes_end_to_end_output_without_nms():
    meta = LetterboxMeta(ratio=1.0, pad_xy=(0.0, 0.0), orig_wh=(640, 640), input_hw=(640, 640))
    dets = postprocess(_e2e_rows(), [meta], conf_threshold=0.5, iou_threshold=0.1)[0]
    assert len(dets) == 4  # IoU 0.1 would merge the overlapping boxes if NMS ran


@pytest.mark.parametrize("class_aware", [True, False])
def test_nms_over_the_iou_matrix_keeps_what_box_by_box_suppression_keeps(
    class_aware: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Up to `NMS_MATRIX_MAX` candidates every pair's IoU is computed at once; the kept boxes and their order are
    those of the box-by-box pass, ties in score, empty boxes and every threshold included."""
    from campusguard.ops import postprocess

    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(1, 60))
        xy = rng.uniform(0, 300, (n, 2))
        wh = rng.uniform(1, 120, (n, 2))
        wh[: n // 4 if trial % 5 == 0 else 0] = 0  # some empty boxes
        xyxy = np.concatenate([xy, xy + wh], 1).astype(np.float32)
        scores = (rng.choice([0.3, 0.6, 0.9], n) if trial % 2 else rng.uniform(0, 1, n)).astype(np.float32)
        classes = rng.integers(0, 3, n) if class_aware else None
        threshold = float(rng.choice([0.0, 0.3, 0.5, 0.7]))
        matrix = postprocess.nms(xyxy, scores, classes, threshold)
        monkeypatch.setattr(postprocess, "NMS_MATRIX_MAX", 0)
        assert np.array_equal(matrix, postprocess.nms(xyxy, scores, classes, threshold))
        monkeypatch.undo()
