"""What a model is: `ModelInfo` (names, input size, stride, task, static or dynamic shape), worked out once.

`check_imgsz` is the one check of an image size (like Ultralytics' ``check_imgsz``); the
``info_from_*`` functions read a model's facts from what each format carries (ONNX metadata
and shapes, an Ultralytics checkpoint's attributes). Backends and the `Detector` read the
result; nothing else parses metadata. Pure functions: no file or network access.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.ops.postprocess import output_kind

__all__ = [
    "DEFAULT_IMGSZ",
    "ModelInfo",
    "check_imgsz",
    "imgsz_from_metadata",
    "names_from_metadata",
    "info_from_onnx",
    "info_from_ultralytics",
]

DEFAULT_IMGSZ = 640
"""Network input side used when neither the caller nor the model names one."""


def check_imgsz(
    imgsz: int | Sequence[int] | str,
    stride: int = 32,
    *,
    name: str = "imgsz",
    min_size: int | None = None,
    max_size: int | None = None,
) -> tuple[int, int]:
    """Parse and check an image size (``640``, ``(384, 640)``, ``"384,640"``, ``"384x640"``) to ``(height, width)``.

    Args:
        imgsz: one side (square) or two sides, height first.
        stride: every side must be a positive multiple of it (32 for YOLOv8).
        name: how the value is called in the error (``"--imgsz"`` for a command line).
        min_size, max_size: optional bounds on every side, in pixels.

    Raises:
        InvalidInputError: when a side is not an integer, not a positive multiple of ``stride``
            or out of bounds.
    """
    if isinstance(imgsz, str):
        parts = [p for p in imgsz.replace("x", ",").split(",") if p.strip()]
        try:
            values = [int(p) for p in parts]
        except ValueError:
            raise InvalidInputError(f"{name} {imgsz!r} is not an integer or 'H,W'") from None
    elif isinstance(imgsz, (int, np.integer)):
        values = [int(imgsz)]
    else:
        values = [int(v) for v in imgsz]
    if len(values) == 1:
        values = values * 2
    low, high = min_size or stride, max_size
    bounds = f" in {low}..{high}" if high is not None else ""
    if len(values) != 2 or any(v <= 0 or v % stride or v < low or (high is not None and v > high) for v in values):
        raise InvalidInputError(f"{name} {imgsz!r} must be a positive multiple of {stride}{bounds} (or 'H,W' of such)")
    return values[0], values[1]


def imgsz_from_metadata(value: object) -> tuple[int, int] | None:
    """``(h, w)`` from Ultralytics' ``imgsz`` (``"[320, 320]"``, ``"320"``, ``320`` or ``[192, 320]``); ``None`` if absent or odd."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            return None
    if isinstance(value, (int, np.integer)):
        value = [int(value)]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (int, np.integer)) for v in value):
        return None
    try:
        return check_imgsz(list(value), stride=1)
    except InvalidInputError:
        return None


def names_from_metadata(raw: object, nc: int | None = None) -> dict[int, str]:
    """Class id to name from Ultralytics' ``names`` (a dict, a list, or their text); ``class{i}`` for the
    ``nc`` classes when absent, and padded or cut to ``nc`` when it is known."""
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            raw = None
    names: dict[int, str] = {}
    if isinstance(raw, Mapping):
        names = {int(k): str(v) for k, v in raw.items()}
    elif isinstance(raw, (list, tuple)):
        names = dict(enumerate(map(str, raw)))
    if nc is not None and len(names) != nc:
        names = {i: names.get(i, f"class{i}") for i in range(nc)}
    return names


@dataclass(frozen=True)
class ModelInfo:
    """What a model tells about itself.

    Attributes:
        names: class id to name.
        input_hw: fixed network input (height, width), or ``None`` where the model takes any size.
        batch: fixed batch size, or ``None`` for dynamic batch.
        stride: maximum stride (32 for YOLOv8).
        precision: ``"fp32"``, ``"fp16"`` or ``"int8"``.
        random_weights: the model was built from an architecture config, not trained.
        source: the file or name it came from.
        extra: free-form metadata (version, description, ...).
        imgsz_hw: the size the model is meant to run at: its static input, else the size it
            was trained or exported at; ``None`` when unknown.
        task: Ultralytics task (``"detect"``).
        end_to_end: the model emits final boxes, ``(B, max_det, 6)`` (YOLO26's one-to-one head),
            so no NMS runs outside it.
    """

    names: dict[int, str]
    input_hw: tuple[int, int] | None
    batch: int | None
    stride: int = 32
    precision: str = "fp32"
    random_weights: bool = False
    source: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    imgsz_hw: tuple[int, int] | None = None
    task: str = "detect"
    end_to_end: bool = False

    @property
    def dynamic(self) -> bool:
        """The model takes any input height and width."""
        return self.input_hw is None

    @property
    def nms(self) -> str:
        """Where duplicate boxes are removed: ``"in-model"`` (end-to-end head) or ``"campusguard"`` (our NMS)."""
        return "in-model" if self.end_to_end else "campusguard"

    @property
    def head(self) -> str:
        """The head that runs: ``"end2end"`` (one-to-one, NMS-free) or ``"classic"`` (one-to-many, then NMS)."""
        return "end2end" if self.end_to_end else "classic"

    def head_line(self) -> str:
        """One line saying which head runs and where NMS happens, for `predict`, `bench` and logs."""
        if self.end_to_end:
            return (
                "head: end2end (NMS-free, boxes final in the model; Ultralytics' default predict "
                "runs the classic head with NMS: --head classic gives its boxes)"
            )
        return "head: classic (NMS in CampusGuard)"


def info_from_onnx(
    metadata: Mapping[str, str],
    input_shape: Sequence[int | str | None],
    output_shape: Sequence[int | str | None],
    *,
    input_fp16: bool = False,
    source: str = "",
) -> ModelInfo:
    """The `ModelInfo` of an ONNX detector from its custom metadata and its first input and output shapes.

    Symbolic dimensions are strings or ``None``.

    Raises:
        ModelLoadError: when the input is not ``(B, 3, H, W)`` or the output is not a YOLO head.
    """
    shape = list(input_shape)
    if len(shape) != 4 or shape[1] not in (3, "3"):
        raise ModelLoadError(f"{source}: input shape {shape} is not (B, 3, H, W); not an image detector")
    out_shape = tuple(output_shape)
    try:
        kind = output_kind(tuple(d if isinstance(d, int) else -1 for d in out_shape))
    except ModelLoadError as exc:
        raise ModelLoadError(f"{source}: not a YOLO detector: {exc}") from None
    nc = out_shape[1] - 4 if kind == "raw" and isinstance(out_shape[1], int) else None
    h, w = shape[2], shape[3]
    input_hw = (h, w) if isinstance(h, int) and isinstance(w, int) else None
    return ModelInfo(
        names=names_from_metadata(metadata.get("names"), nc),
        input_hw=input_hw,
        batch=shape[0] if isinstance(shape[0], int) else None,
        stride=int(metadata.get("stride", 32)),
        precision=metadata.get("campusguard_precision") or ("fp16" if input_fp16 else "fp32"),
        random_weights=metadata.get("campusguard_random_weights", "").lower() == "true",
        source=source,
        extra={k: v for k, v in metadata.items() if k != "names"},
        imgsz_hw=input_hw or imgsz_from_metadata(metadata.get("imgsz")),
        task=metadata.get("task", "detect"),
        end_to_end=kind == "nms",
    )


def info_from_ultralytics(net: Any, *, source: str, random_weights: bool = False, precision: str = "fp32") -> ModelInfo:
    """The `ModelInfo` of an Ultralytics ``DetectionModel`` (names, stride, the ``imgsz`` it was trained at).

    PyTorch models take any input size, so ``input_hw`` and ``batch`` are ``None``; ``end_to_end``
    is the head the model runs now (`campusguard.backends.torch_backend.select_head` chooses it).
    """
    args = getattr(net, "args", None) or {}
    imgsz = args.get("imgsz", DEFAULT_IMGSZ) if isinstance(args, Mapping) else getattr(args, "imgsz", DEFAULT_IMGSZ)
    return ModelInfo(
        names=names_from_metadata(getattr(net, "names", None)),
        input_hw=None,
        batch=None,
        stride=int(max(net.stride)),
        precision=precision,
        random_weights=random_weights,
        source=source,
        extra={"imgsz": str(imgsz)},
        imgsz_hw=imgsz_from_metadata(imgsz),
        task=str(getattr(net, "task", "detect")),
        end_to_end=bool(getattr(net, "end2end", False)),
    )
