"""YOLO26's end-to-end (NMS-free) head on every path: torch and ONNX Runtime agree, FP16/INT8 exports
match FP32, and ``max_det`` / ``classes`` / ``agnostic`` act as on the classic head.

No trained YOLO26 exists here, so the model is the real yolo26n graph with RANDOM weights. Ultralytics'
default initialisation makes such a net's features vanish, so every box scores ~1.6e-4 and ties
with thousands of others: which of the tied boxes comes first then depends on 1e-8 float noise, and
a parity test would compare noise (that, plus the torch backend's rect input against the static
ONNX's square one, is why issue 16 saw ``[0, 0, 135, 135]`` on torch and ``[0, 0, 0, 135]`` on ONNX
Runtime). `_spread_scores` re-draws the convolutions (He init) and scales the class convolutions
so scores spread over 0..1 and depend on the image; the graph, export and backends are untouched.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from campusguard.detector import Detector
from campusguard.models.parity import compare_detections, match_detections

pytestmark = pytest.mark.torch

SCORE_STD = 1.5  # logit spread of the class convolutions
SCORE_BIAS = -9.0  # their bias: on the photos a few dozen boxes per image pass conf 0.25, fewer than max_det


def _spread_scores(net, seed: int = 1):
    import torch

    torch.manual_seed(seed)
    net.eval()
    for m in net.modules():
        if isinstance(m, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    head = net.model[-1]
    convs = [seq[-1] for branch in (head.cv3, head.one2one_cv3) for seq in branch]
    spread: dict[int, float] = {}
    hooks = [
        c.register_forward_hook(
            lambda m, a, o, i=i: spread.__setitem__(i, float((o - m.bias[None, :, None, None]).std()))
        )
        for i, c in enumerate(convs)
    ]
    with torch.no_grad():
        net(torch.rand(1, 3, 320, 320, generator=torch.Generator().manual_seed(seed)))
    for h in hooks:
        h.remove()
    for i, c in enumerate(convs):
        c.weight.data *= SCORE_STD / max(spread[i], 1e-12)
        c.bias.data.fill_(SCORE_BIAS)
    return net


@pytest.fixture(scope="module")
def yolo26_pt(tmp_path_factory) -> Path:
    import torch

    from campusguard.models.ultralytics_net import build_architecture

    net = _spread_scores(build_architecture("yolo26n", seed=1))
    path = tmp_path_factory.mktemp("yolo26") / "yolo26n-spread.pt"
    torch.save({"model": net, "train_args": {}, "date": None, "version": "campusguard"}, path)
    return path


@pytest.fixture(scope="module")
def photos(assets_dir):
    from campusguard.io.images import read_image

    return [read_image(assets_dir / name) for name in ("bus.jpg", "zidane.jpg")]


def _assert_parity(reference, candidate, min_kept=1.0, min_iou=0.99, conf_tol=1e-3):
    report = compare_detections(reference, candidate)
    assert sum(len(d) for d in reference) >= 20, "too few boxes for the comparison to mean anything"
    assert report.kept_share >= min_kept, report.line()
    assert report.mean_iou >= min_iou, report.line()
    assert report.max_conf_diff <= conf_tol, report.line()


@pytest.mark.parametrize("head", [None, "classic"], ids=["own-head", "classic-head"])
def test_torch_gives_onnxruntime_boxes(yolo26_pt, photos, head):
    ort = Detector(yolo26_pt, backend="onnxruntime", device="cpu", conf=0.25, head=head)
    torch = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.25, head=head, rect=False)
    want = ("in-model", "end2end") if head is None else ("campusguard", "classic")
    assert (ort.info.nms, ort.info.head) == (torch.info.nms, torch.info.head) == want
    _assert_parity(ort.predict_batch(photos), torch.predict_batch(photos))


def _ultralytics_boxes(pt, photos, **predict_args):
    from ultralytics import YOLO

    from campusguard.adapters import from_ultralytics

    yolo = YOLO(str(pt), task="detect")
    return [from_ultralytics(yolo.predict(img, conf=0.25, iou=0.7, verbose=False, **predict_args)[0]) for img in photos]


def _assert_same_to_3_decimals(reference, candidate):
    for ref, got in zip(reference, candidate, strict=True):
        assert len(got) == len(ref), f"{len(got)} boxes vs {len(ref)}"
        r, c, _ = match_detections(ref, got, min_iou=0.999)
        assert len(r) == len(ref), f"only {len(r)}/{len(ref)} boxes matched at IoU >= 0.999"
        np.testing.assert_allclose(got.confidence[c], ref.confidence[r], atol=1e-3)
        np.testing.assert_allclose(got.xyxy[c], ref.xyxy[r], atol=0.05)  # pixels: 3 decimals of the normalised box
        np.testing.assert_array_equal(got.class_id[c], ref.class_id[r])


@pytest.mark.parametrize("backend", ["torch", "onnxruntime"])
def test_head_classic_gives_ultralytics_default_predict_boxes(yolo26_pt, photos, backend):
    """Ultralytics 8.4's default predict runs a YOLO26 .pt through its classic head and NMS; ``head="classic"``
    gives the same boxes (torch backend, and the ONNX export of that head), ``head="end2end"`` its ``nms=False``."""
    for head, predict_args in (("classic", {}), ("end2end", {"nms": False})):
        reference = _ultralytics_boxes(yolo26_pt, photos, **predict_args)
        assert sum(len(d) for d in reference) >= 20, "too few boxes for the comparison to mean anything"
        det = Detector(yolo26_pt, backend=backend, device="cpu", conf=0.25, iou=0.7, head=head, dynamic=True)
        assert det.info.head == head
        _assert_same_to_3_decimals(reference, det.predict_batch(photos))


def test_both_heads_of_the_random_yolo26n_yaml_run(photos):
    """The bare architecture (``yolo26n.yaml``, random weights) runs either head on the real photos."""
    end2end = Detector("yolo26n.yaml", backend="torch", device="cpu", conf=1e-4, max_det=50)
    classic = Detector("yolo26n.yaml", backend="torch", device="cpu", conf=1e-4, max_det=50, head="classic")
    assert (end2end.info.head, classic.info.head) == ("end2end", "classic")
    assert end2end.random_weights and classic.random_weights
    for det in (end2end, classic):
        boxes = det.predict_batch(photos)
        assert [len(b) for b in boxes] == [50, 50]  # random weights: every anchor scores ~1.6e-4, above conf
        assert all((b.xyxy[:, 2:] >= b.xyxy[:, :2]).all() for b in boxes)


def test_end_to_end_export_by_default_and_classic_on_request(yolo26_pt, tmp_path):
    from campusguard.models.export import export_onnx, head_float_nodes
    from campusguard.models.resolve import parse_model_ref, read_model_info

    ref = parse_model_ref(yolo26_pt)
    e2e_path = export_onnx(ref, tmp_path / "e2e.onnx", imgsz_hw=(320, 320))
    e2e = read_model_info(parse_model_ref(e2e_path))
    float_nodes = head_float_nodes(e2e_path)  # INT8 keeps these in float: the one-to-one branches and top-k
    assert any("/TopK" in n for n in float_nodes) and any("/one2one_cv3." in n for n in float_nodes)
    classic = read_model_info(parse_model_ref(export_onnx(ref, tmp_path / "c.onnx", (320, 320), end_to_end=False)))
    assert (e2e.end_to_end, e2e.nms) == (True, "in-model")
    assert (classic.end_to_end, classic.nms) == (False, "campusguard")
    assert len(classic.names) == 80  # the classic head's (B, 84, N) output


def test_fp16_and_int8_of_the_end_to_end_graph_match_fp32(yolo26_pt, photos, assets_dir, tmp_path):
    """Measured here: FP16 keeps 99.7% of FP32's boxes (IoU 0.994), INT8 91% (IoU 0.997, confidence off by up to 0.23)."""
    from campusguard.models.export import convert_fp16, export_onnx, quantize_int8
    from campusguard.models.resolve import parse_model_ref

    fp32 = export_onnx(parse_model_ref(yolo26_pt), tmp_path / "fp32.onnx", imgsz_hw=(640, 640))
    fp16 = convert_fp16(fp32, tmp_path / "fp16.onnx")
    int8 = quantize_int8(fp32, tmp_path / "int8.onnx", sorted(assets_dir.glob("*.jpg")))
    ref = Detector(fp32, device="cpu", conf=0.25).predict_batch(photos)
    for path, min_kept, min_iou, conf_tol in ((fp16, 0.95, 0.98, 0.02), (int8, 0.8, 0.9, 0.3)):
        det = Detector(path, device="cpu", conf=0.25)
        assert det.info.nms == "in-model" and det.info.precision in ("fp16", "int8")
        _assert_parity(ref, det.predict_batch(photos), min_kept, min_iou, conf_tol)


def test_agnostic_matches_the_heads_own_agnostic_top_k(yolo26_pt, photos):
    """``agnostic`` on the (B, 300, 6) output keeps what Ultralytics' class-agnostic top-k head keeps."""
    det = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.01, agnostic=True, rect=False)
    head_agnostic = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.01, rect=False)
    head_agnostic.backend.model.model[-1].agnostic_nms = True  # type: ignore[attr-defined]
    for ours, theirs in zip(det.predict_batch(photos), head_agnostic.predict_batch(photos), strict=True):
        assert 0 < len(ours) <= len(theirs)
        top = theirs[: len(ours)]  # the same boxes; equal scores may come in another order
        r, c, iou = match_detections(ours, top, min_iou=0.999)
        assert len(r) == len(ours)
        np.testing.assert_allclose(ours.confidence[r], top.confidence[c], atol=1e-6)


def test_classes_and_max_det_on_end_to_end_output(yolo26_pt, photos):
    every = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.1, rect=False).predict_batch(photos)
    cls = int(np.bincount(every[0].class_id).argmax())
    only = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.1, classes=[cls], rect=False)
    few = Detector(yolo26_pt, backend="torch", device="cpu", conf=0.1, max_det=5, rect=False)
    for all_dets, one_class, top in zip(every, only.predict_batch(photos), few.predict_batch(photos), strict=True):
        np.testing.assert_array_equal(one_class.xyxy, all_dets.xyxy[all_dets.class_id == cls])
        assert len(top) == 5
        np.testing.assert_array_equal(top.confidence, all_dets.confidence[:5])


def test_device_pipeline_refuses_an_end_to_end_model(yolo26_pt):
    from campusguard.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="end-to-end"):
        Detector(yolo26_pt, backend="torch", device="cpu", pipeline="device")
    assert Detector(yolo26_pt, backend="torch", device="cpu", pipeline="auto").pipeline == "host"
    assert Detector(yolo26_pt, backend="torch", device="cpu", pipeline="device", head="classic").pipeline == "device"
