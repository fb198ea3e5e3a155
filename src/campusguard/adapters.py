"""Adapters between `Detections` and other formats: Ultralytics results, COCO JSON, YOLO txt."""

from __future__ import annotations

from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.ops.boxes import xyxy_to_xywh

__all__ = ["from_ultralytics", "to_coco_json", "to_yolo_txt", "to_records"]


def from_ultralytics(result: Any) -> Detections:
    """Convert one ``ultralytics.engine.results.Results`` to `Detections`."""
    boxes = result.boxes
    tid = boxes.id.cpu().numpy().astype(np.int64) if getattr(boxes, "id", None) is not None else None
    return Detections(boxes.xyxy.cpu().numpy(), boxes.conf.cpu().numpy(), boxes.cls.cpu().numpy().astype(np.int64), tid)


def to_coco_json(detections: Detections, image_id: int | str, category_offset: int = 0) -> list[dict[str, Any]]:
    """COCO results entries (``bbox`` as x, y, width, height in pixels) for one image."""
    out = []
    for (x1, y1, x2, y2), score, cls in zip(
        detections.xyxy.tolist(), detections.confidence.tolist(), detections.class_id.tolist(), strict=True
    ):
        out.append(
            {
                "image_id": image_id,
                "category_id": int(cls) + category_offset,
                "bbox": [x1, y1, x2 - x1, y2 - y1],
                "score": float(score),
            }
        )
    return out


def to_yolo_txt(detections: Detections, resolution_wh: tuple[int, int], with_confidence: bool = False) -> str:
    """YOLO label lines ``class cx cy w h [conf]`` normalised to 0..1 by ``resolution_wh``."""
    if len(detections) == 0:
        return ""
    w, h = resolution_wh
    xywh = xyxy_to_xywh(detections.xyxy.astype(np.float64)) / np.array([w, h, w, h])
    lines = []
    for i, (cx, cy, bw, bh) in enumerate(xywh):
        line = f"{int(detections.class_id[i])} {cx:.6f} {cy:.6f} {bw:.6f} {bh:.6f}"
        if with_confidence:
            line += f" {detections.confidence[i]:.5f}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def to_records(detections: Detections, names: dict[int, str] | None = None) -> list[dict[str, Any]]:
    """Plain dicts (JSON-ready), one per detection; boolean ``data`` flags (``fallen``) included."""
    recs = []
    for i in range(len(detections)):
        cls = int(detections.class_id[i])
        rec: dict[str, Any] = {
            "xyxy": [round(float(v), 2) for v in detections.xyxy[i]],
            "confidence": round(float(detections.confidence[i]), 5),
            "class_id": cls,
            "class_name": (names or {}).get(cls, str(cls)),
        }
        if detections.tracker_id is not None:
            rec["tracker_id"] = int(detections.tracker_id[i])
        for key, values in detections.data.items():  # per-detection flags such as ``fallen``
            if values.dtype == bool and values.ndim == 1:
                rec[key] = bool(values[i])
        recs.append(rec)
    return recs
