"""Post-processing shared by every backend: decode the YOLOv8 head, per-class NMS, scale back.

Every backend returns the raw head output, and this module alone turns it into
`Detections`, so all backends give the same boxes in the same order. End-to-end heads
(YOLO26's one-to-one head, ``(B, max_det, 6)``) need no NMS: `decode_end_to_end` applies the
same ``conf``, ``classes``, ``agnostic`` and ``max_det`` to their final boxes.
"""

from __future__ import annotations

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import ModelLoadError
from campusguard.ops.boxes import box_iou, scale_boxes, xywh_to_xyxy
from campusguard.ops.preprocess import LetterboxMeta

__all__ = ["decode_yolov8", "decode_end_to_end", "nms", "postprocess", "output_kind", "detections_by_image"]

MAX_NMS_CANDIDATES = 30000  # same cap as Ultralytics: keeps NMS bounded on random-weight models


def output_kind(shape: tuple[int, ...]) -> str:
    """Classify a head output shape: ``"raw"`` for ``(B, 4+nc, N)``, ``"nms"`` for ``(B, max_det, 6)``.

    Raises:
        ModelLoadError: when the shape is neither (the model is not a YOLOv8-style detector).
    """
    if len(shape) != 3:
        raise ModelLoadError(
            f"model output has shape {tuple(shape)}; a YOLO detector gives (B, 4+nc, N) or (B, max_det, 6)"
        )
    _, a, b = shape
    if isinstance(b, int) and b == 6 and not (isinstance(a, int) and a == 6):
        return "nms"
    if isinstance(a, int) and a >= 5:
        return "raw"
    raise ModelLoadError(
        f"model output has shape {tuple(shape)}; a YOLO detector gives (B, 4+nc, N) or (B, max_det, 6)"
    )


def nms(xyxy: np.ndarray, scores: np.ndarray, class_id: np.ndarray | None, iou_threshold: float) -> np.ndarray:
    """Greedy non-maximum suppression; class-aware when ``class_id`` is given.

    Ties in score are broken by the lower input index, so the result is deterministic.

    Args:
        xyxy: ``(N, 4)`` boxes.
        scores: ``(N,)`` scores.
        class_id: ``(N,)`` classes, or ``None`` for class-agnostic NMS.
        iou_threshold: a box is suppressed by a kept box when their IoU is greater than this.

    Returns:
        ``(K,) int64`` indices of kept boxes, by descending score.
    """
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((np.arange(n), -scores.astype(np.float64)))
    boxes = xyxy[order].astype(np.float64)
    classes = None if class_id is None else class_id[order]
    if n <= NMS_MATRIX_MAX:
        return order[_greedy_over_matrix(boxes, classes, iou_threshold)]
    suppressed = np.zeros(n, dtype=bool)
    keep = []
    for i in range(n):
        if suppressed[i]:
            continue
        keep.append(i)
        rest = np.arange(i + 1, n)
        rest = rest[~suppressed[rest]]
        if classes is not None:
            rest = rest[classes[rest] == classes[i]]
        if rest.size:
            suppressed[rest[box_iou(boxes[i : i + 1], boxes[rest])[0] > iou_threshold]] = True
    return order[np.asarray(keep, dtype=np.int64)]


# Up to this many candidates, `nms` computes every pair's IoU at once (an N x N matrix, 2 MiB of float64 at 512)
# and the greedy pass only reads rows of it; a frame's candidates above the confidence threshold are a few dozen.
NMS_MATRIX_MAX = 512


def _greedy_over_matrix(boxes: np.ndarray, classes: np.ndarray | None, iou_threshold: float) -> np.ndarray:
    """`nms`'s greedy pass over ``boxes`` already in score order, every pair's overlap computed first: the
    same kept boxes as box-by-box suppression, with one numpy call a kept box instead of a dozen."""
    over = box_iou(boxes, boxes) > iou_threshold
    if classes is not None:
        over &= classes[:, None] == classes[None, :]
    over = np.triu(over, k=1)  # a box is suppressed only by a kept box ahead of it in score order
    suppressed = np.zeros(len(boxes), dtype=bool)
    keep = []
    for i in range(len(boxes)):
        if not suppressed[i]:
            keep.append(i)
            suppressed |= over[i]
    return np.asarray(keep, dtype=np.int64)


def decode_yolov8(
    output: np.ndarray,
    conf_threshold: float,
    iou_threshold: float,
    max_det: int = 300,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Decode a raw YOLOv8 head output into per-image boxes in network-input pixels.

    Args:
        output: ``(B, 4+nc, N)`` array: centre-x, centre-y, width, height, then class scores.
        conf_threshold: minimum best-class score; applied before NMS.
        iou_threshold: NMS IoU threshold.
        max_det: maximum detections kept per image.
        classes: keep only these class ids (``None`` keeps all).
        agnostic: class-agnostic NMS.

    Returns:
        Per image, ``(xyxy (K, 4) float32, confidence (K,) float32, class_id (K,) int64)``.
    """
    results = []
    for pred in output:  # (4+nc, N)
        scores = pred[4:]
        if classes is not None:
            mask_cls = np.zeros(scores.shape[0], dtype=bool)
            mask_cls[[c for c in classes if 0 <= c < scores.shape[0]]] = True
            scores = np.where(mask_cls[:, None], scores, -np.inf)
        best = scores.max(axis=0)
        cand = np.flatnonzero(best > conf_threshold)
        if cand.size == 0:
            results.append((np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64)))
            continue
        conf = best[cand].astype(np.float32)
        cls = scores[:, cand].argmax(axis=0).astype(np.int64)
        if cand.size > MAX_NMS_CANDIDATES:
            top = np.argsort(-conf, kind="stable")[:MAX_NMS_CANDIDATES]
            cand, conf, cls = cand[top], conf[top], cls[top]
        xyxy = xywh_to_xyxy(pred[:4, cand].T.astype(np.float32))
        keep = nms(xyxy, conf, None if agnostic else cls, iou_threshold)[:max_det]
        results.append((xyxy[keep], conf[keep], cls[keep]))
    return results


def decode_end_to_end(
    output: np.ndarray,
    conf_threshold: float,
    max_det: int = 300,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Filter an end-to-end head's final boxes as `decode_yolov8` filters the classic head's.

    Args:
        output: ``(B, K, 6)`` array of ``x1, y1, x2, y2, score, class`` rows in network-input pixels.
        conf_threshold: minimum score.
        max_det: maximum detections kept per image, the best first.
        classes: keep only these class ids (``None`` keeps all).
        agnostic: one class per box. The one-to-one head may list one anchor's box once per
            class; this keeps its best-scoring row, as the head's own class-agnostic top-k
            (Ultralytics' ``agnostic_nms``) does. No IoU suppression: the head has none.

    Returns:
        Per image, ``(xyxy (K, 4) float32, confidence (K,) float32, class_id (K,) int64)``, by descending score.
    """
    results = []
    for pred in output:  # (K, 6)
        keep = pred[:, 4] > conf_threshold
        if classes is not None:
            keep &= np.isin(pred[:, 5].astype(np.int64), classes)
        p = pred[keep]
        p = p[np.argsort(-p[:, 4], kind="stable")]
        if agnostic and len(p):
            _, first = np.unique(p[:, :4], axis=0, return_index=True)
            p = p[np.sort(first)]
        p = p[:max_det]
        results.append((p[:, :4].astype(np.float32), p[:, 4].astype(np.float32), p[:, 5].astype(np.int64)))
    return results


def postprocess(
    output: np.ndarray,
    metas: list[LetterboxMeta],
    conf_threshold: float,
    iou_threshold: float,
    max_det: int = 300,
    classes: list[int] | None = None,
    agnostic: bool = False,
) -> list[Detections]:
    """Turn a backend's head output into `Detections` in original-frame pixels, one per image.

    A classic head's output gets CampusGuard's NMS; an end-to-end head's, `decode_end_to_end`.
    """
    if output_kind(output.shape) == "nms":
        decoded = decode_end_to_end(output, conf_threshold, max_det, classes, agnostic)
    else:
        decoded = decode_yolov8(output, conf_threshold, iou_threshold, max_det, classes, agnostic)
    out = []
    for (xyxy, conf, cls), meta in zip(decoded, metas, strict=False):
        out.append(Detections(scale_boxes(xyxy, meta.ratio, meta.pad_xy, meta.orig_wh), conf, cls))
    return out


def detections_by_image(rows: np.ndarray, n_images: int, max_det: int) -> list[Detections]:
    """Split the kept boxes of a batch, as the device paths return them, into one `Detections` per image.

    Args:
        rows: ``(K, 7)`` float rows ``x1, y1, x2, y2, confidence, class, image`` in original-frame pixels.
        n_images: images in the batch (rows of other images, such as a static batch's padding, are dropped).
        max_det: most detections kept per image, the best first.
    """
    out = []
    for i in range(n_images):
        mine = rows[rows[:, 6] == i]
        mine = mine[np.argsort(-mine[:, 4], kind="stable")][:max_det]
        out.append(
            Detections(
                xyxy=np.ascontiguousarray(mine[:, :4], dtype=np.float32),
                confidence=mine[:, 4].astype(np.float32),
                class_id=mine[:, 5].astype(np.int64),
            )
        )
    return out


# re-exported for callers that match boxes after post-processing
__all__ += ["box_iou"]
