"""Watch pipeline throughput against the detector alone, measured side by side in one run.

Every round times, on the same 1280x720 video and the same loaded detector:

- ``model``: the detector alone, frames already decoded in memory, batch 1 (model-only throughput);
- ``model_b4`` / ``pipe1_b4``: the same with up to 4 frames per inference call (for one camera the
  pipeline batches consecutive frames when they are queued, as the default config does);
- ``pipe1``: the full `watch` pipeline on one stream (decode, detect, track, rules, event store),
  every frame processed (file mode, no drops);
- ``pipe2`` / ``pipe4``: 2 and 4 streams of the same file, frames batched across cameras;
- ``model_sq`` / ``pipe1_sq``: the same with a square 640x640 input instead of the
  aspect-matched 384x640.

Ratios are computed per round and their median reported (interleaving, in alternating order,
spreads machine noise over all contenders alike). Targets (issue 5): pipe1 / model >= 0.9; pipe2 and pipe4 total
throughput > pipe1; the aspect-matched input against 640x640.

    python benchmarks/watch_throughput.py --rounds 3 --frames 100 --out docs/results/watch-throughput-cpu

The default model is the bundled one (YOLOv8n trained on synthetic campus scenes, dynamic
input, run here at 640 so a 720p frame gets 384x640), or yolov8n with RANDOM weights when the
package has no bundled model.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")

import cv2
import numpy as np


def make_video(path: Path, frames: int, size_wh: tuple[int, int] = (1280, 720), fps: float = 25.0) -> Path:
    """A 1280x720 MP4: the synthetic campus generator when available, else moving shapes on texture."""
    try:
        from campusguard.data.synth.video import generate_video

        truth = generate_video(0, path.parent, size_wh=size_wh, seconds=frames / fps, fps=int(fps), name=path.stem)
        return path.parent / truth.video
    except ImportError:
        pass
    rng = np.random.default_rng(0)
    w, h = size_wh
    background = cv2.GaussianBlur(rng.integers(0, 255, (h, w, 3), dtype=np.uint8), (0, 0), 3)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    for i in range(frames):
        img = background.copy()
        for k in range(6):
            x = int((100 + 37 * k + 9 * i) % (w - 80))
            cv2.rectangle(img, (x, 300 + 40 * k % 300), (x + 60, 420 + 40 * k % 300), (40 * k, 200, 255 - 40 * k), -1)
        writer.write(img)
    writer.release()
    return path


def watch_config(video: Path, cameras: int, tmp: Path, batch_size: int) -> str:
    """A watch config with ``cameras`` streams of ``video``, a zone and three rules each, no outputs."""
    cams = "".join(
        f"""
  - id: cam{c}
    source: {video}
    zones:
      - name: plaza
        units: fraction
        polygon: [[0.1, 0.4], [0.9, 0.4], [0.9, 1.0], [0.1, 1.0]]
    rules:
      - kind: intrusion
        zone: plaza
      - kind: crowd
        zone: plaza
        min_count: 3
      - kind: loitering
        zone: plaza
"""
        for c in range(cameras)
    )
    return f"""\
detector:
  batch_size: {batch_size}
  batch_wait_ms: 2
cameras:{cams}
alerts: []
storage:
  sqlite: {tmp / f"events-{cameras}-{time.monotonic_ns()}.db"}
outputs:
  metrics_interval_s: 0
"""


def time_model(detector: object, frames: list[np.ndarray], batch: int = 1) -> float:
    """Frames per second of ``detector`` alone on frames in memory, ``batch`` frames per call."""
    t0 = time.perf_counter()
    for i in range(0, len(frames), batch):
        detector.predict_batch(frames[i : i + batch])  # type: ignore[attr-defined]
    return len(frames) / (time.perf_counter() - t0)


def time_pipeline(
    detector: object, video: Path, cameras: int, frames: int, tmp: Path, batch_size: int | None = None
) -> float:
    """Total frames per second (all cameras) of the whole watch pipeline."""
    from campusguard.app.config import parse_config
    from campusguard.app.service import WatchService

    service = WatchService(
        parse_config(watch_config(video, cameras, tmp, batch_size=batch_size or cameras), "bench.yaml"),
        detector_factory=lambda *a: detector,
        out=io.StringIO(),
    )
    t0 = time.perf_counter()
    service.start()
    service.wait()
    elapsed = time.perf_counter() - t0
    assert service.finish(), "pipeline failed"
    processed = sum(m.frames_processed for m in service.metrics.values())
    assert processed == cameras * frames, f"processed {processed} of {cameras * frames} frames"
    return processed / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model (default: the bundled one, else yolov8n.yaml: random weights)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames", type=int, default=100, help="frames of the 1280x720 test video")
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    ap.add_argument(
        "--spinning",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="ONNX Runtime spin-waiting threads (the watch app's default, detector.spinning, is off)",
    )
    args = ap.parse_args()

    from campusguard.detector import Detector
    from campusguard.models.resolve import DEFAULT_MODEL

    if args.model is None:
        args.model = str(DEFAULT_MODEL) if DEFAULT_MODEL.is_file() else "yolov8n.yaml"
    tmp = Path(tempfile.mkdtemp(prefix="watch-bench-"))
    video = make_video(tmp / "bench720.mp4", args.frames)
    cap = cv2.VideoCapture(str(video))
    frames = []
    while len(frames) < args.frames:
        ok, img = cap.read()
        if not ok:
            break
        frames.append(img)
    cap.release()
    n = len(frames)
    assert n == args.frames, f"video has {n} frames, wanted {args.frames}"
    wide = Detector(args.model, imgsz=640, dynamic=True, spinning=args.spinning)  # aspect-matched: 384x640 for 16:9
    square = Detector(args.model, imgsz=640, dynamic=True, rect=False, spinning=args.spinning)  # 640x640
    print(f"model {args.model} ({'RANDOM weights' if wide.random_weights else 'trained'}), provider {wide.provider}")
    print(
        f"input for 720x1280: aspect-matched {wide.input_hw((720, 1280))}, square {square.input_hw((720, 1280))}; {n} frames per stream"
    )
    for d in (wide, square):  # warm-up
        for f in frames[:3]:
            d(f)

    contenders = {
        "model": lambda: time_model(wide, frames),
        "pipe1": lambda: time_pipeline(wide, video, 1, n, tmp),
        "model_b4": lambda: time_model(wide, frames, batch=4),
        "pipe1_b4": lambda: time_pipeline(wide, video, 1, n, tmp, batch_size=4),
        "pipe2": lambda: time_pipeline(wide, video, 2, n, tmp),
        "pipe4": lambda: time_pipeline(wide, video, 4, n, tmp),
        "model_sq": lambda: time_model(square, frames),
        "pipe1_sq": lambda: time_pipeline(square, video, 1, n, tmp),
    }
    fps: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(args.rounds):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))  # ABC CBA: drift hits all alike
        for name in order:
            fps[name].append(contenders[name]())
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f} fps" for k, v in fps.items()), flush=True)

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(fps[a], fps[b], strict=True))

    ratios = {
        "pipe1 / model (batch 1; target >= 0.9)": ratio("pipe1", "model"),
        "pipe1_b4 / model_b4 (up to 4 consecutive frames per call)": ratio("pipe1_b4", "model_b4"),
        "pipe1_b4 / model (batch 1)": ratio("pipe1_b4", "model"),
        "pipe2 / pipe1 total (target > 1)": ratio("pipe2", "pipe1"),
        "pipe4 / pipe1 total (target > 1)": ratio("pipe4", "pipe1"),
        "model 384x640 / model 640x640": ratio("model", "model_sq"),
        "pipe1 384x640 / pipe1 640x640": ratio("pipe1", "pipe1_sq"),
        "pipe1_sq / model_sq": ratio("pipe1_sq", "model_sq"),
    }
    medians = {k: statistics.median(v) for k, v in fps.items()}
    lines = [
        "# Watch pipeline throughput (CPU)",
        "",
        f"`python benchmarks/watch_throughput.py --rounds {args.rounds} --frames {args.frames}` on {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, model {Path(args.model).name} ({'RANDOM weights' if wide.random_weights else 'trained'}), provider {wide.provider}, "
        f"1280x720 video; median of {args.rounds} interleaved rounds; load average at the end {os.getloadavg()[0]:.1f} "
        "(other processes on the machine slow every contender alike within a round, not the ratios' meaning).",
        "",
        "| contender | frames/s (median) | per round |",
        "| --- | ---: | --- |",
        *[f"| {k} | {medians[k]:.1f} | {', '.join(f'{x:.1f}' for x in fps[k])} |" for k in fps],
        "",
        "| ratio | median |",
        "| --- | ---: |",
        *[f"| {k} | {v:.3f} |" for k, v in ratios.items()],
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text + "\n")
        args.out.with_suffix(".json").write_text(
            json.dumps(
                {"fps": fps, "median_fps": medians, "ratios": ratios, "frames": n, "model": Path(args.model).name},
                indent=2,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
