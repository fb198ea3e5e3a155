"""Where the ONNX exports of ``.pt`` and architecture models are cached, and at which size they are made.

Exports are cached beside the checkpoint (or in `campusguard.cache.cache_dir`) under a key of image
size, batch, dynamic and precision; `campusguard.backends.loader.load_backend` makes them on first use.
"""

from __future__ import annotations

import os
from pathlib import Path

from campusguard.cache import cache_dir, file_key
from campusguard.models.info import DEFAULT_IMGSZ
from campusguard.models.resolve import ModelRef, read_model_info

__all__ = ["cache_dir", "export_size", "exported_onnx_path"]


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


def export_size(ref: ModelRef, imgsz_hw: tuple[int, int] | None) -> tuple[int, int]:
    """The size to export at: the one asked for, else the one the model was trained at, else 640."""
    if imgsz_hw is not None:
        return imgsz_hw
    return read_model_info(ref).imgsz_hw or (DEFAULT_IMGSZ, DEFAULT_IMGSZ)
