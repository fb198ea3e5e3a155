"""PyTorch backend through Ultralytics: the reference every other backend is compared with.

ROCm builds of PyTorch expose AMD GPUs through the ``cuda`` device API; they are told
apart by ``torch.version.hip``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from campusguard.backends.base import LoadOptions
from campusguard.backends.devices import DeviceSpec, describe_devices, parse_device
from campusguard.backends.spec import BackendSpec, VerdictLine
from campusguard.errors import DeviceError, require
from campusguard.models.families import architecture_config
from campusguard.models.info import info_from_ultralytics
from campusguard.models.resolve import ModelRef
from campusguard.models.ultralytics_net import build_architecture, load_ultralytics_model, select_head

__all__ = ["TorchBackend", "build", "torch_device", "load_ultralytics_model", "build_architecture", "select_head"]


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


class TorchBackend:
    """Run an Ultralytics PyTorch detection model.

    Args:
        model: a ``.pt`` path or an architecture config (``yolov8n.yaml`` ... ``yolo26x.yaml``,
            RANDOM weights); official weights by name are resolved to their cached ``.pt`` first
            (`campusguard.backends.loader.load_backend`).
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


def build(ref: ModelRef, options: LoadOptions) -> TorchBackend:
    """The registry's builder (`campusguard.backends.registry`): a checkpoint or architecture on PyTorch."""
    target = str(ref) if ref.kind == "arch" else ref.path  # "yolov8n.yaml": random weights
    assert target is not None
    return TorchBackend(
        target,
        device=options.device,
        half=options.half,
        allow_cpu_fallback=options.allow_cpu_fallback,
        end_to_end=options.end_to_end,
    )


def device_pipeline(detector: Any, cuda_graphs: bool = False) -> Any:
    """The device-resident path (`campusguard.backends.torch_device.DevicePipeline`) of a `Detector`."""
    from campusguard.backends.torch_device import DevicePipeline

    return DevicePipeline.from_detector(detector, cuda_graphs=cuda_graphs)


def set_threads(threads: int) -> None:
    """PyTorch's intra-op threads for this process (bench's ``--torch-threads``)."""
    torch: Any = require("torch", "torch")
    torch.set_num_threads(threads)


def profile_operators(
    detector: Any, batch: np.ndarray, runs: int, warmup: int
) -> tuple[dict[str, tuple[str, float, int]], int]:
    """PyTorch's profiler over the detector's model: self time per ``aten::`` operator and input shape."""
    torch: Any = require("torch", "torch")
    from torch.profiler import ProfilerActivity, profile

    backend = detector.backend
    for _ in range(warmup):
        backend.infer(batch)
    activities = [ProfilerActivity.CPU]
    gpu = backend.device.type == "cuda"
    if gpu:
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(runs):
            backend.infer(batch)
        if gpu:
            torch.cuda.synchronize()
    nodes: dict[str, tuple[str, float, int]] = {}
    for e in prof.key_averages(group_by_input_shape=True):
        us = float(getattr(e, "self_device_time_total", 0.0) if gpu else e.self_cpu_time_total)
        if us <= 0 or not str(e.key).startswith("aten::"):
            continue
        shapes = str(getattr(e, "input_shapes", ""))[:80]
        nodes[f"{e.key} {shapes}"] = (str(e.key), us, int(e.count))
    return nodes, runs


def verdicts(context: dict[str, Any]) -> list[VerdictLine]:
    """``campusguard doctor``'s verdict on PyTorch: ready on a GPU, CPU-only, or why it is unavailable."""
    torch_info: dict[str, Any] | None = context["torch"]
    if torch_info is None:
        return [("PyTorch", "unavailable", "not installed: pip install 'campusguard[torch]'")]
    if "error" in torch_info:
        return [("PyTorch", "unavailable", torch_info["error"])]
    if torch_info["gpu_available"]:
        where = f"PyTorch on {'ROCm' if torch_info['hip'] else 'CUDA'}"
        return [(where, "ready", f"{torch_info['device_count']} device(s), {torch_info['build']}")]
    why = f"{torch_info['build']} build sees no GPU" if context["gpus"] else "no GPU found"
    return [("PyTorch", "cpu-only", why)]


SPEC = BackendSpec(
    name="torch",
    label="PyTorch",
    summary="PyTorch through Ultralytics: .pt checkpoints and architecture names (the torch extra)",
    build=build,
    reads=("pt", "arch"),
    suffixes=(".pt",),
    devices=("auto", "cpu", "cuda", "rocm"),
    precisions=("fp32", "fp16"),
    requires=("torch", "ultralytics"),
    extra="torch",
    bench=(("torch", "host", False), ("torch-device", "device", False), ("torch-graphs", "device", True)),
    profiler=profile_operators,
    verdicts=verdicts,
    device_pipeline=device_pipeline,
    auto_device=True,
    fp16_cast=True,
    set_threads=set_threads,
    order=20,
)
"""This engine's entry in the backend registry (`campusguard.backends.registry`, found by discovery)."""
