"""Detection accuracy (COCO mAP) of `Detections` against ground truth, with faster-coco-eval.

Predictions and ground truth are turned into COCO-format dictionaries in memory (no files)
and scored by faster-coco-eval's C++ implementation of the COCO protocol: AP averaged over
IoU thresholds 0.50:0.05:0.95 and 101 recall points, per class, then averaged over the
classes that have ground truth. Precision and recall are the macro averages, over those
classes, at the one confidence threshold that gives the best macro F1 (as Ultralytics reports
them), from COCO-style greedy matching at IoU 0.5 (`match_at_iou`). faster-coco-eval's own
``extended_metrics`` is not used for them: it counts a detection as a true positive when it
matched at *any* IoU threshold, so recall can exceed 1.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError

__all__ = [
    "ClassMetrics",
    "DetectionMetrics",
    "evaluate_detections",
    "match_at_iou",
    "precision_recall_at_best_f1",
    "to_coco_dicts",
]


@dataclass(frozen=True)
class ClassMetrics:
    """Accuracy of one class. AP values in 0..1."""

    name: str
    ap50_95: float
    ap50: float
    precision: float
    recall: float
    num_instances: int


@dataclass(frozen=True)
class DetectionMetrics:
    """COCO accuracy of a detector on a set of images. All values in 0..1.

    Attributes:
        map50_95: mean over classes of AP averaged over IoU 0.50..0.95.
        map50: mean over classes of AP at IoU 0.50.
        precision: macro precision at the best-F1 confidence threshold.
        recall: macro recall at the best-F1 confidence threshold.
        per_class: metrics of each class that has ground truth, by class id.
        num_images: images evaluated.
        num_instances: ground-truth boxes.
    """

    map50_95: float
    map50: float
    precision: float
    recall: float
    per_class: dict[int, ClassMetrics] = field(default_factory=dict)
    num_images: int = 0
    num_instances: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form (class ids become string keys)."""
        d = asdict(self)
        d["per_class"] = {str(k): v for k, v in d["per_class"].items()}
        return d


def _names_dict(names: Mapping[int, str] | Sequence[str]) -> dict[int, str]:
    if isinstance(names, Mapping):
        return {int(k): str(v) for k, v in names.items()}
    return {i: str(n) for i, n in enumerate(names)}


def to_coco_dicts(
    preds: Sequence[Detections], truths: Sequence[Detections], names: Mapping[int, str] | Sequence[str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Build COCO ground-truth and result dictionaries.

    Image ``i`` gets id ``i + 1``; category ids are the class ids. Boxes become COCO
    ``[x, y, w, h]`` in pixels.

    Returns:
        ``(ground_truth_dataset, results)``.
    """
    names_d = _names_dict(names)
    images, annotations, results = [], [], []
    ann_id = 1
    for i, (pred, truth) in enumerate(zip(preds, truths, strict=True)):
        images.append({"id": i + 1, "width": 0, "height": 0, "file_name": str(i)})
        for box, cls in zip(truth.xyxy.astype(np.float64), truth.class_id, strict=True):
            w, h = float(box[2] - box[0]), float(box[3] - box[1])
            annotations.append(
                {
                    "id": ann_id,
                    "image_id": i + 1,
                    "category_id": int(cls),
                    "bbox": [float(box[0]), float(box[1]), w, h],
                    "area": w * h,
                    "iscrowd": 0,
                }
            )
            ann_id += 1
        for box, score, cls in zip(pred.xyxy.astype(np.float64), pred.confidence, pred.class_id, strict=True):
            results.append(
                {
                    "image_id": i + 1,
                    "category_id": int(cls),
                    "score": float(score),
                    "bbox": [float(box[0]), float(box[1]), float(box[2] - box[0]), float(box[3] - box[1])],
                }
            )
    categories = [{"id": k, "name": v} for k, v in sorted(names_d.items())]
    return {"images": images, "annotations": annotations, "categories": categories}, results


def match_at_iou(pred: Detections, truth: Detections, iou_threshold: float = 0.5) -> np.ndarray:
    """COCO-style greedy matching in one image: detections in descending confidence each take
    the unmatched ground-truth box of their class with the highest IoU >= ``iou_threshold``.

    Returns:
        ``(N,) bool`` true-positive flag per detection (same order as ``pred``).
    """
    from campusguard.ops.boxes import box_iou

    tp = np.zeros(len(pred), bool)
    if len(pred) == 0 or len(truth) == 0:
        return tp
    iou = box_iou(pred.xyxy, truth.xyxy)
    iou[pred.class_id[:, None] != truth.class_id[None, :]] = -1.0
    taken = np.zeros(len(truth), bool)
    order = np.argsort(-pred.confidence, kind="stable")
    for i in order[iou[order].max(1) >= iou_threshold]:  # the others can match nothing
        cand = np.where(taken, -1.0, iou[i])
        j = int(np.argmax(cand))
        if cand[j] >= iou_threshold:
            taken[j] = True
            tp[i] = True
    return tp


def precision_recall_at_best_f1(
    preds: Sequence[Detections], truths: Sequence[Detections], class_ids: Sequence[int], iou_threshold: float = 0.5
) -> tuple[float, float, dict[int, tuple[float, float]]]:
    """Macro precision and recall at the confidence threshold with the best macro F1.

    Args:
        preds, truths: per image, as in `evaluate_detections`.
        class_ids: classes to average over (those with ground truth).
        iou_threshold: IoU for a true positive.

    Returns:
        ``(precision, recall, {class_id: (precision, recall)})`` at that threshold, in 0..1.
    """
    tps = [match_at_iou(p, t, iou_threshold) for p, t in zip(preds, truths, strict=True)]
    scores = np.concatenate([p.confidence for p in preds]) if preds else np.zeros(0, np.float32)
    classes = np.concatenate([p.class_id for p in preds]) if preds else np.zeros(0, np.int64)
    tp = np.concatenate(tps) if tps else np.zeros(0, bool)
    gt_classes = np.concatenate([t.class_id for t in truths]) if truths else np.zeros(0, np.int64)
    ids = [int(c) for c in class_ids]
    if not ids or len(scores) == 0:
        return 0.0, 0.0, {c: (0.0, 0.0) for c in ids}
    thresholds = np.unique(scores)  # ascending: ties keep the lowest (most inclusive) threshold
    prec = np.zeros((len(ids), len(thresholds)))
    rec = np.zeros((len(ids), len(thresholds)))
    for k, c in enumerate(ids):
        sel = classes == c
        s_c = scores[sel]
        order = np.argsort(-s_c, kind="stable")
        s_sorted = s_c[order]
        cum_tp = np.concatenate([[0], np.cumsum(tp[sel][order])])
        n_above = np.searchsorted(-s_sorted, -thresholds, side="right")  # detections with score >= threshold
        n_gt = max(int(np.sum(gt_classes == c)), 1)
        prec[k] = np.where(n_above > 0, cum_tp[n_above] / np.maximum(n_above, 1), 0.0)
        rec[k] = cum_tp[n_above] / n_gt
    f1 = np.where(prec + rec > 0, 2 * prec * rec / np.maximum(prec + rec, 1e-12), 0.0)
    best = int(np.argmax(f1.mean(0)))
    per_class = {c: (float(prec[k, best]), float(rec[k, best])) for k, c in enumerate(ids)}
    return float(prec[:, best].mean()), float(rec[:, best].mean()), per_class


def evaluate_detections(
    preds: Sequence[Detections],
    truths: Sequence[Detections],
    names: Mapping[int, str] | Sequence[str],
    *,
    max_det: int = 300,
) -> DetectionMetrics:
    """Score predictions against ground truth with the COCO protocol.

    Args:
        preds: detections per image, ``xyxy`` in image pixels, with confidences.
        truths: ground truth per image, same order and pixel frame (confidence ignored).
        names: class names by id (mapping or list); defines the classes evaluated.
        max_det: detections kept per image and class, highest confidence first
            (COCO's ``maxDets``; Ultralytics' ``max_det`` default is 300).

    Returns:
        mAP50-95, mAP50, macro precision and recall, and per-class metrics.

    Raises:
        InvalidInputError: lengths differ, a class id is not in ``names``, or there is no
            ground truth at all.
    """
    from faster_coco_eval import COCO, COCOeval_faster

    if len(preds) != len(truths):
        raise InvalidInputError(f"got predictions for {len(preds)} images but ground truth for {len(truths)}")
    names_d = _names_dict(names)
    for what, items in (("prediction", preds), ("ground truth", truths)):
        for i, det in enumerate(items):
            bad = set(np.unique(det.class_id).tolist()) - set(names_d)
            if bad:
                raise InvalidInputError(
                    f"{what} of image {i} has class ids {sorted(bad)} not in the {len(names_d)} class names"
                )
    n_inst = sum(len(t) for t in truths)
    if n_inst == 0:
        raise InvalidInputError(f"no ground-truth boxes in {len(truths)} images: mAP is undefined")

    gt_dict, results = to_coco_dicts(preds, truths, names_d)
    quiet = logging.getLogger("campusguard.eval").debug
    coco_gt = COCO(gt_dict, print_function=quiet)
    coco_dt = coco_gt.loadRes(results)
    ev = COCOeval_faster(coco_gt, coco_dt, iouType="bbox", print_function=quiet)
    ev.params.maxDets = [1, 10, max_det]
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    stats = ev.stats_as_dict

    counts = np.bincount(np.concatenate([t.class_id for t in truths]), minlength=max(names_d) + 1)
    with_gt = [int(c) for c in ev.params.catIds if counts[c] > 0]
    limited = [p[np.argsort(-p.confidence, kind="stable")[:max_det]] if len(p) > max_det else p for p in preds]
    p_all, r_all, pr = precision_recall_at_best_f1(limited, truths, with_gt)
    precision = ev.eval["precision"]  # (T iou, R recall, K class, A area, M maxdets)
    per_class = {}
    for k, cid in enumerate(ev.params.catIds):
        if counts[cid] == 0:
            continue
        p = precision[:, :, k, 0, -1]
        ap = float(p[p > -1].mean()) if (p > -1).any() else 0.0
        p50 = p[0]
        ap50 = float(p50[p50 > -1].mean()) if (p50 > -1).any() else 0.0
        per_class[int(cid)] = ClassMetrics(
            name=names_d[cid],
            ap50_95=ap,
            ap50=ap50,
            precision=pr[int(cid)][0],
            recall=pr[int(cid)][1],
            num_instances=int(counts[cid]),
        )
    return DetectionMetrics(
        map50_95=max(float(stats["AP_all"]), 0.0),
        map50=max(float(stats["AP_50"]), 0.0),
        precision=p_all,
        recall=r_all,
        per_class=per_class,
        num_images=len(truths),
        num_instances=n_inst,
    )
