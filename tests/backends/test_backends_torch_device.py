"""The device-resident PyTorch path, checked on the CPU against the host path it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.errors import InvalidInputError
from campusguard.models.parity import match_detections
from campusguard.ops.postprocess import decode_yolov8
from campusguard.ops.preprocess import letterbox_plan
from factories import assert_matches_opencv_letterbox, random_head_output

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("frame_hw", [(720, 1280), (1080, 810), (333, 517), (640, 640), (240, 320)])
@pytest.mark.parametrize("input_hw", [(640, 640), (384, 640)])
def test_letterbox_tensor_matches_opencv_letterbox(frame_hw, input_hw):
    import torch

    from campusguard.backends.torch_device import letterbox_tensor

    rng = np.random.default_rng(sum(frame_hw))
    frames = rng.integers(0, 256, (2, *frame_hw, 3), dtype=np.uint8)
    plan = letterbox_plan(frame_hw, input_hw)
    got = letterbox_tensor(torch.from_numpy(frames), plan).numpy()
    assert_matches_opencv_letterbox(got, frames, input_hw)


def test_letterbox_tensor_fp16_output():
    import torch

    from campusguard.backends.torch_device import letterbox_tensor

    frames = torch.full((1, 100, 200, 3), 255, dtype=torch.uint8)
    out = letterbox_tensor(frames, letterbox_plan((100, 200), (320, 320)), dtype=torch.float16)
    assert out.dtype == torch.float16 and out.shape == (1, 3, 320, 320)
    assert float(out[0, 0, 0, 0]) == pytest.approx(114 / 255, abs=1e-3)
    assert float(out[0, 0, 160, 160]) == pytest.approx(1.0)


@pytest.mark.parametrize("agnostic", [False, True])
@pytest.mark.parametrize("classes", [None, [1, 3]])
def test_nms_tensor_matches_host_decode(agnostic, classes):
    import torch

    from campusguard.backends.torch_device import nms_tensor

    nc = 5
    raw = random_head_output(seed=1, batch=3, num_classes=nc, anchors=2000)
    want = decode_yolov8(raw, 0.3, 0.5, max_det=10_000, classes=classes, agnostic=agnostic)
    xyxy, conf, label, image = (t.numpy() for t in nms_tensor(torch.from_numpy(raw), 0.3, 0.5, classes, agnostic))
    for i, (w_xyxy, w_conf, w_cls) in enumerate(want):
        mine = image == i
        assert mine.sum() == len(w_conf) > 0
        np.testing.assert_allclose(xyxy[mine], w_xyxy, atol=1e-3)
        np.testing.assert_allclose(conf[mine], w_conf, atol=1e-6)
        np.testing.assert_array_equal(label[mine], w_cls)


@pytest.fixture(scope="module")
def photos(assets_dir):
    from campusguard.io.images import read_image

    return [read_image(assets_dir / name) for name in ("bus.jpg", "zidane.jpg")]


@pytest.mark.parametrize("conf", [0.25, 0.05])
@pytest.mark.parametrize("rect", [True, False])
def test_device_pipeline_matches_host_path_on_real_weights(photos, fall_pt, conf, rect):
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    host = Detector(fall_pt, backend="torch", device="cpu", conf=conf, imgsz=640, rect=rect)
    device_path = DevicePipeline.from_detector(host)
    assert device_path.provider == "torch-device:cpu"
    for img in photos:
        ref = host(img)
        (got,) = device_path([img])
        assert len(ref) > 0 and len(got) == len(ref)
        r, c, _ = match_detections(ref, got, min_iou=0.99)
        assert len(r) == len(ref)
        np.testing.assert_allclose(got.confidence[c], ref.confidence[r], atol=0.005)
        np.testing.assert_array_equal(got.class_id[c], ref.class_id[r])


def test_device_pipeline_batches_and_streams_like_single_calls(photos, fall_pt):
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    pipe = DevicePipeline.from_detector(Detector(fall_pt, backend="torch", device="cpu", conf=0.1))
    bus = photos[0]
    single = pipe([bus])[0]
    batched = pipe([bus, bus[:, ::-1].copy(), bus])
    assert len(batched) == 3
    np.testing.assert_allclose(batched[0].xyxy, single.xyxy, atol=1e-3)
    np.testing.assert_allclose(batched[2].xyxy, single.xyxy, atol=1e-3)
    streamed = list(pipe.stream([[bus], [bus, bus]]))
    assert [len(b) for b in streamed] == [1, 2]
    np.testing.assert_allclose(streamed[1][1].xyxy, single.xyxy, atol=1e-3)


def test_device_pipeline_max_det_and_bad_input(photos, fall_pt):
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    det = Detector(fall_pt, backend="torch", device="cpu", conf=0.01, max_det=2)
    pipe = DevicePipeline.from_detector(det)
    assert len(pipe([photos[0]])[0]) == 2
    with pytest.raises(InvalidInputError, match="equally sized"):
        pipe([photos[0], photos[1]])
    with pytest.raises(InvalidInputError, match="no frames"):
        pipe([])
    with pytest.raises(InvalidInputError, match="CUDA or ROCm"):
        DevicePipeline.from_detector(det, cuda_graphs=True)


def test_device_pipeline_refuses_onnx_detectors():
    from campusguard.backends.torch_device import DevicePipeline
    from campusguard.detector import Detector

    with pytest.raises(InvalidInputError, match="PyTorch models"):
        DevicePipeline.from_detector(Detector(device="cpu"))  # the bundled ONNX model


def test_detector_pipeline_device_gives_the_host_boxes(photos, fall_pt):
    from campusguard.detector import Detector

    host = Detector(fall_pt, backend="torch", device="cpu", conf=0.1)
    device = Detector(fall_pt, backend="torch", device="cpu", conf=0.1, pipeline="device")
    assert host.pipeline == "host" and device.pipeline == "device"
    got = device.predict_batch(photos)  # two frame shapes: one submission each
    assert device.timings.images == 2 and device.timings.total_ms > 0
    for img, dets in zip(photos, got, strict=True):
        ref = host(img)
        r, _, _ = match_detections(ref, dets, min_iou=0.99)
        assert len(dets) == len(ref) == len(r)


def test_detector_pipeline_choices():
    from campusguard.detector import Detector

    assert Detector(device="cpu", pipeline="auto").pipeline == "host"  # ONNX Runtime: device path only when asked
    assert Detector(device="cpu", pipeline="device").provider.startswith("ort-device:")
    with pytest.raises(InvalidInputError, match="host, device or auto"):
        Detector(device="cpu", pipeline="gpu")
    with pytest.raises(InvalidInputError, match="cuda_graphs"):
        Detector(device="cpu", cuda_graphs=True)
