"""The backend protocol and the registry that picks a backend from a model file.

A backend takes a ``(B, 3, H, W) float32`` batch and returns the raw head output; pre- and
post-processing are shared code outside every backend. What a model tells about itself is
`campusguard.models.info.ModelInfo`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from campusguard.errors import InvalidInputError
from campusguard.models.info import ModelInfo

__all__ = ["Backend", "BACKENDS_BY_SUFFIX", "backend_for"]


@runtime_checkable
class Backend(Protocol):
    """Raw arrays in, raw arrays out."""

    name: str
    info: ModelInfo

    @property
    def provider(self) -> str:
        """The execution provider or device really in use, e.g. ``CUDAExecutionProvider:0``."""
        ...

    def infer(self, batch: np.ndarray) -> np.ndarray:
        """Run the network on a ``(B, 3, H, W) float32`` batch; return the ``(B, 4+nc, N)`` head output."""
        ...


BACKENDS_BY_SUFFIX: dict[str, str] = {".onnx": "onnxruntime", ".pt": "torch"}


def backend_for(model_path: Path, backend: str | None) -> str:
    """Choose the backend name for a model file: the explicit ``backend`` or by file suffix."""
    if backend is not None:
        if backend not in ("onnxruntime", "torch"):
            raise InvalidInputError(f"unknown backend {backend!r}; choose onnxruntime or torch")
        return backend
    try:
        return BACKENDS_BY_SUFFIX[model_path.suffix.lower()]
    except KeyError:
        raise InvalidInputError(f"{model_path}: unknown model format {model_path.suffix!r}; use .onnx or .pt") from None
