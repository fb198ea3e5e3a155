"""PyTorch backend through Ultralytics: the reference every other backend is compared with.

ROCm builds of PyTorch expose AMD GPUs through the ``cuda`` device API; they are told
apart by ``torch.version.hip``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from campusguard.backends.devices import DeviceSpec, describe_devices, parse_device
from campusguard.errors import DeviceError, InvalidInputError, ModelLoadError, require
from campusguard.models.families import architecture_config, find_architecture, official_weights_name
from campusguard.models.info import DEFAULT_IMGSZ, info_from_ultralytics

if TYPE_CHECKING:
    from ultralytics.nn.tasks import DetectionModel

__all__ = ["TorchBackend", "torch_device", "load_ultralytics_model", "build_architecture", "select_head"]


def torch_device(spec: DeviceSpec, allow_cpu_fallback: bool = False) -> Any:
    """The ``torch.device`` for a device spec, checked against what this PyTorch build sees."""
    torch = require("torch", "torch")
    if spec.kind == "cpu" or (spec.kind == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    is_hip = bool(getattr(torch.version, "hip", None))
    wanted_hip = spec.kind == "rocm"
    if spec.kind == "auto":
        return torch.device("cuda", 0)
    ok = torch.cuda.is_available() and spec.index < torch.cuda.device_count() and is_hip == wanted_hip
    if not ok:
        build = (
            f"HIP {torch.version.hip}"
            if is_hip
            else (f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU-only")
        )
        msg = f"invalid device ordinal: {spec} requested, PyTorch ({build} build) sees {torch.cuda.device_count()} GPU(s); {describe_devices()}"
        if allow_cpu_fallback:
            import logging

            logging.getLogger(__name__).warning("FALLING BACK TO CPU: %s", msg)
            return torch.device("cpu")
        raise DeviceError(msg)
    return torch.device("cuda", spec.index)


def select_head(net: Any, end_to_end: bool | None = None) -> bool:
    """Choose the head an Ultralytics model runs, before it is fused; return whether it is end-to-end.

    ``None`` keeps the model's own head: the one-to-one (NMS-free) head when it has one, as
    YOLO26 checkpoints do. ``False`` runs the classic one-to-many head (NMS outside the model).

    Raises:
        InvalidInputError: ``end_to_end=True`` for a model without a one-to-one head.
    """
    head = net.model[-1]
    has_one2one = getattr(head, "one2one_cv2", None) is not None
    has_one2many = getattr(head, "cv2", None) is not None
    if end_to_end is None:
        end_to_end = has_one2one
    if end_to_end and not has_one2one:
        raise InvalidInputError("this model has no end-to-end (one-to-one) head; it needs NMS")
    if not end_to_end and not has_one2many:
        raise InvalidInputError("this model was fused to its end-to-end head; the classic head is gone")
    if hasattr(head, "end2end"):
        net.end2end = end_to_end
    return end_to_end


def build_architecture(name: str, nc: int = 80, seed: int = 0) -> DetectionModel:
    """Build an Ultralytics ``DetectionModel`` from its architecture config with random weights.

    ``name`` is any `campusguard.models.families` architecture (``yolo26n`` or ``yolo26n.yaml``).
    """
    arch = find_architecture(name)
    if arch is None:
        raise InvalidInputError(f"unknown architecture {name!r}")
    os.environ.setdefault("YOLO_OFFLINE", "1")
    torch = require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(seed)
    model = DetectionModel(cfg=arch.yaml, nc=nc, verbose=False)
    from campusguard.data_names import COCO_NAMES
    from campusguard.models.ultralytics_env import set_model_args

    model.names = dict(enumerate(COCO_NAMES[:nc]))
    set_model_args(model, {"imgsz": DEFAULT_IMGSZ})
    return model


def load_ultralytics_model(path: str | Path) -> Any:
    """Load an Ultralytics detection checkpoint; raise `ModelLoadError` for anything else."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import load_checkpoint

    path = Path(path)
    if not path.is_file():
        if (official := official_weights_name(path)) is not None:
            raise ModelLoadError(
                f"{path}: not a local file; official weights are fetched by name through Detector({official!r}) "
                f"or `campusguard models pull {official}`"
            )
        raise ModelLoadError(f"{path}: model file not found")
    try:
        model, _ = load_checkpoint(str(path), device="cpu", fuse=False)
    except Exception as exc:
        raise ModelLoadError(
            f"{path}: not an Ultralytics YOLO checkpoint ({type(exc).__name__}: {str(exc)[:160]})"
        ) from exc
    if getattr(model, "task", "detect") != "detect" or not hasattr(model, "stride"):
        raise ModelLoadError(f"{path}: checkpoint is not a YOLO detection model (task {getattr(model, 'task', '?')})")
    return model


class TorchBackend:
    """Run an Ultralytics PyTorch detection model.

    Args:
        model: a ``.pt`` path or an architecture config (``yolov8n.yaml`` ... ``yolo26x.yaml``,
            RANDOM weights); official weights by name are resolved to their cached ``.pt`` first
            (`campusguard.models.registry.load_backend`).
        device: ``auto``, ``cpu``, ``cuda:N`` or ``rocm:N``.
        half: FP16 weights and inputs (GPU only).
        end_to_end: `select_head`: ``None`` runs the model's own head (YOLO26: end-to-end,
            ``(B, max_det, 6)``), ``False`` the classic head.
    """

    name = "torch"

    def __init__(
        self,
        model: str | Path,
        device: str = "auto",
        half: bool = False,
        allow_cpu_fallback: bool = False,
        end_to_end: bool | None = None,
    ) -> None:
        torch = require("torch", "torch")
        self._torch = torch
        random = architecture_config(model) is not None
        net = build_architecture(str(model)) if random else load_ultralytics_model(model)
        select_head(net, end_to_end)
        spec = parse_device(device)
        self.device = torch_device(spec, allow_cpu_fallback)
        if half and self.device.type == "cpu":
            raise DeviceError("FP16 (half) needs a GPU; the PyTorch backend is on the CPU")
        net = net.float().fuse(verbose=False) if hasattr(net, "fuse") else net.float()
        net.eval()
        for p in net.parameters():
            p.requires_grad_(False)
        self.half = half
        self.model = net.to(self.device).half() if half else net.to(self.device)
        self.info = info_from_ultralytics(
            net, source=str(model), random_weights=random, precision="fp16" if half else "fp32"
        )

    @property
    def provider(self) -> str:
        if self.device.type == "cpu":
            return "torch:cpu"
        hip = getattr(self._torch.version, "hip", None)
        return f"torch:{'rocm' if hip else 'cuda'}:{self.device.index or 0}"

    def infer(self, batch: np.ndarray) -> np.ndarray:
        torch = self._torch
        with torch.inference_mode():
            x = torch.from_numpy(batch).to(self.device, non_blocking=True)
            x = x.half() if self.half else x
            y = self.model(x)
            y = y[0] if isinstance(y, (list, tuple)) else y
            return y.float().cpu().numpy()
