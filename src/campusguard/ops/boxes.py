"""Box maths on ``(N, 4)`` arrays. Formats are in the names: ``xyxy`` or ``xywh`` (centre, size)."""

from __future__ import annotations

import numpy as np

__all__ = ["box_iou", "xywh_to_xyxy", "xyxy_to_xywh", "clip_boxes", "resize_boxes", "scale_boxes"]


def xywh_to_xyxy(xywh: np.ndarray) -> np.ndarray:
    """Convert ``(N, 4)`` centre-x, centre-y, width, height to x1, y1, x2, y2 (same dtype)."""
    out = np.empty_like(xywh)
    half = xywh[..., 2:4] / 2
    out[..., 0:2] = xywh[..., 0:2] - half
    out[..., 2:4] = xywh[..., 0:2] + half
    return out


def xyxy_to_xywh(xyxy: np.ndarray) -> np.ndarray:
    """Convert ``(N, 4)`` x1, y1, x2, y2 to centre-x, centre-y, width, height (same dtype)."""
    out = np.empty_like(xyxy)
    out[..., 0:2] = (xyxy[..., 0:2] + xyxy[..., 2:4]) / 2
    out[..., 2:4] = xyxy[..., 2:4] - xyxy[..., 0:2]
    return out


def box_iou(boxes_a: np.ndarray, boxes_b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of ``(N, 4)`` and ``(M, 4)`` xyxy boxes, as an ``(N, M)`` float array."""
    a = np.asarray(boxes_a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(boxes_b, dtype=np.float64).reshape(-1, 4)
    area_a = np.clip(a[:, 2] - a[:, 0], 0, None) * np.clip(a[:, 3] - a[:, 1], 0, None)
    area_b = np.clip(b[:, 2] - b[:, 0], 0, None) * np.clip(b[:, 3] - b[:, 1], 0, None)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    wh = np.clip(rb - lt, 0, None)
    inter = wh[..., 0] * wh[..., 1]
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def clip_boxes(xyxy: np.ndarray, resolution_wh: tuple[int, int]) -> np.ndarray:
    """Return xyxy boxes clipped to an image of ``resolution_wh = (width, height)``."""
    w, h = resolution_wh
    out = xyxy.copy()
    out[:, 0] = np.clip(out[:, 0], 0, w)
    out[:, 2] = np.clip(out[:, 2], 0, w)
    out[:, 1] = np.clip(out[:, 1], 0, h)
    out[:, 3] = np.clip(out[:, 3], 0, h)
    return out


def resize_boxes(xyxy: np.ndarray, from_wh: tuple[int, int], to_wh: tuple[int, int]) -> np.ndarray:
    """Map ``(N, 4)`` xyxy boxes in pixels of a ``from_wh`` frame to a ``to_wh`` frame of the same view.

    The same array when the sizes are equal or there are no boxes, else a new ``float32`` array
    (each axis scaled on its own; no clipping).
    """
    if from_wh == to_wh or len(xyxy) == 0:
        return xyxy
    sx, sy = to_wh[0] / from_wh[0], to_wh[1] / from_wh[1]
    return (xyxy * np.array([sx, sy, sx, sy], np.float32)).astype(np.float32, copy=False)


def scale_boxes(
    xyxy: np.ndarray, ratio: float, pad_xy: tuple[float, float], resolution_wh: tuple[int, int]
) -> np.ndarray:
    """Map xyxy boxes from letterboxed network input back to the original frame.

    Args:
        xyxy: ``(N, 4)`` boxes in network-input pixels.
        ratio: resize gain used by the letterbox (input / original).
        pad_xy: left and top padding in network-input pixels.
        resolution_wh: original frame ``(width, height)``; boxes are clipped to it.
    """
    out = xyxy.astype(np.float32, copy=True)
    out[:, [0, 2]] -= pad_xy[0]
    out[:, [1, 3]] -= pad_xy[1]
    out /= ratio
    return clip_boxes(out, resolution_wh)
