"""Ultralytics networks as the kit builds and loads them: random-weight architectures, checkpoints, head choice.

Shared by the exporter (`campusguard.models.export`), model inspection (`campusguard.models.resolve`)
and the PyTorch backend (`campusguard.backends.torch_backend`), so ``models/`` never imports ``backends/``.
PyTorch and Ultralytics are imported inside each function (the ``torch`` extra).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campusguard.errors import InvalidInputError, ModelLoadError, require
from campusguard.models.families import find_architecture, official_weights_name
from campusguard.models.info import DEFAULT_IMGSZ

if TYPE_CHECKING:
    from ultralytics.nn.tasks import DetectionModel

__all__ = ["build_architecture", "load_ultralytics_model", "select_head"]


def select_head(net: Any, end_to_end: bool | None = None) -> bool:
    """Choose the head an Ultralytics model runs, before it is fused; return whether it is end-to-end.

    ``None`` keeps the model's own head: the one-to-one (NMS-free) head when it has one, as
    YOLO26 checkpoints do. ``False`` runs the classic one-to-many head (NMS outside the model).

    Raises:
        InvalidInputError: ``end_to_end=True`` for a model without a one-to-one head.
    """
    head = net.model[-1]
    has_one2one = getattr(head, "one2one_cv2", None) is not None
    has_one2many = getattr(head, "cv2", None) is not None
    if end_to_end is None:
        end_to_end = has_one2one
    if end_to_end and not has_one2one:
        raise InvalidInputError("this model has no end-to-end (one-to-one) head; it needs NMS")
    if not end_to_end and not has_one2many:
        raise InvalidInputError("this model was fused to its end-to-end head; the classic head is gone")
    if hasattr(head, "end2end"):
        net.end2end = end_to_end
    return end_to_end


def build_architecture(name: str, nc: int = 80, seed: int = 0) -> DetectionModel:
    """Build an Ultralytics ``DetectionModel`` from its architecture config with random weights.

    ``name`` is any `campusguard.models.families` architecture (``yolo26n`` or ``yolo26n.yaml``).
    """
    arch = find_architecture(name)
    if arch is None:
        raise InvalidInputError(f"unknown architecture {name!r}")
    os.environ.setdefault("YOLO_OFFLINE", "1")
    torch = require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(seed)
    model = DetectionModel(cfg=arch.yaml, nc=nc, verbose=False)
    from campusguard.data_names import COCO_NAMES
    from campusguard.models.ultralytics_env import set_model_args

    model.names = dict(enumerate(COCO_NAMES[:nc]))
    set_model_args(model, {"imgsz": DEFAULT_IMGSZ})
    return model


def load_ultralytics_model(path: str | Path) -> Any:
    """Load an Ultralytics detection checkpoint; raise `ModelLoadError` for anything else."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    require("torch", "torch")
    require("ultralytics", "torch")
    from ultralytics.nn.tasks import load_checkpoint

    path = Path(path)
    if not path.is_file():
        if (official := official_weights_name(path)) is not None:
            raise ModelLoadError(
                f"{path}: not a local file; official weights are fetched by name through Detector({official!r}) "
                f"or `campusguard models pull {official}`"
            )
        raise ModelLoadError(f"{path}: model file not found")
    try:
        model, _ = load_checkpoint(str(path), device="cpu", fuse=False)
    except Exception as exc:
        raise ModelLoadError(
            f"{path}: not an Ultralytics YOLO checkpoint ({type(exc).__name__}: {str(exc)[:160]})"
        ) from exc
    if getattr(model, "task", "detect") != "detect" or not hasattr(model, "stride"):
        raise ModelLoadError(f"{path}: checkpoint is not a YOLO detection model (task {getattr(model, 'task', '?')})")
    return model
