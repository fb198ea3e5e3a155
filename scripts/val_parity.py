"""Does `campusguard val` agree with Ultralytics' own `val` on the same weights and data?

    python scripts/val_parity.py --model best.onnx|best.pt --data data.yaml --imgsz 320 [--tolerance 0.5]

Prints three numbers per metric, which separate the two possible sources of a difference:

1. Ultralytics val: Ultralytics' predictions scored by Ultralytics' AP (continuous
   precision envelope integrated by the trapezoid rule over 101 recall points, greedy
   matching by IoU);
2. Ultralytics' predictions (its ``predictions.json``) scored by faster-coco-eval, the COCO
   protocol CampusGuard uses: 1 -> 2 is the metric difference;
3. campusguard val: CampusGuard's Detector (pre-processing, backend, NMS) scored by
   faster-coco-eval: 2 -> 3 is the pipeline difference (e.g. Ultralytics' val loader
   resizes with INTER_AREA when shrinking, its predictor and CampusGuard with INTER_LINEAR).

Exits 1 when |campusguard - Ultralytics| in mAP50-95 exceeds ``--tolerance`` points.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")


def ultralytics_val(
    model: str, data_yaml: Path, imgsz: int, batch: int, workdir: Path
) -> tuple[dict[str, float], Path]:
    """Run Ultralytics' val; return its metrics (0..1) and its predictions.json."""
    from ultralytics import YOLO

    m = YOLO(model, task="detect").val(
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
    box = m.box
    metrics = {
        "map50_95": float(box.map),
        "map50": float(box.map50),
        "precision": float(box.mp),
        "recall": float(box.mr),
    }
    return metrics, workdir / "ultralytics-val" / "predictions.json"


def coco_on_ultralytics_predictions(pred_json: Path, data_yaml: Path) -> dict[str, float]:
    """Score Ultralytics' saved predictions with CampusGuard's evaluator (faster-coco-eval)."""
    from campusguard.detections import Detections
    from campusguard.eval import evaluate_detections, load_yolo_dataset

    ds = load_yolo_dataset(data_yaml, "val")
    by_stem: dict[str, list[dict]] = {}
    for row in json.loads(pred_json.read_text()):
        by_stem.setdefault(str(row["image_id"]), []).append(row)
    preds = []
    for path in ds.image_paths:
        key = str(int(path.stem)) if path.stem.isnumeric() else path.stem
        rows = by_stem.get(key, [])
        xywh = np.array([r["bbox"] for r in rows], np.float32).reshape(-1, 4)
        xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], 1)
        preds.append(
            Detections(
                xyxy=xyxy,
                confidence=np.array([r["score"] for r in rows], np.float32),
                class_id=np.array([r["category_id"] - 1 for r in rows], np.int64),  # Ultralytics writes class + 1
            )
        )
    m = evaluate_detections(preds, ds.truths, ds.names)
    return {"map50_95": m.map50_95, "map50": m.map50, "precision": m.precision, "recall": m.recall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.5, help="allowed |difference| in mAP50-95, in points")
    args = ap.parse_args()

    from campusguard.eval.validate import validate_model
    from campusguard.train.trainer import write_resolved_data_yaml

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_yaml = write_resolved_data_yaml(args.data, work / "data.yaml")
        ul, pred_json = ultralytics_val(args.model, data_yaml, args.imgsz, args.batch, work)
        ul_coco = coco_on_ultralytics_predictions(pred_json, data_yaml)
    cg = validate_model(args.model, args.data, imgsz=args.imgsz, device="cpu", batch=args.batch).metrics
    ours = {"map50_95": cg.map50_95, "map50": cg.map50, "precision": cg.precision, "recall": cg.recall}

    print(f"model {args.model}  data {args.data}  imgsz {args.imgsz}  conf 0.001  iou 0.7  max_det 300")
    print(
        f"{'metric':<10} {'1 ultralytics':>14} {'2 ul preds+COCO':>16} {'3 campusguard':>14} {'3-1 (pts)':>10} {'2-1':>7} {'3-2':>7}"
    )
    for k in ("map50_95", "map50", "precision", "recall"):
        a, b, c = ul[k], ul_coco[k], ours[k]
        print(
            f"{k:<10} {a:>14.4f} {b:>16.4f} {c:>14.4f} {100 * (c - a):>+10.2f} {100 * (b - a):>+7.2f} {100 * (c - b):>+7.2f}"
        )
    diff = 100 * abs(ours["map50_95"] - ul["map50_95"])
    verdict = "PASS" if diff <= args.tolerance else "FAIL"
    print(f"{verdict}: |campusguard - ultralytics| mAP50-95 = {diff:.2f} points (tolerance {args.tolerance})")
    return 0 if diff <= args.tolerance else 1


if __name__ == "__main__":
    sys.exit(main())
