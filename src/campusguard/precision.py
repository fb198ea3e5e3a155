"""Which precision a CPU should run: INT8 where it has VNNI or AMX integer kernels, else FP32.

Without VNNI the u8s8 INT8 kernels of ONNX Runtime are emulated with wider AVX2 instructions and
often lose to FP32; with VNNI (``avx512_vnni`` or ``avx_vnni``) or AMX (``amx_int8``) they win.
An INT8 *variant* of an ONNX model is a file next to it: ``NAME-int8.onnx`` (how the bundled
model ships) or ``NAME.int8.onnx`` (what ``campusguard export --int8`` writes).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from campusguard.errors import ModelLoadError

__all__ = ["INT8_CPU_FLAGS", "PrecisionChoice", "choose_precision", "cpu_prefers_int8", "int8_variant"]

INT8_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
Precision = Literal["auto", "fp32", "int8"]


def cpu_prefers_int8(flags: Iterable[str]) -> bool:
    """Whether a CPU with these ``/proc/cpuinfo`` flags has fast INT8 dot products (VNNI or AMX)."""
    return any(f in INT8_CPU_FLAGS for f in flags)


def int8_variant(model: Path) -> Path | None:
    """The INT8 file shipped next to ONNX ``model`` (``NAME-int8.onnx`` or ``NAME.int8.onnx``), if any."""
    if model.suffix != ".onnx":
        return None
    for name in (f"{model.stem}-int8.onnx", f"{model.stem}.int8.onnx"):
        candidate = model.with_name(name)
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True)
class PrecisionChoice:
    """The model file to load and why: ``precision`` is ``"fp32"`` or ``"int8"``."""

    model: Path
    precision: Literal["fp32", "int8"]
    reason: str


def choose_precision(model: Path, requested: Precision, cpu_flags: Iterable[str]) -> PrecisionChoice:
    """Pick FP32 ``model`` or its INT8 variant.

    ``auto``: INT8 when the CPU has VNNI/AMX and the variant exists, else FP32. ``int8``: the
    variant, a `ModelLoadError` when there is none. ``fp32``: ``model`` itself.
    """
    variant = int8_variant(model)
    if requested == "fp32":
        return PrecisionChoice(model, "fp32", "requested")
    if requested == "int8":
        if variant is None:
            raise ModelLoadError(
                f"{model.name} has no INT8 variant (looked for {model.stem}-int8.onnx and {model.stem}.int8.onnx next to it); "
                "make one with `campusguard export MODEL --int8 --data IMAGES`"
            )
        return PrecisionChoice(variant, "int8", "requested")
    flags = list(cpu_flags)
    if not cpu_prefers_int8(flags):
        return PrecisionChoice(model, "fp32", "this CPU has no VNNI/AMX INT8 instructions")
    if variant is None:
        return PrecisionChoice(model, "fp32", f"the CPU has VNNI/AMX but {model.name} has no INT8 variant")
    return PrecisionChoice(variant, "int8", "the CPU has VNNI/AMX and the model an INT8 variant")
