"""Keep Ultralytics offline: no downloads, no pip auto-install, no settings telemetry."""

from __future__ import annotations

import os


def offline_ultralytics() -> None:
    """Set the environment so that importing and using Ultralytics never reaches the network."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    os.environ.setdefault("YOLO_AUTOINSTALL", "false")
    os.environ.setdefault("YOLO_VERBOSE", "false")
