"""Evaluation: YOLO-format data sets and COCO mAP.

Public API (stable; `bench`, `train` and `val` use it)::

    from campusguard.eval import load_yolo_dataset, evaluate_detections

    ds = load_yolo_dataset("data.yaml", split="val")   # validates everything first
    preds = [detector(cv2.imread(str(p))) for p in ds.image_paths]
    m = evaluate_detections(preds, ds.truths, ds.names)
    m.map50_95, m.map50, m.precision, m.recall, m.per_class[0].ap50_95

- `load_yolo_dataset(data_yaml, split="val") -> YoloDataset`: ``image_paths``,
  ``image_hw (N, 2)``, ``truths`` (one `Detections` per image, ``xyxy`` in image pixels),
  ``names`` ``{id: name}``. Raises `InvalidInputError` naming file and line for a missing
  yaml key, missing images or labels folder, malformed label line, class id out of range
  or an empty split.
- `evaluate_detections(preds, truths, names, max_det=300) -> DetectionMetrics`: COCO
  mAP50-95 / mAP50 (faster-coco-eval), macro precision and recall at the best-F1
  threshold, per-class `ClassMetrics`.
"""

from campusguard.eval.dataset import YoloDataset, label_path_for, load_yolo_dataset, read_data_yaml, read_label_file
from campusguard.eval.metrics import ClassMetrics, DetectionMetrics, evaluate_detections, to_coco_dicts

__all__ = [
    "ClassMetrics",
    "DetectionMetrics",
    "YoloDataset",
    "evaluate_detections",
    "label_path_for",
    "load_yolo_dataset",
    "read_data_yaml",
    "read_label_file",
    "to_coco_dicts",
]
