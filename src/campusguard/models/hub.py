"""PLACEHOLDER for the weights store (issue 27, the "weights" helper's module replaces this file at merge).

Only the interface that name resolution codes against: `OFFICIAL` and `ensure_weights`. This stand-in
finds a checkpoint already in ``$CAMPUSGUARD_CACHE/weights`` and never downloads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from campusguard.cache import cache_dir
from campusguard.errors import ModelLoadError

__all__ = ["OFFICIAL", "OfficialWeights", "WeightsUnavailableError", "ensure_weights"]

_RELEASE = "https://github.com/ultralytics/assets/releases/download/v8.4.0"


class WeightsUnavailableError(ModelLoadError):
    """Official weights that are not cached and cannot be downloaded now."""


@dataclass(frozen=True)
class OfficialWeights:
    """One official Ultralytics checkpoint."""

    name: str
    url: str


OFFICIAL: dict[str, OfficialWeights] = {
    f"{family}{size}": OfficialWeights(f"{family}{size}", f"{_RELEASE}/{family}{size}.pt")
    for family in ("yolov8", "yolo11", "yolo26")
    for size in "nsmlx"
}


def _offline() -> bool:
    return any(os.environ.get(k, "").lower() not in ("", "0", "false") for k in ("CAMPUSGUARD_OFFLINE", "YOLO_OFFLINE"))


def ensure_weights(
    name: str,
    *,
    source: str | None = None,
    sha256: str | None = None,
    offline: bool | None = None,
    progress: bool = False,
) -> Path:
    """The cached ``.pt`` of official weights ``name``; this placeholder never downloads."""
    key = name.strip().lower().removesuffix(".pt")
    if key not in OFFICIAL:
        raise ModelLoadError(f"unknown official weights {name!r}; choose from {', '.join(OFFICIAL)}")
    cached = cache_dir() / "weights" / f"{key}.pt"
    if cached.is_file():
        return cached
    url = source or OFFICIAL[key].url
    why = "offline" if (offline if offline is not None else _offline()) else "downloads are not built yet"
    raise WeightsUnavailableError(
        f"{key}: not in the cache and cannot download {url} ({why}); "
        f"run `campusguard models pull {key} --from URL|DIR` on a machine that can reach it"
    )
