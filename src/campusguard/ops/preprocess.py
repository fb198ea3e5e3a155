"""Pre-processing identical to Ultralytics: letterbox, BGR to RGB, HWC to CHW, 0..1 float32, batching."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from campusguard.errors import InvalidInputError

__all__ = [
    "LetterboxMeta",
    "LetterboxPlan",
    "letterbox_plan",
    "letterbox",
    "to_bgr_uint8",
    "make_batch",
    "fit_shape",
    "linear_resize_coefficients",
    "RESIZE_COEF_SCALE",
]


@dataclass(frozen=True)
class LetterboxMeta:
    """How a frame was letterboxed: needed to map boxes back.

    Attributes:
        ratio: resize gain (network pixels per original pixel).
        pad_xy: left and top padding in network pixels.
        orig_wh: original frame (width, height).
        input_hw: network input (height, width).
    """

    ratio: float
    pad_xy: tuple[int, int]
    orig_wh: tuple[int, int]
    input_hw: tuple[int, int]


def to_bgr_uint8(image: np.ndarray) -> np.ndarray:
    """Convert grayscale, RGBA/BGRA, 16-bit or float 0..1 images to ``(H, W, 3) uint8`` BGR.

    Raises:
        InvalidInputError: when the array cannot be an image.
    """
    if not isinstance(image, np.ndarray) or image.ndim not in (2, 3) or image.size == 0:
        shape = getattr(image, "shape", None)
        raise InvalidInputError(f"expected an (H, W) or (H, W, C) image array, got {type(image).__name__} {shape}")
    img = image
    if img.dtype == np.uint16:
        img = (img >> 8).astype(np.uint8)
    elif img.dtype in (np.float32, np.float64):
        img = np.clip(img * 255.0 if img.max() <= 1.0 else img, 0, 255).astype(np.uint8)
    elif img.dtype != np.uint8:
        raise InvalidInputError(f"unsupported image dtype {img.dtype}")
    if img.ndim == 2 or img.shape[2] == 1:
        return cv2.cvtColor(img.reshape(img.shape[0], img.shape[1]), cv2.COLOR_GRAY2BGR)
    if img.shape[2] == 4:
        return cv2.cvtColor(img, cv2.COLOR_BGRA2BGR)
    if img.shape[2] != 3:
        raise InvalidInputError(f"images must have 1, 3 or 4 channels, got {img.shape[2]}")
    return img


def fit_shape(frame_hw: tuple[int, int], imgsz_hw: tuple[int, int], stride: int = 32) -> tuple[int, int]:
    """Smallest stride-aligned input that holds ``frame_hw`` resized into ``imgsz_hw`` (Ultralytics' ``auto``).

    A 720x1280 frame at 640 gives ``(384, 640)``: 40% fewer pixels than ``(640, 640)``.
    """
    h, w = frame_hw
    r = min(imgsz_hw[0] / h, imgsz_hw[1] / w)
    new_h, new_w = round(h * r), round(w * r)
    return (
        min(imgsz_hw[0], int(np.ceil(new_h / stride) * stride)),
        min(imgsz_hw[1], int(np.ceil(new_w / stride) * stride)),
    )


@dataclass(frozen=True)
class LetterboxPlan:
    """Where a frame lands inside the network input: the geometry shared by every letterbox implementation.

    Attributes:
        meta: the `LetterboxMeta` that maps boxes back.
        resized_wh: size of the resized frame before padding (width, height).
        pad_tblr: padding in pixels (top, bottom, left, right).
    """

    meta: LetterboxMeta
    resized_wh: tuple[int, int]
    pad_tblr: tuple[int, int, int, int]


def letterbox_plan(frame_hw: tuple[int, int], input_hw: tuple[int, int], scaleup: bool = True) -> LetterboxPlan:
    """Ultralytics' letterbox geometry for a ``frame_hw`` frame in an ``input_hw`` network input."""
    h, w = frame_hw
    r = min(input_hw[0] / h, input_hw[1] / w)
    if not scaleup:
        r = min(r, 1.0)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    dw, dh = (input_hw[1] - new_w) / 2, (input_hw[0] - new_h) / 2
    top, bottom = int(round(dh - 0.1)), int(round(dh + 0.1))
    left, right = int(round(dw - 0.1)), int(round(dw + 0.1))
    meta = LetterboxMeta(ratio=r, pad_xy=(left, top), orig_wh=(w, h), input_hw=input_hw)
    return LetterboxPlan(meta=meta, resized_wh=(new_w, new_h), pad_tblr=(top, bottom, left, right))


# OpenCV's INTER_LINEAR on uint8 works in fixed point: weights scaled by 2**11, a horizontal pass
# kept as integers, then a vertical pass whose shifts follow its SIMD kernel (VResizeLinearVec_32s8u).
RESIZE_COEF_SCALE = 1 << 11


def linear_resize_coefficients(src: int, dst: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Source indices and fixed-point weights of OpenCV's bilinear resize of ``uint8`` along one axis.

    Returns:
        ``(i0, i1, w0, w1)``, each ``(dst,)``: output pixel ``j`` is ``src[i0[j]] * w0[j] + src[i1[j]] * w1[j]``
        in units of ``1 / RESIZE_COEF_SCALE``; indices ``int64``, weights ``int32``. The device letterboxes
        (`campusguard.backends.torch_device`, `campusguard.backends.onnxruntime_device`) apply them.
    """
    fx = ((np.arange(dst) + 0.5) * (1.0 / (dst / src)) - 0.5).astype(np.float32)
    sx = np.floor(fx).astype(np.int64)
    fx -= sx
    fx[sx < 0], sx[sx < 0] = 0, 0
    fx[sx >= src - 1], sx[sx >= src - 1] = 0, src - 1
    w1 = np.round(fx * RESIZE_COEF_SCALE).astype(np.int32)
    return sx, np.minimum(sx + 1, src - 1), (RESIZE_COEF_SCALE - w1).astype(np.int32), w1


def letterbox(
    image: np.ndarray, input_hw: tuple[int, int], pad_value: int = 114, scaleup: bool = True
) -> tuple[np.ndarray, LetterboxMeta]:
    """Resize keeping aspect ratio and pad (centred) to ``input_hw``, exactly as Ultralytics does.

    Args:
        image: ``(H, W, 3) uint8`` BGR frame.
        input_hw: network input (height, width).
        pad_value: grey level of the padding.
        scaleup: allow enlarging small images.

    Returns:
        The ``(input_h, input_w, 3) uint8`` image and its `LetterboxMeta`.
    """
    h, w = image.shape[:2]
    plan = letterbox_plan((h, w), input_hw, scaleup)
    top, bottom, left, right = plan.pad_tblr
    if not (top or bottom or left or right):
        if (w, h) != plan.resized_wh:
            image = cv2.resize(image, plan.resized_wh, interpolation=cv2.INTER_LINEAR)
        return image, plan.meta
    # resize straight into the padded input (one pass, no second full-size copy by copyMakeBorder)
    out = np.full((input_hw[0], input_hw[1], image.shape[2]), pad_value, np.uint8)
    new_w, new_h = plan.resized_wh
    inner = out[top : top + new_h, left : left + new_w]
    if (w, h) != plan.resized_wh:
        resized = cv2.resize(image, plan.resized_wh, dst=inner, interpolation=cv2.INTER_LINEAR)
        if not np.shares_memory(resized, out):  # an OpenCV that did not write into the view
            inner[...] = resized
    else:
        inner[...] = image
    return out, plan.meta


def make_batch(images: list[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
    """Stack letterboxed BGR ``uint8`` images into an ``(B, 3, H, W) float32`` RGB 0..1 tensor.

    Args:
        images: equally sized ``(H, W, 3) uint8`` BGR images.
        out: optional preallocated output of the right shape, reused to avoid allocation per frame.
    """
    h, w = images[0].shape[:2]
    if out is None or out.shape != (len(images), 3, h, w):
        out = np.empty((len(images), 3, h, w), dtype=np.float32)
    for i, img in enumerate(images):
        # one fused pass per channel: pick channel (BGR->RGB), cast and scale into the output plane
        for c in range(3):
            np.multiply(img[:, :, 2 - c], np.float32(1 / 255.0), out=out[i, c], casting="unsafe")
    return out
