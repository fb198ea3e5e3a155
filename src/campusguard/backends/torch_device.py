"""The device-resident detection path for PyTorch: uint8 frames in, final boxes out.

The host path (`Detector` with the torch backend) letterboxes on the CPU, builds a float32
batch and copies it from pageable memory: on an H200 that measured about 100 ms of host work
and a 157 MB copy for a batch of 32 at 640, and the GPU waited. Here the host only copies the
``uint8`` HWC frames into a pinned staging buffer (a quarter of the float32 bytes); the upload is
non-blocking on its own CUDA stream, and letterbox (resize and pad), BGR to RGB, scaling to 0..1,
FP16, the network and class-aware NMS (torchvision's ``batched_nms``, the same semantics as
`campusguard.ops.postprocess.nms`) run on the device. Only the kept boxes come back, in one copy.

Two staging buffers alternate, so in `DevicePipeline.stream` the upload of batch k+1 overlaps the
compute of batch k. With ``cuda_graphs=True`` the pre-processing and the network for a static
(batch, frame, input) shape are captured once in a CUDA graph and replayed. The same code runs on
ROCm builds of PyTorch (HIP), which expose AMD GPUs through the ``cuda`` device API, and on the
CPU, where the tests check it against the host path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError, require
from campusguard.ops.postprocess import MAX_NMS_CANDIDATES, detections_by_image
from campusguard.ops.preprocess import LetterboxPlan, fit_shape, letterbox_plan, linear_resize_coefficients

if TYPE_CHECKING:
    import torch

__all__ = ["DevicePipeline", "letterbox_tensor", "resize_bilinear_u8", "nms_tensor", "PendingBatch"]


_Coefficients = tuple["torch.Tensor", "torch.Tensor", "torch.Tensor", "torch.Tensor"]
_coefficients: dict[tuple[int, int, str], _Coefficients] = {}


def _linear_coefficients(src: int, dst: int, device: torch.device) -> _Coefficients:
    """`linear_resize_coefficients` as tensors on ``device``, cached."""
    key = (src, dst, str(device))
    if key not in _coefficients:
        require("torch", "torch")
        import torch

        i0, i1, w0, w1 = (
            torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in linear_resize_coefficients(src, dst)
        )
        _coefficients[key] = (i0, i1, w0, w1)
    return _coefficients[key]


def resize_bilinear_u8(x: Any, new_hw: tuple[int, int]) -> Any:
    """Resize a ``(B, C, H, W)`` tensor of 0..255 levels as OpenCV's ``INTER_LINEAR`` resizes ``uint8``.

    Integer arithmetic on the device; on this project's CPUs it gives OpenCV's bytes except on about
    0.1% of pixels, which differ by one level (the off-by-one cases of OpenCV's scalar tail).
    """
    torch = require("torch", "torch")
    x = x.to(torch.int32)
    x0, x1, a0, a1 = _linear_coefficients(x.shape[3], new_hw[1], x.device)
    y0, y1, b0, b1 = _linear_coefficients(x.shape[2], new_hw[0], x.device)
    rows = x.index_select(3, x0) * a0 + x.index_select(3, x1) * a1  # levels * 2**11
    top = (rows.index_select(2, y0) >> 4) * b0[:, None]
    bottom = (rows.index_select(2, y1) >> 4) * b1[:, None]
    return ((top >> 16) + (bottom >> 16) + 2) >> 2


def letterbox_tensor(frames: Any, plan: LetterboxPlan, pad_value: int = 114, dtype: Any = None) -> Any:
    """Letterbox a batch of equally sized frames on their device.

    Args:
        frames: ``(B, H, W, 3) uint8`` BGR tensor.
        plan: the geometry from `letterbox_plan` (the host letterbox uses the same one).
        pad_value: grey level of the padding.
        dtype: output dtype (``torch.float16`` for FP16 models); ``float32`` when ``None``.

    Returns:
        ``(B, 3, input_h, input_w)`` RGB tensor scaled to 0..1; the resize is `resize_bilinear_u8`,
        so pixels differ from the host letterbox by at most one level.
    """
    b, h, w, _ = frames.shape
    new_w, new_h = plan.resized_wh
    input_h, input_w = plan.meta.input_hw
    top, _, left, _ = plan.pad_tblr
    x = frames.permute(0, 3, 1, 2).flip(1)  # (B, 3, H, W) RGB
    if (new_h, new_w) != (h, w):
        x = resize_bilinear_u8(x, (new_h, new_w))
    out = frames.new_full((b, 3, input_h, input_w), pad_value, dtype=dtype or _float32())
    out[:, :, top : top + new_h, left : left + new_w] = x
    return out.mul_(1 / 255.0)


def _float32() -> Any:
    return require("torch", "torch").float32


def nms_tensor(
    pred: Any,
    conf_threshold: float,
    iou_threshold: float,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> tuple[Any, Any, Any, Any]:
    """Decode a raw ``(B, 4+nc, N)`` YOLOv8 head output and run NMS on its device.

    The same steps as `campusguard.ops.postprocess.decode_yolov8`: best class per anchor, the
    confidence filter first, at most `MAX_NMS_CANDIDATES` per image, then NMS per image and class
    (IoU greater than ``iou_threshold`` suppresses).

    Returns:
        ``xyxy (K, 4)``, ``confidence (K,)``, ``class_id (K,)`` and ``image (K,)`` tensors in
        network-input pixels, by image and then by descending confidence.
    """
    torch = require("torch", "torch")
    torchvision = require("torchvision", "torch")
    scores = pred[:, 4:, :].float()
    if classes is not None:
        allowed = torch.zeros(scores.shape[1], dtype=torch.bool, device=scores.device)
        allowed[[c for c in classes if 0 <= c < scores.shape[1]]] = True
        scores = scores.masked_fill(~allowed[None, :, None], float("-inf"))
    best, cls = scores.max(dim=1)  # (B, N)
    image, anchor = (best > conf_threshold).nonzero(as_tuple=True)
    conf = best[image, anchor]
    if image.numel() > MAX_NMS_CANDIDATES and int(torch.bincount(image).max()) > MAX_NMS_CANDIDATES:
        keep_top = torch.cat(
            [
                torch.nonzero(image == i).squeeze(1)[conf[image == i].argsort(descending=True, stable=True)][
                    :MAX_NMS_CANDIDATES
                ]
                for i in range(pred.shape[0])
            ]
        )
        image, anchor, conf = image[keep_top], anchor[keep_top], conf[keep_top]
    xywh = pred[image, :4, anchor].float()
    xyxy = torch.cat([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], dim=1)
    label = cls[image, anchor]
    groups = image if agnostic else image * scores.shape[1] + label
    keep = torchvision.ops.batched_nms(xyxy, conf, groups, iou_threshold)
    keep = keep[torch.argsort(image[keep], stable=True)]  # by image, each still by descending score
    return xyxy[keep], conf[keep], label[keep], image[keep]


@dataclass
class _Staging:
    """A pinned host buffer for one batch shape, and the event that says its last upload is done."""

    host: Any
    upload_done: Any = None


@dataclass
class PendingBatch:
    """A batch whose network output is queued on the device, not yet decoded."""

    pred: Any
    plans: list[LetterboxPlan]


class DevicePipeline:
    """Frames in, `Detections` out, with everything after the ``uint8`` upload on the torch device.

    Args:
        model: the ``torch.nn.Module`` (an Ultralytics ``DetectionModel``), already on ``device``.
        device: its ``torch.device``.
        imgsz_hw: network input size; with ``rect`` each frame shape gets its smallest
            stride-aligned input (as the host path does).
        stride: the model's maximum stride.
        half: the model has FP16 weights; inputs are made FP16 on the device.
        conf, iou, max_det, classes, agnostic: as in `Detector`.
        rect: aspect-matched inputs.
        cuda_graphs: capture pre-processing and the network per static shape (CUDA/HIP only).
    """

    def __init__(
        self,
        model: Any,
        device: Any,
        *,
        imgsz_hw: tuple[int, int] = (640, 640),
        stride: int = 32,
        half: bool = False,
        conf: float = 0.25,
        iou: float = 0.7,
        max_det: int = 300,
        classes: list[int] | None = None,
        agnostic: bool = False,
        rect: bool = True,
        cuda_graphs: bool = False,
    ) -> None:
        self._torch = require("torch", "torch")
        self.model = model
        self.device = device
        self.imgsz_hw = imgsz_hw
        self.stride = stride
        self.half = half
        self.conf, self.iou, self.max_det = conf, iou, max_det
        self.classes, self.agnostic, self.rect = classes, agnostic, rect
        self.on_gpu = device.type == "cuda"
        if cuda_graphs and not self.on_gpu:
            raise InvalidInputError("cuda_graphs needs a CUDA or ROCm device")
        self.cuda_graphs = cuda_graphs
        self._copy_stream = self._torch.cuda.Stream(device=device) if self.on_gpu else None
        self._staging: dict[tuple[int, int, int], list[_Staging]] = {}
        self._turn = 0
        self._graphs: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}

    @classmethod
    def from_detector(cls, detector: Any, cuda_graphs: bool = False) -> DevicePipeline:
        """The device path with a `Detector`'s model, thresholds and input size (torch backend only)."""
        backend = detector.backend
        if getattr(backend, "name", "") != "torch":
            raise InvalidInputError(
                f"the device pipeline runs PyTorch models; this detector uses {getattr(backend, 'name', '?')}"
            )
        return cls(
            backend.model,
            backend.device,
            imgsz_hw=detector.imgsz_hw,
            stride=backend.info.stride,
            half=backend.half,
            conf=detector.conf,
            iou=detector.iou,
            max_det=detector.max_det,
            classes=detector.classes,
            agnostic=detector.agnostic,
            rect=detector.rect,
            cuda_graphs=cuda_graphs,
        )

    @property
    def provider(self) -> str:
        if not self.on_gpu:
            return "torch-device:cpu"
        hip = getattr(self._torch.version, "hip", None)
        return f"torch-device:{'rocm' if hip else 'cuda'}:{self.device.index or 0}"

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return fit_shape(frame_hw, self.imgsz_hw, self.stride) if self.rect else self.imgsz_hw

    def __call__(self, frames: list[np.ndarray]) -> list[Detections]:
        """Detect on equally sized ``(H, W, 3) uint8`` BGR frames; one `Detections` per frame."""
        return self.collect(self.submit(frames))

    def stream(self, batches: Iterable[list[np.ndarray]]) -> Iterator[list[Detections]]:
        """Detect batch after batch, uploading batch k+1 while batch k computes."""
        pending: PendingBatch | None = None
        for frames in batches:
            queued = self.submit(frames)
            if pending is not None:
                yield self.collect(pending)
            pending = queued
        if pending is not None:
            yield self.collect(pending)

    def submit(self, frames: list[np.ndarray]) -> PendingBatch:
        """Stage, upload, pre-process and run the network; returns without waiting for the device."""
        if not frames:
            raise InvalidInputError("no frames to detect on")
        shape = frames[0].shape
        if len(shape) != 3 or shape[2] != 3 or any(f.shape != shape or f.dtype != np.uint8 for f in frames):
            raise InvalidInputError("the device pipeline takes equally sized (H, W, 3) uint8 BGR frames")
        frame_hw = (int(shape[0]), int(shape[1]))
        plan = letterbox_plan(frame_hw, self.input_hw(frame_hw))
        uploaded = self._upload(frames)
        with self._torch.inference_mode():
            pred = self._replay(uploaded, plan) if self.cuda_graphs else self._forward(uploaded, plan)
        return PendingBatch(pred=pred, plans=[plan] * len(frames))

    def collect(self, pending: PendingBatch) -> list[Detections]:
        """NMS on the device, one copy of the kept boxes to the host, boxes mapped to each frame."""
        torch = self._torch
        with torch.inference_mode():
            xyxy, conf, label, image = nms_tensor(pending.pred, self.conf, self.iou, self.classes, self.agnostic)
            meta = pending.plans[0].meta
            xyxy = xyxy - torch.tensor([*meta.pad_xy, *meta.pad_xy], dtype=xyxy.dtype, device=xyxy.device)
            xyxy = xyxy / meta.ratio
            w, h = meta.orig_wh
            xyxy[:, [0, 2]] = xyxy[:, [0, 2]].clamp(0, w)
            xyxy[:, [1, 3]] = xyxy[:, [1, 3]].clamp(0, h)
            host = torch.cat([xyxy, conf[:, None], label[:, None].float(), image[:, None].float()], dim=1).cpu()
        return detections_by_image(host.numpy(), len(pending.plans), self.max_det)

    def _forward(self, uploaded: Any, plan: LetterboxPlan) -> Any:
        x = letterbox_tensor(uploaded, plan, dtype=self._torch.float16 if self.half else None)
        y = self.model(x)
        return y[0] if isinstance(y, (list, tuple)) else y

    def _upload(self, frames: list[np.ndarray]) -> Any:
        """Copy the frames into a pinned buffer and start a non-blocking upload on the copy stream."""
        torch = self._torch
        if not self.on_gpu:
            return torch.from_numpy(np.stack(frames))
        key = (len(frames), *frames[0].shape[:2])
        buffers = self._staging.get(key)
        if buffers is None:
            buffers = [_Staging(torch.empty((*key, 3), dtype=torch.uint8).pin_memory()) for _ in range(2)]
            self._staging[key] = buffers
        self._turn ^= 1
        staging = buffers[self._turn]
        if staging.upload_done is not None:
            staging.upload_done.synchronize()  # its previous upload must have left before we overwrite it
        host = staging.host.numpy()
        for i, frame in enumerate(frames):
            np.copyto(host[i], frame)
        compute = torch.cuda.current_stream(self.device)
        assert self._copy_stream is not None
        with torch.cuda.stream(self._copy_stream):
            uploaded = staging.host.to(self.device, non_blocking=True)
            staging.upload_done = torch.cuda.Event()
            staging.upload_done.record(self._copy_stream)
        compute.wait_event(staging.upload_done)
        uploaded.record_stream(compute)
        return uploaded

    def _replay(self, uploaded: Any, plan: LetterboxPlan) -> Any:
        """Run pre-processing and the network through a CUDA graph captured for this static shape."""
        torch = self._torch
        key = (tuple(uploaded.shape), plan.meta.input_hw, plan.resized_wh, plan.pad_tblr)
        if key not in self._graphs:
            static_in = torch.empty_like(uploaded)
            static_in.copy_(uploaded)
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(3):  # warm-up outside the capture (cuDNN autotuning, allocations)
                    self._forward(static_in, plan)
            torch.cuda.current_stream(self.device).wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                static_out = self._forward(static_in, plan)
            self._graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = self._graphs[key]
        static_in.copy_(uploaded, non_blocking=True)
        graph.replay()
        return static_out.clone()  # the next replay overwrites static_out while this batch is collected
