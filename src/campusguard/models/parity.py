"""Parity between two detectors on the same images: the accuracy check after every export."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from campusguard.detections import Detections
from campusguard.ops.boxes import box_iou

__all__ = ["PARITY_THRESHOLDS", "ParityReport", "ParityThresholds", "match_detections", "compare_detections"]


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


@dataclass(frozen=True)
class ParityThresholds:
    """How close a variant's boxes must stay to FP32's to count as the same detector.

    Attributes:
        min_kept: least share of the reference's boxes the candidate must match.
        min_mean_iou: least mean IoU of the matched pairs.
        min_reference_boxes: fewest reference boxes for the comparison to mean anything.
    """

    min_kept: float
    min_mean_iou: float
    min_reference_boxes: int = 20

    def conclusive(self, report: ParityReport) -> bool:
        """Whether the reference found enough boxes for ``report`` to pass or fail anything."""
        return report.reference_boxes >= self.min_reference_boxes

    def failure(self, report: ParityReport) -> str | None:
        """Why ``report`` misses these thresholds (one line), or ``None`` when it meets them."""
        if not self.conclusive(report):
            return f"FP32 found {report.reference_boxes} boxes, fewer than the {self.min_reference_boxes} a check needs"
        if report.kept_share < self.min_kept:
            return f"keeps {report.kept_share:.1%} of FP32's boxes, under {self.min_kept:.0%}"
        if report.mean_iou < self.min_mean_iou:
            return f"mean matched IoU {report.mean_iou:.3f}, under {self.min_mean_iou}"
        return None


PARITY_THRESHOLDS: dict[str, ParityThresholds] = {
    "fp32": ParityThresholds(min_kept=0.95, min_mean_iou=0.98),
    "fp16": ParityThresholds(min_kept=0.95, min_mean_iou=0.98),
    "bf16": ParityThresholds(min_kept=0.95, min_mean_iou=0.98),
    "int8": ParityThresholds(min_kept=0.8, min_mean_iou=0.9),
    "int8ov": ParityThresholds(min_kept=0.8, min_mean_iou=0.9),
}
"""The export accuracy check's bar per precision, against FP32 on ONNX Runtime on the same images (what
`campusguard export` reports as pass/fail, and what ``precision: auto`` requires before it picks a
variant). ``fp32`` is another engine's FP32 (OpenVINO). BF16 keeps FP16's bar. INT8's (ONNX Runtime's
QOperator ``int8``, OpenVINO's NNCF IR ``int8ov``) is lower: its confidences move and boxes near the threshold come and go."""


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
