"""Ultralytics' own val, and its predictions scored by CampusGuard's COCO evaluator.

`scripts/val_parity.py` and `benchmarks/families_compare.py` compare `campusguard val` with
these two numbers: Ultralytics' val (its predictions, its AP) and the same predictions scored
by faster-coco-eval (its predictions, CampusGuard's AP), which separates a metric difference
from a pipeline difference. Ultralytics is imported inside the functions (the ``torch`` extra).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import require
from campusguard.eval.dataset import load_yolo_dataset
from campusguard.eval.metrics import DetectionMetrics, evaluate_detections
from campusguard.models.ultralytics_env import offline_ultralytics

__all__ = ["VAL_METRICS", "metric_dict", "score_ultralytics_predictions", "ultralytics_val"]

VAL_METRICS = ("map50_95", "map50", "precision", "recall")
"""The four numbers every val comparison reports, all in 0..1."""


def metric_dict(metrics: DetectionMetrics) -> dict[str, float]:
    """The `VAL_METRICS` of CampusGuard's metrics as a plain dict."""
    return {k: float(getattr(metrics, k)) for k in VAL_METRICS}


def ultralytics_val(
    model: str | Path, data_yaml: Path, imgsz: int, batch: int, workdir: Path
) -> tuple[dict[str, float], Path]:
    """Run Ultralytics' val on the CPU with its defaults (conf 0.001, IoU 0.7, 300 boxes per image).

    Args:
        model: a ``.pt`` or an ONNX export with Ultralytics' metadata.
        data_yaml: a data.yaml with absolute paths (`campusguard.train.trainer.write_resolved_data_yaml`).
        imgsz: square network input side.
        batch: images per call.
        workdir: where Ultralytics writes its run (``ultralytics-val/``).

    Returns:
        its `VAL_METRICS` (0..1) and the ``predictions.json`` it saved.
    """
    offline_ultralytics()
    require("ultralytics", "torch")
    from ultralytics import YOLO

    result = YOLO(str(model), task="detect").val(
        data=str(data_yaml),
        imgsz=imgsz,
        batch=batch,
        conf=0.001,
        iou=0.7,
        max_det=300,
        device="cpu",
        plots=False,
        save_json=True,
        project=str(workdir),
        name="ultralytics-val",
        exist_ok=True,
        verbose=False,
    )
    box = result.box
    metrics = {
        "map50_95": float(box.map),
        "map50": float(box.map50),
        "precision": float(box.mp),
        "recall": float(box.mr),
    }
    return metrics, Path(workdir) / "ultralytics-val" / "predictions.json"


def score_ultralytics_predictions(pred_json: Path, data_yaml: Path, split: str = "val") -> dict[str, float]:
    """Score Ultralytics' saved predictions (COCO JSON, ``image_id`` the file stem, ``category_id``
    the class + 1) with CampusGuard's evaluator (faster-coco-eval); returns the `VAL_METRICS`."""
    ds = load_yolo_dataset(data_yaml, split)
    by_stem: dict[str, list[dict]] = {}
    for row in json.loads(Path(pred_json).read_text()):
        by_stem.setdefault(str(row["image_id"]), []).append(row)
    preds = []
    for path in ds.image_paths:
        key = str(int(path.stem)) if path.stem.isnumeric() else path.stem  # Ultralytics writes numeric stems as ints
        rows = by_stem.get(key, [])
        xywh = np.array([r["bbox"] for r in rows], np.float32).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        preds.append(
            Detections(
                xyxy=xyxy,
                confidence=np.array([r["score"] for r in rows], np.float32),
                class_id=np.array([r["category_id"] - 1 for r in rows], np.int64),
            )
        )
    return metric_dict(evaluate_detections(preds, ds.truths, ds.names))
