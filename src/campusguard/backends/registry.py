"""The backend registry: one entry per inference engine, and every list of backends derived from it.

Each engine is one module, ``backends/<name>_backend.py``, that declares a `BackendSpec` at module
level (`campusguard.backends.spec`): what it is (name, label, one-line summary), what it reads (model
kinds and the file suffixes it is the default for), where it runs, in which precisions, what it needs
installed, how bench runs it, whether ``precision: auto`` times it on the CPU, and its code: the
builder, and optionally its INT8 quantiser, operator profiler, doctor verdicts and device pipeline.
`_ENTRIES` finds them (`campusguard.plugins.discover`); no list names them.

The config literal (`campusguard.app.config.detector.DetectorConfig.backend`), the CLI choices and
help of ``predict``, ``bench`` and ``export``, bench's and profile's lists, the export formats table
(`FORMATS`), ``campusguard doctor``'s verdicts and the engine trial of ``precision: auto`` all read
`BACKENDS`; code outside ``backends/`` asks an entry's capabilities, never its name
(``tests/test_architecture.py`` drops a new engine module into a copy of the package and checks every
list picks it up).

Importing a backend module imports no engine (they are imported inside functions); availability is
`importlib.util.find_spec`, so the config and the CLI stay cheap to import.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from campusguard.backends.spec import BackendSpec
from campusguard.errors import InvalidInputError
from campusguard.plugins import discover

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


_ENTRIES: tuple[BackendSpec, ...] = tuple(
    found.entry
    for found in discover(__name__.rpartition(".")[0], BackendSpec, include=lambda name: name.endswith("_backend"))
)
"""Every `BackendSpec` declared in a ``*_backend`` module of `campusguard.backends`, in their ``order``."""

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
