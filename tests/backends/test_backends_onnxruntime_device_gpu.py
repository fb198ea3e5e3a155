"""The ONNX Runtime device pipeline on a real GPU provider (skipped without a GPU or onnxruntime-gpu)."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.backends.devices import list_gpus
from campusguard.models.parity import match_detections

pytestmark = pytest.mark.gpu


def _gpu() -> str:
    import onnxruntime as ort

    kind = "rocm" if list_gpus()[0].vendor == "amd" else "cuda"
    wanted = "CUDAExecutionProvider" if kind == "cuda" else "MIGraphXExecutionProvider"
    if wanted not in ort.get_available_providers():
        pytest.skip(f"this ONNX Runtime build has no {wanted}")
    return f"{kind}:0"


@pytest.fixture(scope="module")
def bus(assets_dir):
    from campusguard.io.images import read_image

    return read_image(assets_dir / "bus.jpg")


@pytest.mark.parametrize("half", [False, True])
def test_ort_device_path_on_gpu_matches_the_cpu_host_path(fall_pt, bus, half):
    from campusguard.detector import Detector

    device = _gpu()
    ref = Detector(fall_pt, device="cpu", conf=0.1)(bus)
    det = Detector(fall_pt, device=device, half=half, conf=0.1, pipeline="device")
    assert det.provider.startswith("ort-device:") and "CPUExecutionProvider" not in det.provider
    for _ in range(3):  # the device buffers are reused between calls
        got = det(bus)
        r, c, _ = match_detections(ref, got, min_iou=0.95)
        assert len(r) >= len(ref) - 1 and len(got) <= len(ref) + 1
        np.testing.assert_allclose(got.confidence[c], ref.confidence[r], atol=0.02 if half else 0.005)


def test_ort_device_batches_of_two_shapes_on_gpu(fall_onnx_dynamic, bus):
    from campusguard.detector import Detector

    device = _gpu()
    flipped = np.ascontiguousarray(bus[:, ::-1])
    small = np.ascontiguousarray(bus[::2, ::2])
    host = Detector(fall_onnx_dynamic, device="cpu", conf=0.1, rect=True)
    det = Detector(fall_onnx_dynamic, device=device, conf=0.1, rect=True, pipeline="device")
    for img, got in zip([bus, flipped, small, bus], det.predict_batch([bus, flipped, small, bus]), strict=True):
        r, _, _ = match_detections(host(img), got, min_iou=0.95)
        assert len(r) >= len(got) - 1
