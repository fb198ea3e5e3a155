"""PyTorch backend through Ultralytics: the reference every other backend is compared with.

ROCm builds of PyTorch expose AMD GPUs through the ``cuda`` device API; they are told
apart by ``torch.version.hip``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.backends.devices import DeviceSpec, describe_devices, parse_device
from campusguard.errors import DeviceError, ModelLoadError, require
from campusguard.models.info import DEFAULT_IMGSZ, info_from_ultralytics

__all__ = ["TorchBackend", "torch_device", "load_ultralytics_model", "ARCHITECTURES", "build_architecture"]

ARCHITECTURES = tuple(f"yolov8{s}" for s in "nsmlx") + tuple(f"yolo11{s}" for s in "nsmlx")


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


def build_architecture(name: str, nc: int = 80, seed: int = 0) -> Any:
    """Build an Ultralytics ``DetectionModel`` from its architecture config with random weights."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    torch = require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(seed)
    model = DetectionModel(cfg=f"{name}.yaml", nc=nc, verbose=False)
    from campusguard.data_names import COCO_NAMES

    model.names = dict(enumerate(COCO_NAMES[:nc]))
    model.args = {"imgsz": DEFAULT_IMGSZ}  # type: ignore[assignment]
    return model


def load_ultralytics_model(path: str | Path) -> Any:
    """Load an Ultralytics detection checkpoint; raise `ModelLoadError` for anything else."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import load_checkpoint

    path = Path(path)
    if not path.is_file():
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
        model: a ``.pt`` path or an architecture name (``yolov8n`` ... ``yolo11x``).
        device: ``auto``, ``cpu``, ``cuda:N`` or ``rocm:N``.
        half: FP16 weights and inputs (GPU only).
    """

    name = "torch"

    def __init__(
        self, model: str | Path, device: str = "auto", half: bool = False, allow_cpu_fallback: bool = False
    ) -> None:
        torch = require("torch", "torch")
        self._torch = torch
        random = str(model) in ARCHITECTURES
        net = build_architecture(str(model)) if random else load_ultralytics_model(model)
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
