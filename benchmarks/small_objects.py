"""Do native-resolution region crops find small, far people that a whole-frame letterbox misses?

On 1280x720 synthetic campus frames (`SynthVideo`, ground-truth boxes per frame), the bundled
model detects (a) the whole frame letterboxed to its 320-pixel input (192x320, a 4x downscale)
and (b) the motion gate's regions (`plan_regions`) around the true boxes, i.e. crops of at least
320x320 at native resolution (larger around large people, by ``--margin``), merged back with `merge_region_detections`. Recall of people is reported
per height band (IoU >= 0.5 with a person detection).

    python benchmarks/small_objects.py --seeds 0,2,4 --frames 15 --margin 1.0
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from campusguard.data.synth.video import SynthVideo
from campusguard.detector import Detector
from campusguard.motion import RegionPlan, crop_regions, merge_region_detections, plan_regions
from campusguard.ops.boxes import box_iou

BANDS = ((0, 30), (30, 50), (50, 80), (80, 10_000))  # person height in 720p pixels


def hits(truth: np.ndarray, dets: np.ndarray) -> np.ndarray:
    """Which true boxes have a detection with IoU >= 0.5."""
    if len(truth) == 0 or len(dets) == 0:
        return np.zeros(len(truth), bool)
    return (box_iou(truth, dets) >= 0.5).any(axis=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,2,4")
    ap.add_argument("--frames", type=int, default=20, help="frames per seed, spread over the first 20 s")
    ap.add_argument("--margin", type=float, default=1.0, help="region margin (the camera config's motion.margin)")
    args = ap.parse_args()
    det = Detector(imgsz=320)
    found = {b: [0, 0, 0] for b in BANDS}  # whole, crops, total
    images = {"whole": 0, "crops": 0}
    for seed in (int(s) for s in args.seeds.split(",")):
        video = SynthVideo(seed, (1280, 720), 20.0, 10)
        for i in np.linspace(10, video.num_frames - 1, args.frames).astype(int):
            frame, objects = video.frame(int(i))
            people = np.array([o["xyxy"] for o in objects if o["class_id"] == 0], np.float32).reshape(-1, 4)
            if len(people) == 0:
                continue
            whole = det.predict_batch([frame])[0]
            regions = plan_regions(people, (1280, 720), 320, args.margin, 1.0)
            plan = RegionPlan("full", "keyframe") if regions is None else RegionPlan("regions", "motion", regions)
            crops = crop_regions(frame, plan)
            merged = merge_region_detections(plan, det.predict_batch(crops), 0.7, (1280, 720))
            images["whole"] += 1
            images["crops"] += len(crops)
            w_hit = hits(people, whole.xyxy[whole.class_id == 0])
            c_hit = hits(people, merged.xyxy[merged.class_id == 0])
            heights = people[:, 3] - people[:, 1]
            for lo, hi in BANDS:
                sel = (heights >= lo) & (heights < hi)
                found[(lo, hi)][0] += int(w_hit[sel].sum())
                found[(lo, hi)][1] += int(c_hit[sel].sum())
                found[(lo, hi)][2] += int(sel.sum())
    rows = [
        {
            "height_px": f"{lo}-{hi if hi < 10_000 else ''}",
            "people": n,
            "recall_whole": round(w / n, 3) if n else None,
            "recall_crops": round(c / n, 3) if n else None,
        }
        for (lo, hi), (w, c, n) in found.items()
    ]
    print(json.dumps({"margin": args.margin, "images": images, "bands": rows}, indent=2))


if __name__ == "__main__":
    main()
