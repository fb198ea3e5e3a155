"""Reading images from disk with clear errors."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from campusguard.errors import ImageReadError

__all__ = ["read_image", "IMAGE_SUFFIXES", "VIDEO_SUFFIXES"]

# Ultralytics' IMG_FORMATS: a data set, a prediction folder and a camera folder see the same images
IMAGE_SUFFIXES = (".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".pfm", ".tif", ".tiff", ".webp")
VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mov", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".ts"})


def read_image(path: str | Path) -> np.ndarray:
    """Read an image as ``(H, W, 3) uint8`` BGR (16-bit, grayscale and alpha images converted).

    Raises:
        ImageReadError: for a missing, unreadable, empty, truncated or non-image file.
    """
    from campusguard.ops.preprocess import to_bgr_uint8

    p = Path(path)
    if not p.exists():
        raise ImageReadError(f"{p}: no such file")
    if p.is_dir():
        raise ImageReadError(f"{p}: is a directory, not an image")
    try:
        data = np.fromfile(p, dtype=np.uint8)
    except OSError as exc:
        raise ImageReadError(f"{p}: cannot read ({exc.strerror})") from exc
    if data.size == 0:
        raise ImageReadError(f"{p}: empty file")
    img = cv2.imdecode(data, cv2.IMREAD_UNCHANGED)
    if img is None or img.size == 0:
        raise ImageReadError(f"{p}: not a readable image (corrupt, truncated or unsupported format)")
    if p.suffix.lower() in (".jpg", ".jpeg") and b"\xff\xd9" not in data[-4096:].tobytes():
        raise ImageReadError(f"{p}: truncated JPEG (no end-of-image marker)")
    return to_bgr_uint8(img)
