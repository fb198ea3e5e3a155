"""Keep Ultralytics offline: no downloads, no pip auto-install, no settings telemetry."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def offline_ultralytics() -> None:
    """Set the environment so that importing and using Ultralytics never reaches the network."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    os.environ.setdefault("YOLO_VERBOSE", "false")


def set_model_args(model: torch.nn.Module, args: SimpleNamespace | dict[str, Any]) -> None:
    """Give an Ultralytics model the ``model.args`` (hyper-parameters, ``imgsz``) its loss and
    exporter read; Ultralytics sets this attribute on its models without declaring it."""
    model.args = args  # type: ignore[assignment]  # torch types Module.__setattr__ for tensors and modules only
