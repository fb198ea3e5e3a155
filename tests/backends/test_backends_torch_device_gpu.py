"""The device-resident PyTorch path on a real GPU (skipped without one)."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.backends.devices import list_gpus
from campusguard.models.parity import match_detections

pytestmark = [pytest.mark.gpu, pytest.mark.torch]


def _gpu() -> str:
    return ("rocm" if list_gpus()[0].vendor == "amd" else "cuda") + ":0"


@pytest.fixture(scope="module")
def bus(assets_dir):
    from campusguard.io.images import read_image

    return read_image(assets_dir / "bus.jpg")


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("cuda_graphs", [False, True])
def test_device_path_on_gpu_matches_the_cpu_host_path(fall_pt, bus, half, cuda_graphs):
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    ref = Detector(fall_pt, backend="torch", device="cpu", conf=0.1)(bus)
    pipe = DevicePipeline.from_detector(
        Detector(fall_pt, backend="torch", device=_gpu(), half=half, conf=0.1), cuda_graphs=cuda_graphs
    )
    assert pipe.provider.startswith("torch-device:")
    for _ in range(3):  # replays of a captured graph give the same boxes as its first run
        (got,) = pipe([bus, bus])[:1]
        r, c, _ = match_detections(ref, got, min_iou=0.95)
        assert len(r) >= len(ref) - 1 and len(got) <= len(ref) + 1
        np.testing.assert_allclose(got.confidence[c], ref.confidence[r], atol=0.02 if half else 0.005)


def test_streamed_batches_overlap_and_stay_in_order(fall_pt, bus):
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    pipe = DevicePipeline.from_detector(Detector(fall_pt, backend="torch", device=_gpu(), conf=0.1))
    flipped = np.ascontiguousarray(bus[:, ::-1])
    batches = [[bus] * 4, [flipped] * 4, [bus] * 4]
    single = [pipe([b[0]])[0] for b in batches]
    for got, want in zip(pipe.stream(batches), single, strict=True):
        assert len(got) == 4
        np.testing.assert_allclose(got[3].xyxy, want.xyxy, atol=0.5)
