"""The device-resident detection path for ONNX Runtime: uint8 frames in, final boxes out.

The host path letterboxes on the CPU and hands ONNX Runtime a float32 batch (four times the bytes
of the frames), and NMS runs on the CPU over the whole head output. Here the model is fused with
two small ONNX graphs, so the provider that runs the network (CUDA, TensorRT, MIGraphX, or the CPU
in the tests) runs everything between the ``uint8`` frames and the kept boxes:

- before it, `preprocess_graph`: ``(B, H, W, 3) uint8`` BGR frames resized with OpenCV's
  fixed-point ``INTER_LINEAR`` arithmetic (the same integers as the PyTorch device path; ONNX's
  float ``Resize`` differs from OpenCV's bytes on enough pixels to move confidences by more than
  0.005), HWC to CHW, BGR to RGB, padded with grey 114, scaled to 0..1 and cast to the model's input
  type. The resize indices, weights and padding come from `letterbox_plan` per frame shape, as
  small inputs made once, so one graph serves every frame size;
- after it, `nms_graph`: the same steps as `campusguard.ops.postprocess.decode_yolov8`: best class
  per anchor (``TopK``), at most `MAX_NMS_CANDIDATES` candidates per image, ``NonMaxSuppression``
  per class (or over all classes with ``agnostic``) with the confidence threshold (strictly
  greater) and IoU threshold (greater suppresses), and the kept boxes gathered as ``(K, 7)`` rows.

With I/O binding the frames are uploaded once into a device ``OrtValue`` kept per batch shape, the
output stays on the device until the kept rows are copied back, and boxes are mapped to each frame
on the host (`scale_boxes`, a few dozen rows). Why a graph rather than PyTorch's device letterbox
through DLPack: it needs no PyTorch next to ``onnxruntime-gpu``, no second CUDA runtime in the
process and no synchronisation between two frameworks' streams, and it runs unchanged on any
provider that runs the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.ops.boxes import scale_boxes
from campusguard.ops.postprocess import MAX_NMS_CANDIDATES, detections_by_image, output_kind
from campusguard.ops.preprocess import LetterboxPlan, letterbox_plan, linear_resize_coefficients

__all__ = [
    "OrtDevicePipeline",
    "preprocess_graph",
    "letterbox_inputs",
    "nms_graph",
    "fuse_device_graph",
    "OrtPendingBatch",
]

FRAMES, PADS, DETECTIONS = "frames", "pads", "detections"
MIN_OPSET = 13  # Squeeze/Unsqueeze axes as inputs
_PRE, _POST = "cg_pre/", "cg_nms/"


def _helpers() -> tuple[Any, Any, Any]:
    import onnx
    from onnx import TensorProto, helper

    return onnx, TensorProto, helper


def _const(name: str, values: Any, dtype: Any) -> Any:
    _, _, helper = _helpers()
    from onnx import numpy_helper

    return helper.make_node(
        "Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, dtype=dtype), name)
    )


def preprocess_graph(opset: int, out_name: str, out_fp16: bool, pad_value: int = 114) -> Any:
    """The letterbox as an ONNX graph: ``frames (B, H, W, 3) uint8`` BGR to ``(B, 3, h, w)`` RGB 0..1.

    The resize is OpenCV's fixed-point ``INTER_LINEAR`` (the arithmetic of
    `campusguard.backends.torch_device.resize_bilinear_u8`) with the per-axis indices and weights of
    `linear_resize_coefficients` as inputs (`letterbox_inputs`): columns ``x0, x1 (w,) int64`` and
    ``a0, a1 (w, 1) int32``, rows ``y0, y1 (h,) int64`` and ``b0, b1 (h, 1, 1) int32``, and
    ``pads (8,) int64`` in ONNX ``Pad`` order. Integer ``Div`` by powers of two stands for the shifts
    (every value is non-negative), so the graph runs on providers without ``BitShift``. Output
    ``out_name``, float16 when ``out_fp16``.
    """
    onnx, tp, helper = _helpers()
    p = _PRE
    nodes = [
        helper.make_node("Gather", [FRAMES, "x0"], [p + "g0"], axis=2),  # (B, H, w, 3) uint8
        helper.make_node("Gather", [FRAMES, "x1"], [p + "g1"], axis=2),
        helper.make_node("Cast", [p + "g0"], [p + "g0i"], to=tp.INT32),
        helper.make_node("Cast", [p + "g1"], [p + "g1i"], to=tp.INT32),
        helper.make_node("Mul", [p + "g0i", "a0"], [p + "r0"]),
        helper.make_node("Mul", [p + "g1i", "a1"], [p + "r1"]),
        helper.make_node("Add", [p + "r0", p + "r1"], [p + "rows"]),  # levels * 2**11
        helper.make_node("Gather", [p + "rows", "y0"], [p + "top_rows"], axis=1),  # (B, h, w, 3)
        helper.make_node("Gather", [p + "rows", "y1"], [p + "bottom_rows"], axis=1),
        _const(p + "c2", 2, np.int32),
        _const(p + "c4", 4, np.int32),
        _const(p + "c16", 16, np.int32),
        _const(p + "c65536", 65536, np.int32),
        helper.make_node("Div", [p + "top_rows", p + "c16"], [p + "top16"]),
        helper.make_node("Div", [p + "bottom_rows", p + "c16"], [p + "bottom16"]),
        helper.make_node("Mul", [p + "top16", "b0"], [p + "top"]),
        helper.make_node("Mul", [p + "bottom16", "b1"], [p + "bottom"]),
        helper.make_node("Div", [p + "top", p + "c65536"], [p + "top_s"]),
        helper.make_node("Div", [p + "bottom", p + "c65536"], [p + "bottom_s"]),
        helper.make_node("Add", [p + "top_s", p + "bottom_s"], [p + "sum"]),
        helper.make_node("Add", [p + "sum", p + "c2"], [p + "sum2"]),
        helper.make_node("Div", [p + "sum2", p + "c4"], [p + "levels_i"]),  # (B, h, w, 3) levels
        helper.make_node("Cast", [p + "levels_i"], [p + "levels"], to=tp.FLOAT),
        helper.make_node("Transpose", [p + "levels"], [p + "chw"], perm=[0, 3, 1, 2]),
        _const(p + "rgb_idx", [2, 1, 0], np.int64),
        helper.make_node("Gather", [p + "chw", p + "rgb_idx"], [p + "rgb"], axis=1),
        _const(p + "pad_value", pad_value, np.float32),
        helper.make_node("Pad", [p + "rgb", PADS, p + "pad_value"], [p + "padded"], mode="constant"),
        _const(p + "scale", 1 / 255.0, np.float32),
        helper.make_node("Mul", [p + "padded", p + "scale"], [p + "unit"]),
        helper.make_node("Cast", [p + "unit"], [out_name], to=tp.FLOAT16 if out_fp16 else tp.FLOAT),
    ]
    inputs = [helper.make_tensor_value_info(FRAMES, tp.UINT8, ["batch", "height", "width", 3])]
    inputs += [helper.make_tensor_value_info(n, tp.INT64, ["resized_w"]) for n in ("x0", "x1")]
    inputs += [helper.make_tensor_value_info(n, tp.INT32, ["resized_w", 1]) for n in ("a0", "a1")]
    inputs += [helper.make_tensor_value_info(n, tp.INT64, ["resized_h"]) for n in ("y0", "y1")]
    inputs += [helper.make_tensor_value_info(n, tp.INT32, ["resized_h", 1, 1]) for n in ("b0", "b1")]
    inputs += [helper.make_tensor_value_info(PADS, tp.INT64, [8])]
    graph = helper.make_graph(
        nodes,
        "campusguard_letterbox",
        inputs,
        [helper.make_tensor_value_info(out_name, tp.FLOAT16 if out_fp16 else tp.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def letterbox_inputs(plan: LetterboxPlan, frame_hw: tuple[int, int]) -> dict[str, np.ndarray]:
    """The small inputs of `preprocess_graph` for one frame shape and its `letterbox_plan`."""
    new_w, new_h = plan.resized_wh
    x0, x1, a0, a1 = linear_resize_coefficients(frame_hw[1], new_w)
    y0, y1, b0, b1 = linear_resize_coefficients(frame_hw[0], new_h)
    top, bottom, left, right = plan.pad_tblr
    return {
        "x0": x0,
        "x1": x1,
        "a0": a0.reshape(-1, 1),
        "a1": a1.reshape(-1, 1),
        "y0": y0,
        "y1": y1,
        "b0": b0.reshape(-1, 1, 1),
        "b1": b1.reshape(-1, 1, 1),
        PADS: np.array([0, 0, top, left, 0, 0, bottom, right], np.int64),
    }


def nms_graph(
    opset: int,
    in_name: str,
    in_fp16: bool,
    num_classes: int,
    conf: float,
    iou: float,
    max_det: int,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> Any:
    """Decode and NMS of a raw ``(B, 4+nc, N)`` head as an ONNX graph (semantics of `decode_yolov8`).

    Output ``detections (K, 7) float32``: ``x1, y1, x2, y2, confidence, class, image`` in
    network-input pixels, for every image of the batch; at most ``max_det`` per image and class.
    """
    onnx, tp, helper = _helpers()
    p = _POST
    nodes = [
        helper.make_node("Cast", [in_name], [p + "raw"], to=tp.FLOAT),
        _const(p + "c0", [0], np.int64),
        _const(p + "c1", [1], np.int64),
        _const(p + "c2", [2], np.int64),
        _const(p + "c4", [4], np.int64),
        _const(p + "cend", [4 + num_classes], np.int64),
        helper.make_node("Slice", [p + "raw", p + "c0", p + "c4", p + "c1"], [p + "xywh_t"]),
        helper.make_node("Transpose", [p + "xywh_t"], [p + "xywh"], perm=[0, 2, 1]),  # (B, N, 4)
        helper.make_node("Slice", [p + "raw", p + "c4", p + "cend", p + "c1"], [p + "scores_raw"]),  # (B, nc, N)
    ]
    scores = p + "scores_raw"
    if classes is not None:  # other classes can never be the best one, as in decode_yolov8
        allowed = np.full((1, num_classes, 1), -np.inf, np.float32)
        allowed[0, [c for c in classes if 0 <= c < num_classes], 0] = 0.0
        nodes += [
            _const(p + "allowed", allowed, np.float32),
            helper.make_node("Add", [scores, p + "allowed"], [p + "scores"]),
        ]
        scores = p + "scores"
    nodes += [
        helper.make_node("TopK", [scores, p + "c1"], [p + "best", p + "cls"], axis=1),  # (B, 1, N) each
        helper.make_node("Shape", [p + "best"], [p + "best_shape"]),
        _const(p + "c3", [3], np.int64),
        helper.make_node("Slice", [p + "best_shape", p + "c2", p + "c3"], [p + "n"]),
        _const(p + "cap", [MAX_NMS_CANDIDATES], np.int64),
        helper.make_node("Min", [p + "n", p + "cap"], [p + "k"]),
        helper.make_node("TopK", [p + "best", p + "k"], [p + "conf_k", p + "idx_k"], axis=2),  # (B, 1, K)
        helper.make_node("Squeeze", [p + "idx_k", p + "c1"], [p + "idx"]),  # (B, K)
        helper.make_node("Unsqueeze", [p + "idx", p + "c2"], [p + "idx3"]),  # (B, K, 1)
        helper.make_node("Shape", [p + "idx3"], [p + "idx3_shape"]),
        helper.make_node("Slice", [p + "idx3_shape", p + "c0", p + "c2"], [p + "bk"]),
        helper.make_node("Concat", [p + "bk", p + "c4"], [p + "bk4"], axis=0),
        helper.make_node("Expand", [p + "idx3", p + "bk4"], [p + "idx4"]),
        helper.make_node("GatherElements", [p + "xywh", p + "idx4"], [p + "boxes"], axis=1),  # (B, K, 4)
        helper.make_node("GatherElements", [p + "cls", p + "idx_k"], [p + "cls_k"], axis=2),  # (B, 1, K)
    ]
    if agnostic:
        nms_scores = p + "conf_k"
    else:  # one score row per class, the anchor's confidence under its best class only
        nodes += [
            _const(p + "class_ids", np.arange(num_classes).reshape(1, num_classes, 1), np.int64),
            helper.make_node("Equal", [p + "cls_k", p + "class_ids"], [p + "onehot_b"]),
            helper.make_node("Cast", [p + "onehot_b"], [p + "onehot"], to=tp.FLOAT),
            helper.make_node("Mul", [p + "conf_k", p + "onehot"], [p + "class_scores"]),  # (B, nc, K)
        ]
        nms_scores = p + "class_scores"
    nodes += [
        _const(p + "max_det", [max_det], np.int64),
        _const(p + "iou", [iou], np.float32),
        _const(p + "conf", [conf], np.float32),
        helper.make_node(
            "NonMaxSuppression",
            [p + "boxes", nms_scores, p + "max_det", p + "iou", p + "conf"],
            [p + "selected"],
            center_point_box=1,
        ),  # (M, 3): image, class row, candidate
        helper.make_node("Gather", [p + "selected", p + "c0"], [p + "sel_b"], axis=1),  # (M, 1)
        helper.make_node("Gather", [p + "selected", p + "c2"], [p + "sel_k"], axis=1),
        helper.make_node("Concat", [p + "sel_b", p + "sel_k"], [p + "sel_bk"], axis=1),  # (M, 2)
        helper.make_node("GatherND", [p + "boxes", p + "sel_bk"], [p + "kept_xywh"]),  # (M, 4)
        helper.make_node("Squeeze", [p + "conf_k", p + "c1"], [p + "conf_bk"]),
        helper.make_node("Squeeze", [p + "cls_k", p + "c1"], [p + "cls_bk"]),
        helper.make_node("GatherND", [p + "conf_bk", p + "sel_bk"], [p + "kept_conf"]),  # (M,)
        helper.make_node("GatherND", [p + "cls_bk", p + "sel_bk"], [p + "kept_cls"]),
        helper.make_node("Slice", [p + "kept_xywh", p + "c0", p + "c2", p + "c1"], [p + "xy"]),
        helper.make_node("Slice", [p + "kept_xywh", p + "c2", p + "c4", p + "c1"], [p + "wh"]),
        _const(p + "half", 0.5, np.float32),
        helper.make_node("Mul", [p + "wh", p + "half"], [p + "half_wh"]),
        helper.make_node("Sub", [p + "xy", p + "half_wh"], [p + "x1y1"]),
        helper.make_node("Add", [p + "xy", p + "half_wh"], [p + "x2y2"]),
        helper.make_node("Unsqueeze", [p + "kept_conf", p + "c1"], [p + "conf_col"]),
        helper.make_node("Cast", [p + "kept_cls"], [p + "cls_f"], to=tp.FLOAT),
        helper.make_node("Unsqueeze", [p + "cls_f", p + "c1"], [p + "cls_col"]),
        helper.make_node("Cast", [p + "sel_b"], [p + "img_col"], to=tp.FLOAT),
        helper.make_node(
            "Concat", [p + "x1y1", p + "x2y2", p + "conf_col", p + "cls_col", p + "img_col"], [DETECTIONS], axis=1
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "campusguard_nms",
        [
            helper.make_tensor_value_info(
                in_name, tp.FLOAT16 if in_fp16 else tp.FLOAT, ["batch", 4 + num_classes, "anchors"]
            )
        ],
        [helper.make_tensor_value_info(DETECTIONS, tp.FLOAT, ["kept", 7])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def fuse_device_graph(
    model: Any,
    conf: float,
    iou: float,
    max_det: int,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> Any:
    """The detector as one ONNX model: `preprocess_graph`, then ``model``, then `nms_graph`.

    Args:
        model: a loaded classic-head YOLO ``onnx.ModelProto`` (output ``(B, 4+nc, N)``).
        conf, iou, max_det, classes, agnostic: the thresholds of `Detector`, baked into the graph.

    Raises:
        ModelLoadError: when the model's head or opset does not allow it.
    """
    onnx, tp, _ = _helpers()
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        raise ModelLoadError(f"the device pipeline needs an ONNX opset >= {MIN_OPSET}; this model has {opset}")
    x, y = model.graph.input[0], model.graph.output[0]
    dims = y.type.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
    if len(shape) != 3 or output_kind(shape) != "raw" or shape[1] < 5:
        raise ModelLoadError(
            f"the device pipeline needs a classic YOLO head output (B, 4+nc, N) with a fixed class count; got {shape}"
        )
    in_fp16 = x.type.tensor_type.elem_type == tp.FLOAT16
    out_fp16 = y.type.tensor_type.elem_type == tp.FLOAT16
    pre = preprocess_graph(opset, x.name, in_fp16)
    post = nms_graph(opset, y.name, out_fp16, dims[1].dim_value - 4, conf, iou, max_det, classes, agnostic)
    for part in (pre, post):
        part.ir_version = model.ir_version
        del part.opset_import[:]
        part.opset_import.extend(model.opset_import)
    # merge_models wires outputs to inputs by name; the model keeps its own input and output names
    body = onnx.compose.merge_models(pre, model, io_map=[(x.name, x.name)])
    fused = onnx.compose.merge_models(body, post, io_map=[(y.name, y.name)])
    del fused.graph.output[:]
    fused.graph.output.extend(post.graph.output)
    return fused


@dataclass
class OrtPendingBatch:
    """A batch whose kept boxes have been computed; ``rows`` in network-input pixels."""

    rows: np.ndarray
    plan: LetterboxPlan
    images: int


class OrtDevicePipeline:
    """Frames in, `Detections` out, with letterbox, the network and NMS in one ONNX Runtime session.

    Args:
        backend: the `OnnxRuntimeBackend` whose model, providers and options are used (its
            session opens the fused graph through ``open_session``).
        input_hw: callable giving the network input (height, width) for a frame (height, width).
        conf, iou, max_det, classes, agnostic: as in `Detector`.
    """

    def __init__(
        self,
        backend: Any,
        input_hw: Any,
        *,
        conf: float = 0.25,
        iou: float = 0.7,
        max_det: int = 300,
        classes: list[int] | None = None,
        agnostic: bool = False,
    ) -> None:
        import onnx

        self.backend = backend
        self.input_hw = input_hw
        self.max_det = max_det
        fused = fuse_device_graph(onnx.load(str(backend.path)), conf, iou, max_det, classes, agnostic)
        self.session = backend.open_session(fused.SerializeToString())
        used = self.session.get_providers()[0]
        # where the frames and the kept rows live: device memory for the CUDA family; the CPU provider
        # (and MIGraphX, whose device OrtValues this project has not yet run) keep host memory
        self.device_type = "cuda" if used in ("CUDAExecutionProvider", "TensorrtExecutionProvider") else "cpu"
        self.device_index = backend.device.index if self.device_type == "cuda" else 0
        self._frames: dict[tuple[int, ...], tuple[np.ndarray, Any]] = {}
        self._letterbox: dict[tuple[tuple[int, int], tuple[int, int]], dict[str, Any]] = {}
        self._batch = backend.info.batch

    @classmethod
    def from_detector(cls, detector: Any) -> OrtDevicePipeline:
        """The device path with a `Detector`'s ONNX model, thresholds and input sizes."""
        backend = detector.backend
        if getattr(backend, "name", "") != "onnxruntime":
            raise InvalidInputError(
                f"the ONNX Runtime device pipeline runs ONNX models; this detector uses {getattr(backend, 'name', '?')}"
            )
        return cls(
            backend,
            detector.input_hw,
            conf=detector.conf,
            iou=detector.iou,
            max_det=detector.max_det,
            classes=detector.classes,
            agnostic=detector.agnostic,
        )

    @property
    def provider(self) -> str:
        """``ort-device:`` and the provider that runs the fused graph, e.g. ``ort-device:CUDAExecutionProvider:0``."""
        used = self.session.get_providers()[0]
        return (
            f"ort-device:{used}" if used == "CPUExecutionProvider" else f"ort-device:{used}:{self.backend.device.index}"
        )

    def __call__(self, frames: list[np.ndarray]) -> list[Detections]:
        """Detect on equally sized ``(H, W, 3) uint8`` BGR frames; one `Detections` per frame."""
        return self.collect(self.submit(frames))

    def submit(self, frames: list[np.ndarray]) -> OrtPendingBatch:
        """Upload the frames once and run the fused graph; the kept rows come back to the host."""
        if not frames:
            raise InvalidInputError("no frames to detect on")
        shape = frames[0].shape
        if len(shape) != 3 or shape[2] != 3 or any(f.shape != shape or f.dtype != np.uint8 for f in frames):
            raise InvalidInputError("the device pipeline takes equally sized (H, W, 3) uint8 BGR frames")
        if self._batch is not None and len(frames) > self._batch:
            raise InvalidInputError(f"this model takes batches of {self._batch}; got {len(frames)} frames")
        frame_hw = (int(shape[0]), int(shape[1]))
        plan = letterbox_plan(frame_hw, self.input_hw(frame_hw))
        binding = self.session.io_binding()
        binding.bind_ortvalue_input(FRAMES, self._upload(frames))
        for name, value in self._letterbox_values(plan, frame_hw).items():
            binding.bind_ortvalue_input(name, value)
        binding.bind_output(DETECTIONS, self.device_type, self.device_index)
        self.session.run_with_iobinding(binding)
        return OrtPendingBatch(rows=binding.copy_outputs_to_cpu()[0], plan=plan, images=len(frames))

    def collect(self, pending: OrtPendingBatch) -> list[Detections]:
        """Map the kept rows to each frame's pixels and split them by image."""
        rows = pending.rows.copy()
        meta = pending.plan.meta
        rows[:, :4] = scale_boxes(rows[:, :4], meta.ratio, meta.pad_xy, meta.orig_wh)
        return detections_by_image(rows, pending.images, self.max_det)

    def _letterbox_values(self, plan: LetterboxPlan, frame_hw: tuple[int, int]) -> dict[str, Any]:
        """`letterbox_inputs` as ``OrtValue`` s where the graph runs, made once per frame shape."""
        import onnxruntime as ort

        key = (frame_hw, plan.meta.input_hw)
        if key not in self._letterbox:
            self._letterbox[key] = {
                # Pad reads its pads on the host on every provider
                name: ort.OrtValue.ortvalue_from_numpy(
                    np.ascontiguousarray(a), "cpu" if name == PADS else self.device_type, self.device_index
                )
                for name, a in letterbox_inputs(plan, frame_hw).items()
            }
        return self._letterbox[key]

    def _upload(self, frames: list[np.ndarray]) -> Any:
        """Stage the frames in a host buffer kept per batch shape and copy them into its ``OrtValue``.

        A static-batch model gets a full batch: the rows after the frames hold the previous
        frames (their boxes are dropped by image index).
        """
        import onnxruntime as ort

        rows = self._batch or len(frames)
        key = (rows, *frames[0].shape)
        if key not in self._frames:
            host = np.zeros(key, np.uint8)
            value = ort.OrtValue.ortvalue_from_numpy(host, self.device_type, self.device_index)
            self._frames[key] = (host, value)
        host, value = self._frames[key]
        for i, frame in enumerate(frames):
            np.copyto(host[i], frame)
        if self.device_type != "cpu":  # a CPU OrtValue wraps ``host`` itself
            value.update_inplace(host)
        return value
