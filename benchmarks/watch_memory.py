"""Resident memory of the whole watch pipeline over a long run from a looping source.

Runs `WatchService` on a short synthetic video played in a loop (file mode: every frame
processed) with tracking, zone rules, the SQLite event store and an annotated video, samples
the process RSS every ``--every`` frames and reports the growth after warm-up.

    python benchmarks/watch_memory.py --frames 20000 --out docs/results/watch-memory-cpu

Target (issue 5): RSS growth < 2% after warm-up over 20,000 frames.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")

import psutil


def make_video(folder: Path, seconds: float, size_wh: tuple[int, int], fps: int) -> tuple[Path, dict | None]:
    """The synthetic campus video (and its truth) when the generator is available, else moving shapes."""
    try:
        from campusguard.data.synth.video import generate_video

        truth = generate_video(1, folder, size_wh=size_wh, seconds=seconds, fps=fps, name="loop")
        return folder / truth.video, json.loads((folder / truth.video).with_suffix(".json").read_text())
    except ImportError:
        import cv2
        import numpy as np

        path = folder / "loop.mp4"
        w, h = size_wh
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
        for i in range(int(seconds * fps)):
            img = np.full((h, w, 3), 90, np.uint8)
            x = (5 * i) % (w - 20)
            cv2.rectangle(img, (x, h // 2), (x + 12, h // 2 + 30), (20, 20, 200), -1)
            writer.write(img)
        writer.release()
        return path, None


def config_text(video: Path, tmp: Path, imgsz: int, model: str | None) -> str:
    model_line = f"  model: {model}\n" if model else ""
    return f"""\
detector:
{model_line}  imgsz: {imgsz}
  batch_size: 1
cameras:
  - id: loop
    source: {video}
    loop: true
    zones:
      - name: plaza
        units: fraction
        polygon: [[0.05, 0.3], [0.95, 0.3], [0.95, 1.0], [0.05, 1.0]]
    rules:
      - kind: intrusion
        zone: plaza
      - kind: crowd
        zone: plaza
        min_count: 2
        min_seconds: 1
      - kind: loitering
        zone: plaza
        min_seconds: 3
alerts:
  - kind: jsonl
    path: {tmp / "events.jsonl"}
storage:
  sqlite: {tmp / "events.db"}
outputs:
  annotated_video_dir: {tmp / "video"}
  metrics_interval_s: 0
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=20000)
    ap.add_argument("--warmup", type=int, default=2000, help="frames before the baseline sample")
    ap.add_argument("--every", type=int, default=1000, help="sample RSS every this many frames")
    ap.add_argument("--model", default=None, help="model (default: the bundled one, else yolov8n.yaml: random weights)")
    ap.add_argument("--imgsz", type=int, default=160)
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    args = ap.parse_args()

    from campusguard.app.config import parse_config
    from campusguard.app.service import WatchService
    from campusguard.models.resolve import DEFAULT_MODEL

    model = args.model or (None if DEFAULT_MODEL.is_file() else "yolov8n.yaml")
    tmp = Path(tempfile.mkdtemp(prefix="watch-mem-"))
    video, _ = make_video(tmp, seconds=10, size_wh=(320, 180), fps=10)
    text = config_text(video, tmp, args.imgsz, model)
    service = WatchService(parse_config(text, "memory.yaml"), out=io.StringIO())
    proc = psutil.Process()
    samples: list[tuple[int, float, float]] = []  # (frames, seconds, rss MiB)
    done = threading.Event()
    t0 = time.perf_counter()
    service.start()
    metrics = service.metrics["loop"]
    next_sample = 0
    while not done.is_set():
        processed = metrics.frames_processed
        if processed >= next_sample:
            samples.append((processed, time.perf_counter() - t0, proc.memory_info().rss / 2**20))
            print(f"frames {processed:6d}  t {samples[-1][1]:6.1f} s  rss {samples[-1][2]:7.1f} MiB", flush=True)
            next_sample += args.every
        if processed >= args.frames:
            done.set()
        if not service.wait(0.05) and service.failed.is_set():
            break
    service.stop()
    service.wait()
    ok = service.finish()
    base = next(s for s in samples if s[0] >= args.warmup)
    last = samples[-1]
    peak = max(s[2] for s in samples if s[0] >= args.warmup)
    growth = (last[2] - base[2]) / base[2]
    result = {
        "frames": last[0],
        "warmup_frames": base[0],
        "rss_after_warmup_mib": round(base[2], 1),
        "rss_end_mib": round(last[2], 1),
        "rss_peak_after_warmup_mib": round(peak, 1),
        "growth_pct": round(100 * growth, 2),
        "fps": round(last[0] / last[1], 1),
        "model": model or "bundled default",
        "imgsz": args.imgsz,
        "clean_shutdown": ok,
        "samples": samples,
    }
    lines = [
        "# Watch pipeline memory over a long run (CPU)",
        "",
        f"`python benchmarks/watch_memory.py --frames {args.frames}` on {platform.machine()}, {os.cpu_count()} CPUs: "
        f"a 320x180 synthetic video looped, model {result['model']} at imgsz {args.imgsz}, tracking, 3 zone rules, "
        "SQLite store, JSONL sink, annotated video.",
        "",
        f"- frames processed: {last[0]} in {last[1]:.0f} s ({result['fps']} frames/s)",
        f"- RSS after warm-up ({base[0]} frames): {base[2]:.1f} MiB",
        f"- RSS at the end: {last[2]:.1f} MiB (peak after warm-up {peak:.1f} MiB)",
        f"- growth after warm-up: {100 * growth:+.2f}% (target < 2%)",
        f"- clean shutdown: {ok}",
        "",
        "| frames | seconds | RSS MiB |",
        "| ---: | ---: | ---: |",
        *[f"| {f} | {t:.0f} | {r:.1f} |" for f, t, r in samples],
    ]
    text_out = "\n".join(lines)
    print(text_out)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text_out + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
