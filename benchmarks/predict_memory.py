"""Resident memory of `campusguard predict` over a long video: flat after warm-up?

Writes a synthetic 2,000-frame video, runs the same code path as ``campusguard predict``
(`campusguard.io.predict.predict_to_files`: annotated video, predictions.json, YOLO labels)
and samples RSS every 100 frames.

    python benchmarks/predict_memory.py --frames 2000 --out docs/results/predict-memory-cpu.md

Target (issue 2): growth under 20 MB after warm-up.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")

import cv2
import numpy as np
import psutil


def write_video(path: Path, frames: int, size_wh: tuple[int, int] = (640, 360), fps: float = 25.0) -> None:
    """Moving rectangles on a grey background; deterministic."""
    w, h = size_wh
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, size_wh)
    for i in range(frames):
        img = np.full((h, w, 3), 90, np.uint8)
        x = (i * 3) % (w - 60)
        cv2.rectangle(img, (x, h // 3), (x + 40, h // 3 + 90), (40, 60, 200), -1)
        cv2.circle(img, (w - x - 20, h // 2), 25, (200, 180, 40), -1)
        writer.write(img)
    writer.release()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2000)
    ap.add_argument("--model", default=None, help="default: the bundled model, else yolov8n.yaml")
    ap.add_argument("--imgsz", default="320")
    ap.add_argument("--warmup", type=int, default=200, help="frames before the baseline RSS is taken")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from campusguard.detector import Detector
    from campusguard.io import sources
    from campusguard.io.predict import predict_to_files

    model = args.model
    if model is None:
        from campusguard.models.resolve import DEFAULT_MODEL

        model = str(DEFAULT_MODEL) if DEFAULT_MODEL.is_file() else "yolov8n.yaml"
    det = Detector(model, device="cpu", imgsz=args.imgsz)
    proc = psutil.Process()
    samples: list[tuple[int, float]] = []
    original = sources._iter_video

    def sampled(path):  # wraps the frame iterator to sample RSS as frames flow
        for item in original(path):
            if item.frame_index % 100 == 0:
                samples.append((item.frame_index, proc.memory_info().rss / 2**20))
            yield item

    sources._iter_video = sampled
    with tempfile.TemporaryDirectory() as tmp:
        video = Path(tmp) / "long.mp4"
        write_video(video, args.frames)
        predict_to_files(det, [video], Path(tmp) / "out", batch=1, save_media=True, save_txt=True)
    samples.append((args.frames, proc.memory_info().rss / 2**20))
    base = next(m for f, m in samples if f >= args.warmup)
    peak_after = max(m for f, m in samples if f >= args.warmup)
    growth = samples[-1][1] - base
    lines = [
        f"# `predict` resident memory over a {args.frames}-frame video ({model}, imgsz {args.imgsz}, CPU)",
        "",
        "| frame | RSS MiB |",
        "| ---: | ---: |",
        *[f"| {f} | {m:.1f} |" for f, m in samples[:: max(1, len(samples) // 12)]],
        f"| {samples[-1][0]} (end) | {samples[-1][1]:.1f} |",
        "",
        f"RSS at frame {args.warmup} (after warm-up): {base:.1f} MiB; at the end: {samples[-1][1]:.1f} MiB; "
        f"growth {growth:+.1f} MiB (target < 20 MB: {'met' if growth < 20 else 'NOT met'}); peak after warm-up {peak_after:.1f} MiB.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\nCommand: `python benchmarks/predict_memory.py " + " ".join(sys.argv[1:]) + "`\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
