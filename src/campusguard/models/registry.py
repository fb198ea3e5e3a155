"""Turn a model reference into a ready backend, exporting ``.pt`` and architecture models to ONNX once.

References are resolved by `campusguard.models.resolve.parse_model_ref`; exports are cached
beside the checkpoint (or in `campusguard.cache.cache_dir`) under a key of image size, batch, dynamic and precision.
"""

from __future__ import annotations

import os
from pathlib import Path

from campusguard.backends.base import Backend, backend_for
from campusguard.cache import cache_dir, file_key
from campusguard.errors import InvalidInputError
from campusguard.models.export import export_onnx
from campusguard.models.info import DEFAULT_IMGSZ
from campusguard.models.resolve import ModelRef, parse_model_ref, read_model_info

__all__ = ["cache_dir", "load_backend", "exported_onnx_path"]


def exported_onnx_path(
    ref: ModelRef,
    imgsz_hw: tuple[int, int],
    batch: int,
    dynamic: bool,
    precision: str = "fp32",
    end_to_end: bool | None = None,
) -> Path:
    """Cache path of the ONNX export of a ``.pt`` or architecture model (``-classic``: the classic head asked for).

    Beside a checkpoint in a writable folder; else in `campusguard.cache.cache_dir`, named by the
    checkpoint's `file_key` (resolved path, size and mtime), so every process finds the same file.
    """
    h, w = imgsz_hw
    tag = f"{h}x{w}-b{'dyn' if dynamic else batch}-{'dynamic' if dynamic else 'static'}-{precision}"
    tag += "-classic" if end_to_end is False else ""
    if ref.kind == "arch":
        return cache_dir() / f"{ref.name}-random.{tag}.onnx"
    assert ref.path is not None
    beside = ref.path.with_name(f"{ref.path.stem}.{tag}.onnx")
    if os.access(ref.path.parent, os.W_OK):
        return beside
    return cache_dir() / f"{ref.path.stem}-{file_key(ref.path)}.{tag}.onnx"


def _export_size(ref: ModelRef, imgsz_hw: tuple[int, int] | None) -> tuple[int, int]:
    """The size to export at: the one asked for, else the one the model was trained at, else 640."""
    if imgsz_hw is not None:
        return imgsz_hw
    return read_model_info(ref).imgsz_hw or (DEFAULT_IMGSZ, DEFAULT_IMGSZ)


def load_backend(
    model: str | Path | ModelRef | None,
    backend: str | None = None,
    device: str = "auto",
    imgsz_hw: tuple[int, int] | None = None,
    batch: int = 1,
    dynamic: bool = False,
    half: bool = False,
    allow_cpu_fallback: bool = False,
    tensorrt: bool = False,
    intra_op_threads: int = 0,
    allow_spinning: bool = True,
    end_to_end: bool | None = None,
) -> Backend:
    """Load ``model`` on ``device`` with the named backend (default: ONNX Runtime).

    ``.onnx`` files and architecture configs default to ONNX Runtime; ``.pt`` files and official
    weights default to ONNX Runtime too (exported once and cached) unless ``backend="torch"``. ``imgsz_hw`` is
    the export size of ``.pt`` and architecture models (``None``: the size they were trained at);
    ``end_to_end`` their head (``None``: the model's own; ``False``: the classic head, for YOLO26).
    """
    ref = parse_model_ref(model, torch=backend == "torch")
    if backend is None:
        name = "onnxruntime"
    elif ref.kind == "onnx":
        name = backend_for(ref.path, backend)  # type: ignore[arg-type]
    else:
        name = backend_for(Path("x.onnx"), backend)
    if name == "torch":
        if ref.kind == "onnx":
            raise InvalidInputError(f"{ref.path}: the torch backend needs a .pt checkpoint or an architecture name")
        from campusguard.backends.torch_backend import TorchBackend

        target = str(ref) if ref.kind == "arch" else ref.path  # "yolov8n.yaml": random weights
        assert target is not None
        return TorchBackend(
            target, device=device, half=half, allow_cpu_fallback=allow_cpu_fallback, end_to_end=end_to_end
        )

    from campusguard.backends.onnxruntime_backend import OnnxRuntimeBackend

    if ref.kind == "onnx":
        path = ref.path
    else:
        precision = "fp16" if half else "fp32"
        size = _export_size(ref, imgsz_hw)
        path = exported_onnx_path(ref, size, batch, dynamic, precision, end_to_end)
        if not path.is_file():
            export_onnx(ref, path, imgsz_hw=size, batch=batch, dynamic=dynamic, half=half, end_to_end=end_to_end)
    assert path is not None  # parse_model_ref always sets the path of an .onnx reference
    return OnnxRuntimeBackend(
        path,
        device=device,
        allow_cpu_fallback=allow_cpu_fallback,
        tensorrt=tensorrt,
        intra_op_threads=intra_op_threads,
        allow_spinning=allow_spinning,
    )
