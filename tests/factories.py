"""Factories shared by tests (import as ``from factories import build_detections``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from campusguard.detections import Detections


def build_detections(
    xyxy: Sequence[Sequence[float]] | np.ndarray,
    confidence: Sequence[float] | float = 0.9,
    class_id: Sequence[int] | int = 0,
    tracker_id: Sequence[int] | None = None,
) -> Detections:
    """`Detections` from plain lists; scalar ``confidence``/``class_id`` are broadcast to every row."""
    boxes = np.asarray(xyxy, dtype=np.float32).reshape(-1, 4)
    n = len(boxes)
    conf = np.broadcast_to(np.asarray(confidence, dtype=np.float32), (n,)).copy()
    cls = np.broadcast_to(np.asarray(class_id, dtype=np.int64), (n,)).copy()
    tid = None if tracker_id is None else np.asarray(tracker_id, dtype=np.int64)
    return Detections(boxes, conf, cls, tid)


def random_head_output(seed: int = 1, batch: int = 3, num_classes: int = 5, anchors: int = 2000) -> np.ndarray:
    """A raw YOLOv8 head output ``(B, 4 + nc, N) float32``: centres in 0..640, sides 5..120 px,
    class scores skewed towards 0 (cubed uniform), for checking a decode/NMS against `decode_yolov8`."""
    rng = np.random.default_rng(seed)
    raw = np.zeros((batch, 4 + num_classes, anchors), np.float32)
    raw[:, 0:2] = rng.uniform(0, 640, (batch, 2, anchors))
    raw[:, 2:4] = rng.uniform(5, 120, (batch, 2, anchors))
    raw[:, 4:] = rng.uniform(0, 1, (batch, num_classes, anchors)) ** 3
    return raw


def assert_matches_opencv_letterbox(got: np.ndarray, frames: np.ndarray, input_hw: tuple[int, int]) -> None:
    """A device letterbox ``(B, 3, H, W)`` in 0..1 against the OpenCV one of ``frames`` (``(B, h, w, 3) uint8``):
    within 1 grey level everywhere, and off by one on under 0.5% of values (OpenCV's fixed-point rounding)."""
    from campusguard.ops.preprocess import letterbox, make_batch

    want = make_batch([letterbox(f, input_hw)[0] for f in frames])
    assert got.shape == want.shape
    diff_levels = np.abs(got.astype(np.float32) - want) * 255
    assert diff_levels.max() <= 1.0 + 1e-3, diff_levels.max()
    assert (diff_levels > 0.5).mean() < 0.005


def build_tiny_detector_onnx(
    path: Path, nc: int = 2, hw: tuple[int, int] = (64, 64), boxes: list[list[float]] | None = None
) -> Path:
    """A tiny ONNX 'detector' whose head output is fixed: ``(1, 4+nc, N)`` built from ``boxes``.

    Each box is ``[cx, cy, w, h, score_class0, ..., score_class{nc-1}]`` in input pixels. The
    graph multiplies the input's mean by zero and adds the constant, so it runs for real.
    """
    import onnx
    from onnx import TensorProto, helper

    boxes = boxes or [[32, 32, 20, 20] + [0.9] + [0.0] * (nc - 1)]
    const = np.asarray(boxes, np.float32).T[None]  # (1, 4+nc, N)
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, *hw])
    y = helper.make_tensor_value_info("output0", TensorProto.FLOAT, list(const.shape))
    nodes = [
        helper.make_node("ReduceMean", ["images"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["z"]),
        helper.make_node("Add", ["const", "z"], ["output0"]),
    ]
    init = [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]), onnx.numpy_helper.from_array(const, "const")]
    graph = helper.make_graph(nodes, "tiny", [x], [y], init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    p = model.metadata_props.add()
    p.key, p.value = "names", str({i: f"c{i}" for i in range(nc)})
    onnx.save(model, str(path))
    return path


def build_tiny_checkpoint(path: Path, imgsz: int = 320, nc: int = 2) -> Path:
    """A ``.pt`` checkpoint as Ultralytics' trainer saves one: a YOLOv8n graph with random
    weights (seed 0), ``nc`` classes and ``imgsz`` in its ``train_args``. Needs the torch extra."""
    import torch

    from campusguard.models.ultralytics_net import build_architecture

    net = build_architecture("yolov8n", nc=nc)
    net.names = {i: f"c{i}" for i in range(nc)}
    torch.save({"model": net, "train_args": {"imgsz": imgsz, "task": "detect"}, "date": None, "version": "test"}, path)
    return path
