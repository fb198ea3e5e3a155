"""GPU paths, run where a CUDA or ROCm device exists (skipped elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.backends.devices import list_gpus
from campusguard.detector import Detector
from campusguard.errors import DeviceError
from campusguard.io.images import read_image
from campusguard.models.parity import match_detections

pytestmark = [pytest.mark.gpu, pytest.mark.torch]


def gpu_kind() -> str:
    return "rocm" if list_gpus()[0].vendor == "amd" else "cuda"


def test_doctor_sees_the_gpu():
    from campusguard.doctor import collect_environment

    env = collect_environment()
    assert env["gpus"] and env["gpus"][0]["memory_total"] > 0
    assert env["torch"]["gpu_available"]


def test_invalid_ordinal_names_the_devices_that_exist():
    n = len(list_gpus())
    with pytest.raises(DeviceError) as info:
        Detector("yolov8n.yaml", backend="torch", device=f"{gpu_kind()}:{n + 5}")
    msg = str(info.value)
    assert "invalid device ordinal" in msg and f"{gpu_kind()}:0 (" in msg


@pytest.mark.parametrize("half", [False, True])
def test_torch_backend_on_gpu_matches_cpu(fall_pt, assets_dir, half):
    img = read_image(assets_dir / "bus.jpg")
    cpu = Detector(fall_pt, backend="torch", device="cpu", conf=0.1)(img)
    det = Detector(fall_pt, backend="torch", device=f"{gpu_kind()}:0", half=half, conf=0.1)
    assert det.provider.startswith(f"torch:{gpu_kind()}:0")
    gpu = det(img)
    r, c, iou = match_detections(cpu, gpu, min_iou=0.95)
    assert len(r) >= len(cpu) - 1 and len(gpu) <= len(cpu) + 1
    np.testing.assert_allclose(gpu.confidence[c], cpu.confidence[r], atol=0.02 if half else 0.005)


def test_onnxruntime_gpu_provider_or_clear_error(fall_onnx_static, assets_dir):
    import onnxruntime as ort

    wanted = "CUDAExecutionProvider" if gpu_kind() == "cuda" else "MIGraphXExecutionProvider"
    if wanted in ort.get_available_providers():
        det = Detector(fall_onnx_static, device=f"{gpu_kind()}:0")
        assert det.provider.startswith(wanted)
        assert len(det(read_image(assets_dir / "bus.jpg"))) > 0
    else:
        with pytest.raises(DeviceError, match="install onnxruntime"):
            Detector(fall_onnx_static, device=f"{gpu_kind()}:0")
        det = Detector(fall_onnx_static, device=f"{gpu_kind()}:0", allow_cpu_fallback=True)
        assert det.provider == "CPUExecutionProvider"
