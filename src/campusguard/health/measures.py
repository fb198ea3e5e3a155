"""What a camera's picture says about the camera itself: one `ViewSample` per sampled frame.

Every measure is taken on a small grey picture (`work_picture`: `WORK_WIDTH` pixels wide, area
averaged, so sensor noise is averaged down and the cost is the same for every camera) and is
normalised so that it does not move with the light: a scene at dusk, at 45% of its daytime
brightness, gives the same contrast, sharpness and structure as at noon.

- ``block_contrast``: per block of a ``GRID`` grid, the block's standard deviation (of the work
  picture smoothed a little, so that sensor noise does not count as texture) over the frame's mean
  brightness; a covered lens loses it nearly everywhere at once.
- ``sharpness``: how much the strongest edges lose when the picture is blurred a little more
  (the 99th percentile of gradient magnitudes, before over after a Gaussian blur, minus one):
  about 1 to 2 for a focused view, near 0 for a defocused one, whatever the contrast.
- ``structure``: the softened picture's gradient-magnitude map at ``STRUCTURE_WH``, zero mean and unit
  norm; its dot product with a reference view's (`similarity`) is 1 for the same view, and falls
  when the camera is turned, shifted or zoomed. A few pixels of wind shake barely move it.
- ``changed``: the share of pixels whose grey level moved by more than `CHANGE_TOLERANCE` since
  the previous sample, on a nearest-neighbour subsample of the frame (`detail_picture`: the noise
  keeps its amplitude, unlike in the area-averaged work picture); a real sensor's noise never
  stops, so only a frozen encoder gives about 0 (re-encoding a repeated frame moves a few levels).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from campusguard.errors import InvalidInputError

__all__ = [
    "GRID",
    "STRUCTURE_WH",
    "WORK_WIDTH",
    "ViewSample",
    "CHANGE_TOLERANCE",
    "changed_fraction",
    "detail_picture",
    "measure_view",
    "similarity",
    "to_gray",
    "work_picture",
]

WORK_WIDTH = 256
"""Width in pixels of the grey picture every measure is taken on."""

GRID = (8, 6)
"""Blocks across and down for ``block_contrast``."""

DETAIL_MAX_WIDTH = 640
"""Widest nearest-neighbour subsample `changed_fraction` compares."""

CHANGE_TOLERANCE = 2
"""Grey levels a pixel may move between two samples of a frozen picture (an encoder re-encoding one frame)."""

STRUCTURE_WH = (64, 36)
"""Size of the structure map compared with the reference view."""

_SOFT_SIGMA = 1.5
"""The small Gaussian blur (work pixels) the sharpness measure compares against; block contrast and the
structure map are taken on the same softened picture, so sensor noise does not count as texture."""
_BRIGHTNESS_FLOOR = 8.0  # grey levels added to the mean before dividing (a black frame is not infinitely contrasted)


@dataclass(frozen=True)
class ViewSample:
    """The measures of one sampled frame.

    Attributes:
        brightness: mean grey level, 0..255.
        block_contrast: ``(GRID[1], GRID[0]) float32``: each block's std over ``brightness + 8``.
        sharpness: edge sharpness (see the module docstring), >= 0.
        structure: ``(STRUCTURE_WH[1] * STRUCTURE_WH[0],) float32`` unit vector (all zeros for a flat picture).
        work: the ``uint8`` grey work picture.
        detail: the ``uint8`` grey `detail_picture` (kept for `changed_fraction` with the next sample).
    """

    brightness: float
    block_contrast: np.ndarray
    sharpness: float
    structure: np.ndarray
    work: np.ndarray
    detail: np.ndarray


def _check(image: np.ndarray) -> None:
    if image.dtype != np.uint8 or image.ndim not in (2, 3) or (image.ndim == 3 and image.shape[2] != 3):
        raise InvalidInputError(f"camera health needs a uint8 grey or BGR picture, got {image.dtype} {image.shape}")
    if image.shape[0] < 16 or image.shape[1] < 16:
        raise InvalidInputError(f"camera health needs a picture of at least 16x16 pixels, got {image.shape[1]}x{image.shape[0]}")


def to_gray(image: np.ndarray) -> np.ndarray:
    """A ``(H, W) uint8`` grey picture of ``image`` (``(H, W, 3)`` BGR or already ``(H, W)`` grey).

    Raises:
        InvalidInputError: not a ``uint8`` grey or BGR picture of at least 16x16 pixels.
    """
    _check(image)
    return image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)


def detail_picture(image: np.ndarray) -> np.ndarray:
    """Every k-th pixel of a frame in both directions, grey, at most `DETAIL_MAX_WIDTH` wide (noise kept).

    Subsampled before the grey conversion, so a 1080p frame costs a 640x360 conversion.
    """
    _check(image)
    step = max(1, -(-image.shape[1] // DETAIL_MAX_WIDTH))
    small = np.ascontiguousarray(image[::step, ::step]) if step > 1 else image
    return small if small.ndim == 2 else cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)


def work_picture(image: np.ndarray) -> np.ndarray:
    """The ``uint8`` grey work picture of a frame: `WORK_WIDTH` wide, the frame's aspect, area
    averaged (from its `detail_picture`)."""
    return _work(detail_picture(image))


def _work(detail: np.ndarray) -> np.ndarray:
    h, w = detail.shape
    out_h = max(8, round(h * WORK_WIDTH / w))
    return cv2.resize(detail, (WORK_WIDTH, out_h), interpolation=cv2.INTER_AREA)


def _gradient_magnitude(picture: np.ndarray) -> np.ndarray:
    gx = cv2.Sobel(picture, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(picture, cv2.CV_32F, 0, 1, ksize=3)
    return cv2.magnitude(gx, gy)


def _block_contrast(work: np.ndarray, brightness: float) -> np.ndarray:
    cols, rows = GRID
    h, w = work.shape
    bh, bw = h // rows, w // cols
    blocks = work[: bh * rows, : bw * cols].reshape(rows, bh, cols, bw)
    return (blocks.std(axis=(1, 3)) / (brightness + _BRIGHTNESS_FLOOR)).astype(np.float32)


def _p99(values: np.ndarray) -> float:
    flat = values.ravel()
    k = int(0.99 * (flat.size - 1))
    return float(np.partition(flat, k)[k])


def _sharpness(work_f: np.ndarray, soft_magnitude: np.ndarray) -> float:
    fine = _p99(_gradient_magnitude(work_f))
    soft = _p99(soft_magnitude)
    if soft < 1e-3:
        return 0.0
    return max(0.0, float(fine / soft) - 1.0)


def _structure(soft_magnitude: np.ndarray) -> np.ndarray:
    small = cv2.resize(soft_magnitude, STRUCTURE_WH, interpolation=cv2.INTER_AREA).ravel()
    small = small - small.mean()
    norm = float(np.linalg.norm(small))
    return (small / norm if norm > 1e-6 else np.zeros_like(small)).astype(np.float32)


def measure_view(image: np.ndarray) -> ViewSample:
    """Measure one frame (``(H, W, 3)`` BGR or ``(H, W)`` grey ``uint8``, any size from 16x16)."""
    detail = detail_picture(image)
    work = _work(detail)
    work_f = work.astype(np.float32)
    brightness = float(work_f.mean())
    soft = cv2.GaussianBlur(work_f, (0, 0), _SOFT_SIGMA)  # noise is not texture; the edges a little softer
    soft_magnitude = _gradient_magnitude(soft)
    return ViewSample(
        brightness=brightness,
        block_contrast=_block_contrast(soft, brightness),
        sharpness=_sharpness(work_f, soft_magnitude),
        structure=_structure(soft_magnitude),
        work=work,
        detail=detail,
    )


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """How alike two structure maps are: their dot product, -1..1 (1: the same view)."""
    if a.shape != b.shape:
        return 0.0
    return float(np.dot(a, b))


def changed_fraction(previous: np.ndarray, current: np.ndarray) -> float:
    """Share of pixels whose grey level moved by more than `CHANGE_TOLERANCE` between two detail
    pictures (1.0 when their sizes differ)."""
    if previous.shape != current.shape:
        return 1.0
    return float(np.count_nonzero(cv2.absdiff(previous, current) > CHANGE_TOLERANCE)) / previous.size
