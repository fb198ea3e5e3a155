"""Training device lists: ``cpu``, ``0`` or ``0,1,2,3``, checked against the GPUs PyTorch sees.

Training runs in PyTorch, so PyTorch's own count is the truth: on ROCm builds
``torch.cuda`` reports AMD GPUs (HIP) and DDP's ``"nccl"`` backend is RCCL.
"""

from __future__ import annotations

import re

from campusguard.errors import DeviceError, InvalidInputError, require

__all__ = ["parse_train_device", "visible_torch_gpus"]

_LIST_RE = re.compile(r"^\d+(,\d+)*$")


def visible_torch_gpus() -> list[str]:
    """Names of the GPUs PyTorch can use, index order (after ``*_VISIBLE_DEVICES``)."""
    require("torch", "torch")
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def parse_train_device(device: str | int | None, gpus: list[str] | None = None) -> list[int] | None:
    """Parse and check a training device.

    Args:
        device: ``"cpu"``, ``"auto"``/``None`` (GPU 0 when present, else CPU), ``"0"``,
            ``"0,1"``, ``"cuda:0"``, ``"rocm:1"``.
        gpus: GPU names to check against; default: `visible_torch_gpus()`.

    Returns:
        ``None`` for the CPU, else the GPU indices (one index: single device; several: DDP).

    Raises:
        InvalidInputError: malformed device text or a repeated index.
        DeviceError: a named GPU does not exist; the message lists those that do.
    """
    text = "auto" if device is None else str(device).strip().lower().replace(" ", "")
    for prefix in ("cuda:", "rocm:", "gpu:"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if text in ("cuda", "rocm", "gpu"):
        text = "0"
    if text == "cpu":
        return None
    available = visible_torch_gpus() if gpus is None else gpus
    if text == "auto":
        return [0] if available else None
    if not _LIST_RE.match(text):
        raise InvalidInputError(f"device {device!r} is not cpu, auto, a GPU index (0) or a list of GPU indices (0,1)")
    indices = [int(i) for i in text.split(",")]
    if len(set(indices)) != len(indices):
        raise InvalidInputError(f"device list {device!r} repeats a GPU")
    missing = [i for i in indices if i >= len(available)]
    if missing:
        have = ", ".join(f"{i} ({n})" for i, n in enumerate(available)) if available else "none (CPU only)"
        raise DeviceError(
            f"device {device!r} names GPU {', '.join(map(str, missing))} but PyTorch sees: {have}; "
            "check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES or use --device cpu"
        )
    return indices
