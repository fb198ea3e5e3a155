"""Speed of the synthetic data generator on ONE core (target: >= 50 images/s at 640x640).

Runs in a single process with OpenCV and BLAS/OpenMP threads set to 1, and times the full
path a data set goes through: render, JPEG encode, write image and label files. Background
pre-rendering (once per seed) is included in the "cold" figure and excluded from "steady".

    python benchmarks/synth_speed.py [--images 500] [--imgsz 640] [--video-seconds 10]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import cv2  # noqa: E402

from campusguard.data.synth.images import encode_jpeg, render_image, yolo_label_text  # noqa: E402
from campusguard.data.synth.video import SynthVideo  # noqa: E402

TARGET_IMAGES_PER_S = 50.0


def _write_images(seed: int, start: int, n: int, imgsz: int, out: Path) -> tuple[float, float]:
    """Wall-clock and CPU seconds (this process) to render, encode and write ``n`` images."""
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(start, start + n):
        im = render_image(seed, i, imgsz)
        (out / f"{i:06d}.jpg").write_bytes(encode_jpeg(im.image, im.jpeg_quality))
        (out / f"{i:06d}.txt").write_text(yolo_label_text(im.objects, imgsz, imgsz))
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=500)
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--video-seconds", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=12345)
    args = ap.parse_args()
    cv2.setNumThreads(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        cold, _ = _write_images(args.seed, 0, 32, args.imgsz, out)
        steady, steady_cpu = _write_images(args.seed, 32, args.images, args.imgsz, out)
    t0 = time.perf_counter()
    video = SynthVideo(args.seed, seconds=args.video_seconds)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(video.num_frames):
        video.frame(i)
    frames_s = time.perf_counter() - t0
    ips = args.images / steady
    print(f"cv2 threads: {cv2.getNumThreads()}, single process")
    print(
        f"images {args.imgsz}x{args.imgsz} (render + JPEG + write), first 32 incl. background pre-render: "
        f"{32 / cold:.1f} images/s"
    )
    print(
        f"images {args.imgsz}x{args.imgsz} (render + JPEG + write), steady over {args.images}: {ips:.1f} images/s "
        f"= {ips / TARGET_IMAGES_PER_S:.2f}x the 50 images/s target"
    )
    print(
        f"  CPU time of this process over the same images: {args.images / steady_cpu:.1f} images per CPU-second "
        "(the wall-clock figure drops when other processes share the core)"
    )
    print(f"video 640x360: setup (scene, scripts) {setup:.2f} s, {video.num_frames / frames_s:.1f} frames/s rendered")


if __name__ == "__main__":
    main()
