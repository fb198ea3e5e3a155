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
import sys
import tempfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.5, help="allowed |difference| in mAP50-95, in points")
    args = ap.parse_args()

    from campusguard.eval.ultralytics_val import (
        VAL_METRICS,
        metric_dict,
        score_ultralytics_predictions,
        ultralytics_val,
    )
    from campusguard.eval.validate import validate_model
    from campusguard.train.trainer import write_resolved_data_yaml

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data_yaml = write_resolved_data_yaml(args.data, work / "data.yaml")
        ul, pred_json = ultralytics_val(args.model, data_yaml, args.imgsz, args.batch, work)
        ul_coco = score_ultralytics_predictions(pred_json, data_yaml)
    ours = metric_dict(validate_model(args.model, args.data, imgsz=args.imgsz, device="cpu", batch=args.batch).metrics)

    print(f"model {args.model}  data {args.data}  imgsz {args.imgsz}  conf 0.001  iou 0.7  max_det 300")
    print(
        f"{'metric':<10} {'1 ultralytics':>14} {'2 ul preds+COCO':>16} {'3 campusguard':>14} {'3-1 (pts)':>10} {'2-1':>7} {'3-2':>7}"
    )
    for k in VAL_METRICS:
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
