"""Parity between two detectors on the same images: the accuracy check after every export."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from campusguard.detections import Detections
from campusguard.ops.boxes import box_iou

__all__ = ["ParityReport", "match_detections", "compare_detections"]


@dataclass(frozen=True)
class ParityReport:
    """How a candidate's boxes compare with a reference's over a set of images.

    Attributes:
        images: images compared.
        reference_boxes: boxes the reference found.
        candidate_boxes: boxes the candidate found.
        matched: reference boxes matched one-to-one by a same-class candidate box (IoU >= ``min_iou``).
        mean_iou: mean IoU of the matched pairs (1.0 when nothing to match).
        kept_share: ``matched / reference_boxes`` (1.0 when the reference found nothing).
        max_conf_diff: largest absolute confidence difference of a matched pair.
    """

    images: int
    reference_boxes: int
    candidate_boxes: int
    matched: int
    mean_iou: float
    kept_share: float
    max_conf_diff: float

    def line(self) -> str:
        return (
            f"parity on {self.images} image(s): {self.matched}/{self.reference_boxes} reference boxes kept "
            f"({self.kept_share:.1%}), mean matched IoU {self.mean_iou:.4f}, max confidence diff {self.max_conf_diff:.4f}, "
            f"{self.candidate_boxes} candidate boxes"
        )


def match_detections(
    reference: Detections, candidate: Detections, min_iou: float = 0.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One-to-one same-class matching maximising IoU (Hungarian).

    Returns:
        ``(ref_idx, cand_idx, iou)`` arrays of the matched pairs with IoU >= ``min_iou``.
    """
    if len(reference) == 0 or len(candidate) == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0)
    iou = box_iou(reference.xyxy, candidate.xyxy)
    iou[reference.class_id[:, None] != candidate.class_id[None, :]] = 0.0
    r, c = linear_sum_assignment(-iou)
    ok = iou[r, c] >= min_iou
    return r[ok], c[ok], iou[r[ok], c[ok]]


def compare_detections(reference: list[Detections], candidate: list[Detections], min_iou: float = 0.5) -> ParityReport:
    """Aggregate `match_detections` over images."""
    ious: list[float] = []
    conf_diffs: list[float] = [0.0]
    n_ref = n_cand = 0
    for ref, cand in zip(reference, candidate, strict=True):
        n_ref += len(ref)
        n_cand += len(cand)
        r, c, iou = match_detections(ref, cand, min_iou)
        ious.extend(iou.tolist())
        conf_diffs.extend(np.abs(ref.confidence[r] - cand.confidence[c]).tolist())
    return ParityReport(
        images=len(reference),
        reference_boxes=n_ref,
        candidate_boxes=n_cand,
        matched=len(ious),
        mean_iou=float(np.mean(ious)) if ious else 1.0,
        kept_share=len(ious) / n_ref if n_ref else 1.0,
        max_conf_diff=float(max(conf_diffs)),
    )
