"""Turn a model reference into a ready backend, through the registry (`campusguard.backends.registry`).

A backend that reads only ONNX (ONNX Runtime, OpenVINO) gets ``.pt`` and architecture models
exported to ONNX once (`campusguard.models.registry.exported_onnx_path`: cached beside the checkpoint
or in `campusguard.cache.cache_dir`); a backend that reads checkpoints (torch) gets the reference.
"""

from __future__ import annotations

from pathlib import Path

from campusguard.backends.base import Backend, LoadOptions
from campusguard.backends.registry import DEFAULT_BACKEND, backend_for, backend_spec
from campusguard.errors import InvalidInputError, MissingDependencyError
from campusguard.models.export import export_onnx
from campusguard.models.registry import export_size, exported_onnx_path
from campusguard.models.resolve import ModelRef, parse_model_ref

__all__ = ["load_backend"]

_KIND_NAMES = {
    "onnx": "an .onnx file",
    "pt": "a .pt checkpoint",
    "arch": "an architecture name",
    "xml": "an OpenVINO .xml",
}
_EXPORTABLE = ("pt", "arch")  # what `export_onnx` turns into an ONNX file


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
    precision: str | None = None,
    throughput: bool = False,
) -> Backend:
    """Load ``model`` on ``device`` with the named backend (default: ONNX Runtime for every model).

    ``.pt`` files and official weights run on ONNX Runtime too (exported once and cached) unless
    ``backend="torch"``. ``imgsz_hw`` is the export size of ``.pt`` and architecture models (``None``:
    the size they were trained at); ``end_to_end`` their head (``None``: the model's own; ``False``: the
    classic head, for YOLO26). ``precision`` is the inference precision of an engine that compiles
    for one (OpenVINO's ``fp32``/``bf16``; ``None``: its default). ``throughput``: see `LoadOptions`.

    Raises:
        InvalidInputError: an unknown backend, or a model kind the backend does not read.
        MissingDependencyError: the backend's extra is not installed (one line naming it).
    """
    name = DEFAULT_BACKEND if backend is None else backend_for(Path("x"), backend)
    spec = backend_spec(name)
    ref = parse_model_ref(model, torch="onnx" not in spec.reads)
    if backend is None and ref.kind not in (*spec.reads, *_EXPORTABLE) and ref.path is not None:
        name = backend_for(ref.path, None)  # a file only another engine reads (an OpenVINO .xml): that engine
        spec = backend_spec(name)
    if (why := spec.missing()) is not None:
        raise MissingDependencyError(why)
    if precision is not None and precision not in spec.precisions:
        raise InvalidInputError(f"the {name} backend runs {', '.join(spec.precisions)}, not {precision!r}")
    options = LoadOptions(
        device=device,
        half=half,
        precision=precision,
        allow_cpu_fallback=allow_cpu_fallback,
        tensorrt=tensorrt,
        intra_op_threads=intra_op_threads,
        allow_spinning=allow_spinning,
        end_to_end=end_to_end,
        throughput=throughput,
    )
    if ref.kind in spec.reads:
        # engines of files get the file; engines of checkpoints and architectures (torch) the reference
        target: Path | ModelRef = ref if ref.path is None or "pt" in spec.reads else ref.path
        return spec.builder()(target, options)
    if "onnx" not in spec.reads or ref.kind not in _EXPORTABLE:
        kinds = " or ".join(_KIND_NAMES[k] for k in spec.reads)
        raise InvalidInputError(f"{ref.path or ref}: the {name} backend needs {kinds}")
    size = export_size(ref, imgsz_hw)
    path = exported_onnx_path(ref, size, batch, dynamic, "fp16" if half else "fp32", end_to_end)
    if not path.is_file():
        export_onnx(ref, path, imgsz_hw=size, batch=batch, dynamic=dynamic, half=half, end_to_end=end_to_end)
    return spec.builder()(path, options)
