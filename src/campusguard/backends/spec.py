"""What a backend module declares next to its engine: one `BackendSpec` at module level.

Kept apart from `campusguard.backends.registry` so that a backend module can declare its entry
without importing the registry that finds it (`campusguard.plugins.discover` over the
``*_backend`` modules of `campusguard.backends`).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from campusguard.errors import InvalidInputError

__all__ = ["BackendSpec", "VerdictLine"]

VerdictLine = tuple[str, str, str]
"""One line of ``campusguard doctor``: ``(what, status, detail)``, status ``ready``, ``cpu-only`` or ``unavailable``."""


@dataclass(frozen=True)
class BackendSpec:
    """One inference engine as the rest of the kit sees it; everything about it is here or in its module.

    Attributes:
        name: the name configs and ``--backend`` use.
        label: its name for people in reports (``"ONNX Runtime"``).
        summary: one line for help texts (what it is, what it needs).
        build: ``build(path_or_ref, options) -> Backend`` (`campusguard.backends.loader.load_backend`).
        reads: model kinds it runs: ``onnx`` files, ``pt`` checkpoints, ``arch`` configs, ``xml`` OpenVINO IRs;
            an engine that reads ``onnx`` gets ``.pt`` and architecture models exported to ONNX first.
        suffixes: model file suffixes it is the default for.
        devices: the device names it accepts (``cpu``, ``cuda``, ``rocm``, ``gpu``, ``npu``, ``auto``).
        precisions: the precisions it runs: ``fp32``, ``fp16``, ``bf16``, ``int8``.
        requires: import names it needs (checked without importing them).
        extra: the pip extra that installs them (``None``: the core).
        bench: bench's variants of it: ``(bench name, pipeline, CUDA graphs)``.
        cpu_trial: the precisions ``precision: auto`` times on the CPU (each with the accuracy bar).
        int8_export: the function that quantises an FP32 ONNX file to this engine's INT8 variant, called as
            ``f(src, out, images, calib_hw=...)``; ``None``: it has none.
        int8_tag: the INT8 variant's file tag (``NAME.<tag><int8_suffix>``).
        int8_suffix: the INT8 variant's file suffix (``.onnx``; OpenVINO's IR: ``.xml``).
        formats: the model files it runs, ``(tag, devices, needs)``: ``fp32`` is ``NAME.onnx``, any other tag
            ``NAME.<tag>.onnx`` (or ``NAME-<tag>.onnx``); ``devices`` (comma-separated) where that file pays;
            ``needs`` what making it takes. A precision in `precisions` without a file (BF16) is a compile option.
        verdicts: ``campusguard doctor``'s verdicts on it, called with ``{"providers": [...], "torch": {...} or
            None, "gpus": [...]}``, returning `VerdictLine` tuples; ``None``: one line from `missing`.
        profiler: per-operator times (``campusguard bench profile``), called as
            ``f(detector, batch, runs, warmup) -> ({node: (op_type, total_us, calls)}, runs)``.
        device_pipeline: ``f(detector, cuda_graphs) -> pipeline``: its device-resident pre/post-processing
            (`campusguard.detector.Detector(pipeline="device")`); ``None`` when it has none.
        auto_device: whether ``pipeline="auto"`` takes the device path when the engine runs on a GPU.
        fp16_cast: whether FP16 is a cast at load (``Detector(half=True)``) rather than a file of its own.
        set_threads: ``f(n)``: the engine's process-wide intra-op threads (bench's ``--torch-threads``).
        order: where it is listed (`campusguard.plugins.discover`: lower first).
    """

    name: str
    summary: str
    build: Callable[..., Any]
    label: str = ""
    reads: tuple[str, ...] = ("onnx",)
    suffixes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    precisions: tuple[str, ...] = ("fp32",)
    requires: tuple[str, ...] = ()
    extra: str | None = None
    bench: tuple[tuple[str, str, bool], ...] = ()
    cpu_trial: tuple[str, ...] = ()
    int8_export: Callable[..., Path] | None = None
    int8_tag: str = "int8"
    int8_suffix: str = ".onnx"
    profiler: Callable[..., Any] | None = None
    formats: tuple[tuple[str, str, str], ...] = ()
    verdicts: Callable[[dict[str, Any]], list[VerdictLine]] | None = None
    device_pipeline: Callable[[Any, bool], Any] | None = None
    auto_device: bool = False
    fp16_cast: bool = False
    set_threads: Callable[[int], None] | None = None
    order: int | None = None

    @property
    def title(self) -> str:
        """`label`, else the name."""
        return self.label or self.name

    def missing(self) -> str | None:
        """Why this backend cannot load here (one line naming the extra), or ``None`` when it can."""
        absent = [m for m in self.requires if importlib.util.find_spec(m) is None]
        if not absent:
            return None
        install = f"pip install 'campusguard[{self.extra}]'" if self.extra else f"pip install {' '.join(absent)}"
        return f"the {self.name} backend needs {', '.join(absent)}: {install}"

    @property
    def pipelines(self) -> tuple[str, ...]:
        """The pre/post-processing pipelines it runs (``host``, ``device``), from its bench variants."""
        return tuple(dict.fromkeys(pipeline for _, pipeline, _ in self.bench))

    @property
    def cuda_graphs(self) -> bool:
        """Whether its device pipeline replays CUDA graphs (a bench variant of it does)."""
        return any(graphs for _, _, graphs in self.bench)

    @property
    def available(self) -> bool:
        return self.missing() is None

    def builder(self) -> Callable[..., Any]:
        """The module's ``build`` function."""
        return self.build

    def int8_quantiser(self) -> Callable[..., Path] | None:
        """The function making this engine's INT8 variant, or ``None``."""
        return self.int8_export

    def verdict_function(self) -> Callable[[dict[str, Any]], list[VerdictLine]]:
        """The doctor's verdicts function (`verdicts`)."""
        if self.verdicts is None:
            raise InvalidInputError(f"the {self.name} backend has no doctor verdicts")
        return self.verdicts

    def operator_profiler(self) -> Callable[..., Any]:
        """The per-operator profiler (`profiler`); `InvalidInputError` when it has none."""
        if self.profiler is None:
            raise InvalidInputError(f"the {self.name} backend has no operator profiler")
        return self.profiler
