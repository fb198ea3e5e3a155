"""Parity on real YOLO26 weights: a YOLO26n trained here on the synthetic campus data
(`tests/data/models/yolo26n-campus.pt`, see tests/data/models/README.md), NMS-free head.

Ultralytics' own predict, CampusGuard on ONNX Runtime (the end-to-end export) and CampusGuard on
the torch backend must give the same boxes on synthetic campus frames.

Ultralytics 8.4 runs a YOLO26 ``.pt`` through its classic (one-to-many) head and NMS unless it is
given ``nms=False``; CampusGuard keeps the model's own NMS-free head. So the end-to-end boxes are
compared with Ultralytics' ``nms=False`` predict, and a classic-head export with its default one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_models_parity_ultralytics import assert_same

from campusguard.adapters import from_ultralytics
from campusguard.detector import Detector

pytestmark = pytest.mark.torch

CHECKPOINT = Path(__file__).parents[1] / "data" / "models" / "yolo26n-campus.pt"
IMGSZ = 320  # its training size


@pytest.fixture(scope="module")
def frames() -> list[np.ndarray]:
    """Three 640x360 frames of synthetic campus videos (people, vehicles, one lying person)."""
    from campusguard.data.synth.video import SynthVideo

    return [SynthVideo(seed, seconds=10, falls=True).frame(index)[0] for seed, index in ((0, 30), (1, 60), (10, 20))]


@pytest.fixture(scope="module")
def y26_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from campusguard.models.export import export_onnx
    from campusguard.models.resolve import ModelRef

    out = tmp_path_factory.mktemp("y26") / "yolo26n-campus.onnx"
    return export_onnx(ModelRef("pt", CHECKPOINT), out, imgsz_hw=(IMGSZ, IMGSZ), dynamic=True)


def test_the_export_keeps_the_nms_free_head(y26_onnx: Path) -> None:
    det = Detector(y26_onnx, device="cpu", imgsz=IMGSZ)
    assert det.info.nms == "in-model"


@pytest.mark.parametrize("conf", [0.25, 0.05])
def test_onnxruntime_matches_ultralytics_predict(frames, y26_onnx: Path, conf: float) -> None:
    from ultralytics import YOLO

    yolo = YOLO(str(CHECKPOINT), task="detect")
    det = Detector(y26_onnx, device="cpu", conf=conf, imgsz=IMGSZ)
    boxes = 0
    for img in frames:
        ref = from_ultralytics(yolo.predict(img, conf=conf, imgsz=IMGSZ, verbose=False, nms=False)[0])
        assert_same(ref, det(img))
        boxes += len(ref)
    assert boxes >= 10  # a trained model: real boxes, not an empty comparison


def test_classic_head_export_matches_ultralytics_default_predict(frames, tmp_path: Path) -> None:
    from ultralytics import YOLO

    from campusguard.models.export import export_onnx
    from campusguard.models.resolve import ModelRef

    classic = export_onnx(
        ModelRef("pt", CHECKPOINT), tmp_path / "classic.onnx", imgsz_hw=(IMGSZ, IMGSZ), dynamic=True, end_to_end=False
    )
    det = Detector(classic, device="cpu", conf=0.25, imgsz=IMGSZ)
    assert det.info.nms == "campusguard"
    yolo = YOLO(str(CHECKPOINT), task="detect")
    for img in frames:
        assert_same(from_ultralytics(yolo.predict(img, conf=0.25, imgsz=IMGSZ, verbose=False)[0]), det(img))


def test_torch_backend_matches_onnxruntime(frames, y26_onnx: Path) -> None:
    ort_det = Detector(y26_onnx, device="cpu", conf=0.1, imgsz=IMGSZ)
    torch_det = Detector(CHECKPOINT, backend="torch", device="cpu", conf=0.1, imgsz=IMGSZ)
    assert torch_det.provider == "torch:cpu" and torch_det.info.nms == "in-model"
    for img in frames:
        ref = ort_det(img)
        assert len(ref) > 0
        assert_same(torch_det(img), ref)
