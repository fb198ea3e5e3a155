"""Fall-rule precision, recall and F1 on synthetic videos with scripted falls, demo and held-out seeds.

Every seed is a synthetic scenario rendered with ``falls=True`` (a person walks off the
sidewalk, falls, lies still, gets up; the truth incident is computed from the rendered boxes
with the rule's own track-shape definition, `campusguard.data.synth.incidents`). The fall rule
is configured exactly as `campusguard demo` configures it (`campusguard.app.demo.demo_config`),
never per seed.

Two detectors:

- ``--detector truth``: the rendered ground-truth boxes go through the real tracker and rule
  engine (no detector): the rule's own F1, free of detector errors (the truth uses the same
  definition on the same boxes, so this checks tracking, debouncing and timing);
- ``--detector truth-noisy``: the same with 5% of the boxes dropped and 1 px of box jitter,
  a crude stand-in for a good detector;
- ``--detector default`` (the bundled synthetic model) or any model (``fall-yolov8s``, a
  ``.onnx``): the whole `campusguard demo` pipeline, end to end.

    python benchmarks/fall_scores.py --detector truth --seeds 0-3 --held-out 10-19 \
        --out docs/results/fall-scores-truth

Targets (issue 10): fall F1 >= 0.9 on the demo seeds, >= 0.8 held out.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

os.environ.setdefault("YOLO_OFFLINE", "1")

from incident_scores import fall_row, pooled, seed_groups  # noqa: E402  (benchmarks/ is on the path when run as a script)


def scores_on_truth_boxes(seed: int, seconds: float, work: Path, noisy: bool = False) -> Any:
    """Scores of the real tracker + rules fed with the rendered ground-truth boxes (optionally
    with 5% missed boxes and 1 px jitter, seeded by the video seed)."""
    import numpy as np

    from campusguard.app.config import parse_config
    from campusguard.app.demo import demo_config
    from campusguard.app.engine.wiring import build_camera
    from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth
    from campusguard.data.synth.classes import COCO_NAMES
    from campusguard.data.synth.video import SynthVideo
    from campusguard.detections import Detections

    video = SynthVideo(seed, seconds=seconds, falls=True)
    truth = video.truth()
    truth_path = truth.save(work / f"seed{seed}.json")
    import yaml

    cfg = demo_config(truth.to_dict(), work / f"seed{seed}.mp4", work)
    loaded = parse_config(yaml.safe_dump(cfg), "demo.yaml")
    parts = build_camera(loaded, 0, dict(enumerate(COCO_NAMES)), truth.resolution_wh, float(truth.fps))
    events = []
    rng = np.random.default_rng(seed)
    for frame in truth.frames:
        objs = [o for o in frame["objects"] if not noisy or rng.random() > 0.05]
        xyxy = np.asarray([o["xyxy"] for o in objs], np.float32).reshape(-1, 4)
        if noisy:
            xyxy += rng.normal(0, 1.0, xyxy.shape).astype(np.float32)
        dets = Detections(
            xyxy,
            np.full(len(objs), 0.9, np.float32),
            np.asarray([o["class_id"] for o in objs], np.int64),
        )
        tracked = parts.tracker.update(dets, frame["t"])
        events += parts.rules.update(frame["t"], tracked, frame["frame"])
    events += parts.rules.close(truth.frames[-1]["t"])
    return evaluate_events(load_truth(truth_path), incidents_from_events(events))


def scores_end_to_end(
    seed: int,
    seconds: float,
    model: str | None,
    work: Path,
    precision: Literal["auto", "fp32", "int8"] | None = None,
    imgsz: int | None = None,
) -> Any:
    """Scores of `campusguard demo` on the seed's video with scripted falls (``precision``, ``imgsz``:
    the detector's, none: the example config's)."""
    from campusguard.app.demo import run_demo

    return run_demo(
        seed=seed,
        out_dir=work / f"seed{seed}",
        seconds=seconds,
        model=model,
        out=io.StringIO(),
        falls=True,
        precision=precision,
        imgsz=imgsz,
    ).scores


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--detector", default="truth", help="truth, truth-noisy, default (bundled model) or a model reference"
    )
    ap.add_argument("--seeds", default="0-3", help="demo-like seeds")
    ap.add_argument("--held-out", default="10-19", help="seeds not looked at while choosing the rule defaults")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument(
        "--precision",
        choices=("auto", "fp32", "int8"),
        default=None,
        help="the detector's precision (default: the demo config's, auto: INT8 on CPUs with VNNI or AMX)",
    )
    ap.add_argument("--imgsz", type=int, default=None, help="the detector's input size (default: the demo config's)")
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    args = ap.parse_args()

    from campusguard.doctor import cpu_name

    work = Path(tempfile.mkdtemp(prefix="fall-scores-"))
    rows = []
    for group, seeds in seed_groups(args.seeds, args.held_out):
        for seed in seeds:
            t0 = time.perf_counter()
            if args.detector in ("truth", "truth-noisy"):
                scores = scores_on_truth_boxes(seed, args.seconds, work, noisy=args.detector == "truth-noisy")
            else:
                model = None if args.detector == "default" else args.detector
                scores = scores_end_to_end(seed, args.seconds, model, work, precision=args.precision, imgsz=args.imgsz)
            row = fall_row(group, seed, scores, time.perf_counter() - t0)
            rows.append(row)
            print(
                f"{group:8s} seed {seed:3d}: fall TP {row['fall_tp']} FP {row['fall_fp']} FN {row['fall_fn']}; "
                f"all kinds TP {row['all_tp']} FP {row['all_fp']} FN {row['all_fn']}",
                flush=True,
            )

    summary = {}
    for group in dict.fromkeys(r["group"] for r in rows):
        g = [r for r in rows if r["group"] == group]
        for prefix in ("fall", "all"):
            p = pooled(g, prefix=f"{prefix}_")
            summary[f"{group}/{prefix}"] = {k: p[k] for k in ("tp", "fp", "fn", "precision", "recall", "f1")}
    for key, s in summary.items():
        print(
            f"{key:14s} P {s['precision']:.3f} R {s['recall']:.3f} F1 {s['f1']:.3f} (TP {s['tp']} FP {s['fp']} FN {s['fn']})"
        )
    if args.out is not None:
        cmd = (
            f"python benchmarks/fall_scores.py --detector {args.detector} --seeds {args.seeds} "
            f"--held-out {args.held_out} --seconds {args.seconds:g}"
            + (f" --precision {args.precision}" if args.precision else "")
            + (f" --imgsz {args.imgsz}" if args.imgsz else "")
        )
        args.out.with_suffix(".json").write_text(
            json.dumps({"command": cmd, "summary": summary, "rows": rows}, indent=2) + "\n"
        )
        lines = [
            f"# Fall rule scores ({args.detector})",
            "",
            f"`{cmd}`: synthetic 640x360 videos at 10 fps with scripted falls (`falls=True`), fall rule as"
            " `campusguard demo` configures it (track-shape signal, min 3 s down), the example config's detector"
            " unless the command says otherwise. CPU: " + cpu_name() + ", 2 vCPUs.",
            "",
            "| group | kinds | TP | FP | FN | precision | recall | F1 |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for key, s in summary.items():
            group, kinds = key.split("/")
            lines.append(
                f"| {group} | {kinds} | {s['tp']} | {s['fp']} | {s['fn']} | {s['precision']:.3f} | {s['recall']:.3f} | {s['f1']:.3f} |"
            )
        lines += [
            "",
            "| group | seed | fall TP | fall FP | fall FN | all TP | all FP | all FN | s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in rows:
            lines.append(
                f"| {r['group']} | {r['seed']} | {r['fall_tp']} | {r['fall_fp']} | {r['fall_fn']} | {r['all_tp']} | {r['all_fp']} | {r['all_fn']} | {r['seconds']} |"
            )
        args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
