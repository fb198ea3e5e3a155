"""The synthetic-only model warning for a whole watch configuration (`watch`, `serve`, `demo`)."""

from __future__ import annotations

from typing import TextIO

from campusguard.app.config import WatchConfig
from campusguard.models.synthetic_warning import CONFIG_FIX, uses_bundled_model, warn_if_synthetic_model_on_real

__all__ = ["warn_for_config"]


def warn_for_config(config: WatchConfig, out: TextIO | None = None) -> bool:
    """Print the one-line warning when an enabled camera runs the bundled synthetic-only model on
    anything but CampusGuard's own synthetic video; return whether it was printed.

    The line names the fix in the config's terms (`CONFIG_FIX`): pull ``yolov8n``, then
    ``detector: {model: yolov8n}``."""
    sources = [
        cam.source
        for cam in config.cameras
        if cam.enabled and uses_bundled_model(cam.model if cam.model is not None else config.detector.model)
    ]
    return bool(sources) and warn_if_synthetic_model_on_real(None, sources, out, fix=CONFIG_FIX)
