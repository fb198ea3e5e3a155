"""The backend registry: one entry per inference engine, and every list of backends derived from it.

An entry says what a backend is (name, one-line summary), what it reads (model kinds and the file
suffixes it is the default for), where it runs (devices, as the engine names them), in which
precisions, what it needs installed (import names and the pip extra), how bench runs it (its
pipeline variants), whether ``precision: auto`` times it on the CPU, and where its code lives: the
module whose ``build(path_or_ref, options)`` makes the `campusguard.backends.base.Backend`
(`campusguard.backends.loader.load_backend`), and optionally a function that quantises an FP32
ONNX file to the backend's INT8 variant (``campusguard export --int8 --backend NAME``).

The config literal (`campusguard.app.config.detector.DetectorConfig.backend`), the CLI choices and
help of ``predict``, ``bench`` and ``export``, bench's and profile's lists, the export formats table
(`FORMATS`), ``campusguard doctor``'s verdicts and the engine trial of
``precision: auto`` all read `BACKENDS`. Adding a backend is its module plus one line in `_ENTRIES`
(``tests/test_architecture.py`` checks that nothing else names backends by hand).

This module imports no engine: availability is `importlib.util.find_spec`, so the config and the CLI
stay cheap to import.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from campusguard.errors import InvalidInputError

__all__ = [
    "BACKENDS",
    "BACKEND_NAMES",
    "BENCH_VARIANTS",
    "BackendName",
    "BackendSpec",
    "DEFAULT_BACKEND",
    "FORMATS",
    "PRECISIONS",
    "backend_for",
    "backend_help",
    "backend_spec",
    "choices",
]


@dataclass(frozen=True)
class BackendSpec:
    """One inference engine as the rest of the kit sees it.

    Attributes:
        name: the name configs and ``--backend`` use.
        summary: one line for help texts (what it is, what it needs).
        module: the module with ``build(path_or_ref, options) -> Backend``.
        reads: model kinds it runs: ``onnx`` files, ``pt`` checkpoints, ``arch`` configs, ``xml`` OpenVINO IRs;
            an engine that reads ``onnx`` gets ``.pt`` and architecture models exported to ONNX first.
        suffixes: model file suffixes it is the default for.
        devices: the device names it accepts (``cpu``, ``cuda``, ``rocm``, ``gpu``, ``npu``, ``auto``).
        precisions: the precisions it runs: ``fp32``, ``fp16``, ``bf16``, ``int8``.
        requires: import names it needs (checked without importing them).
        extra: the pip extra that installs them (``None``: the core).
        bench: bench's variants of it: ``(bench name, pipeline, CUDA graphs)``.
        cpu_trial: the precisions ``precision: auto`` times on the CPU (each with the accuracy bar).
        int8_export: ``"module:function"`` that quantises an FP32 ONNX file to this engine's INT8 variant,
            called as ``f(src, out, images, calib_hw=...)``; ``None``: it has none.
        int8_tag: the INT8 variant's file tag (``NAME.<tag><int8_suffix>``).
        int8_suffix: the INT8 variant's file suffix (``.onnx``; OpenVINO's IR: ``.xml``).
        formats: the model files it runs, ``(tag, devices, needs)``: ``fp32`` is ``NAME.onnx``, any other tag
            ``NAME.<tag>.onnx`` (or ``NAME-<tag>.onnx``); ``devices`` (comma-separated) where that file pays;
            ``needs`` what making it takes. A precision in `precisions` without a file (BF16) is a compile option.
        verdicts: ``"module:function"`` giving ``campusguard doctor``'s verdicts on it, called with
            ``{"providers": [...], "torch": {...} or None, "gpus": [...]}``, returning ``(name, status, detail)``
            tuples or `campusguard.doctor.Verdict`; ``None``: one line from `missing`.
        profiler: ``"module:function"`` giving per-operator times (``campusguard bench profile``), called as
            ``f(detector, batch, runs, warmup) -> ({node: (op_type, total_us, calls)}, runs)``.
    """

    name: str
    summary: str
    module: str
    reads: tuple[str, ...] = ("onnx",)
    suffixes: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("cpu",)
    precisions: tuple[str, ...] = ("fp32",)
    requires: tuple[str, ...] = ()
    extra: str | None = None
    bench: tuple[tuple[str, str, bool], ...] = ()
    cpu_trial: tuple[str, ...] = ()
    int8_export: str | None = None
    int8_tag: str = "int8"
    int8_suffix: str = ".onnx"
    profiler: str | None = None
    formats: tuple[tuple[str, str, str], ...] = ()
    verdicts: str | None = None

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
    def available(self) -> bool:
        return self.missing() is None

    def builder(self) -> Callable[..., Any]:
        """The module's ``build`` function (imports the module, not the engine)."""
        return importlib.import_module(self.module).build

    def int8_quantiser(self) -> Callable[..., Path] | None:
        """The function making this engine's INT8 variant, or ``None``."""
        return None if self.int8_export is None else _resolve(self.int8_export)

    def verdict_function(self) -> Callable[[dict[str, Any]], list[Any]]:
        """The doctor's verdicts function (`verdicts`)."""
        if self.verdicts is None:
            raise InvalidInputError(f"the {self.name} backend has no doctor verdicts")
        return _resolve(self.verdicts)

    def operator_profiler(self) -> Callable[..., Any]:
        """The per-operator profiler (`profiler`); `InvalidInputError` when it has none."""
        if self.profiler is None:
            raise InvalidInputError(f"the {self.name} backend has no operator profiler")
        return _resolve(self.profiler)


def _resolve(target: str) -> Any:
    """``"package.module:name"`` -> that attribute (imports the module)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


_ENTRIES: tuple[BackendSpec, ...] = (
    BackendSpec(
        name="onnxruntime",
        summary="ONNX Runtime: the default for every model (CPU, CUDA/TensorRT, MIGraphX)",
        module="campusguard.backends.onnxruntime_backend",
        reads=("onnx",),
        suffixes=(".onnx",),
        devices=("auto", "cpu", "cuda", "rocm"),
        precisions=("fp32", "fp16", "int8"),
        requires=("onnxruntime",),
        bench=(("onnxruntime", "host", False), ("onnxruntime-device", "device", False)),
        cpu_trial=("fp32", "int8"),
        int8_export="campusguard.models.export:quantize_int8",
        int8_tag="int8",
        profiler="campusguard.bench.profile:_ort_profile",
        verdicts="campusguard.doctor:onnxruntime_verdicts",
        formats=(
            ("fp32", "cpu,cuda,rocm", ""),
            ("fp16", "cuda,rocm", "a GPU provider for speed (runs on CPU but slower)"),
            ("int8", "cpu", "calibration images (--data); QOperator, ONNX Runtime's CPU kernels"),
        ),
    ),
    BackendSpec(
        name="torch",
        summary="PyTorch through Ultralytics: .pt checkpoints and architecture names (the torch extra)",
        module="campusguard.backends.torch_backend",
        reads=("pt", "arch"),
        suffixes=(".pt",),
        devices=("auto", "cpu", "cuda", "rocm"),
        precisions=("fp32", "fp16"),
        requires=("torch", "ultralytics"),
        extra="torch",
        bench=(("torch", "host", False), ("torch-device", "device", False), ("torch-graphs", "device", True)),
        profiler="campusguard.bench.profile:_torch_profile",
        verdicts="campusguard.doctor:torch_verdicts",
    ),
    BackendSpec(
        name="openvino",
        summary="OpenVINO: Intel CPUs, iGPUs and NPUs; FP32, BF16 and NNCF INT8 (the openvino extra)",
        module="campusguard.backends.openvino_backend",
        reads=("onnx", "xml"),
        suffixes=(".xml",),
        devices=("auto", "cpu", "gpu", "npu"),
        precisions=("fp32", "bf16", "int8"),
        requires=("openvino",),
        extra="openvino",
        bench=(("openvino", "host", False),),
        cpu_trial=("fp32", "bf16", "int8ov"),
        int8_export="campusguard.backends.openvino_backend:quantize_int8_nncf",
        int8_tag="int8ov",
        int8_suffix=".xml",
        profiler="campusguard.bench.profile:_openvino_profile",
        verdicts="campusguard.backends.openvino_backend:verdicts",
        formats=(
            ("fp32", "cpu,gpu,npu", ""),
            ("int8ov", "cpu,gpu,npu", "calibration images (--data); NNCF, an OpenVINO IR (.xml and .bin)"),
        ),
    ),
)

BACKENDS: dict[str, BackendSpec] = {spec.name: spec for spec in _ENTRIES}
BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
DEFAULT_BACKEND = "onnxruntime"
PRECISIONS: tuple[str, ...] = tuple(dict.fromkeys(p for spec in _ENTRIES for p in spec.precisions))
"""Every precision some backend runs."""
BENCH_VARIANTS: dict[str, tuple[str, str, bool]] = {
    variant: (spec.name, pipeline, graphs) for spec in _ENTRIES for variant, pipeline, graphs in spec.bench
}
"""bench name -> (backend, pipeline, CUDA graphs): every variant ``campusguard bench --backends`` takes."""


def _formats() -> dict[str, dict[str, str]]:
    table: dict[str, dict[str, str]] = {}
    for spec in _ENTRIES:
        for tag, devices, needs in spec.formats:
            suffix = ".onnx" if tag == "fp32" else f".{tag}{spec.int8_suffix if tag == spec.int8_tag else '.onnx'}"
            row = table.setdefault(tag, {"suffix": suffix, "needs": needs, "devices": "", "backends": ""})
            row["devices"] = ",".join(dict.fromkeys([*filter(None, row["devices"].split(",")), *devices.split(",")]))
            row["backends"] = ",".join(filter(None, [row["backends"], spec.name]))
            row["needs"] = row["needs"] or needs
    return table


FORMATS: dict[str, dict[str, str]] = _formats()
"""Model file formats (precision tags) -> suffix, what making one needs, the devices where it pays and the
backends that run it: the union of every entry's ``formats`` (export, loading, bench and the trial read it)."""

if TYPE_CHECKING:
    BackendName = str
else:
    BackendName = Literal[BACKEND_NAMES]  # a tuple subscript is the same Literal as the names written out


def backend_spec(name: str) -> BackendSpec:
    """The entry of backend ``name``; `InvalidInputError` naming the choices when there is none."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise InvalidInputError(f"unknown backend {name!r}; choose {choices()}") from None


def choices(names: tuple[str, ...] | None = None) -> str:
    """``"a, b or c"`` of the given names (default: every backend)."""
    names = BACKEND_NAMES if names is None else names
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def backend_help() -> str:
    """Every backend in one help text: ``name (summary); ...``."""
    return "; ".join(f"`{s.name}`: {s.summary}" for s in _ENTRIES) + "."


def backend_for(model_path: Path, backend: str | None) -> str:
    """The backend for a model file: the explicit ``backend`` (checked), else the one its suffix defaults to."""
    if backend is not None:
        return backend_spec(backend).name
    suffix = model_path.suffix.lower()
    for spec in _ENTRIES:
        if suffix in spec.suffixes:
            return spec.name
    known = sorted({s for spec in _ENTRIES for s in spec.suffixes})
    raise InvalidInputError(f"{model_path}: unknown model format {model_path.suffix!r}; use {' or '.join(known)}")
