"""Detector overhead against raw ONNX Runtime and Ultralytics, measured side by side.

Interleaved rounds: every round times each contender for the same number of frames, so
machine noise hits all alike; ratios are computed per round and their median reported.

    python benchmarks/overhead.py --rounds 7 --iters 10 --out docs/results/overhead-cpu.md

Targets (issue 2): Detector >= 0.95x raw ``InferenceSession.run``, >= 1.8x Ultralytics PyTorch
predict, >= 1.05x Ultralytics ONNX predict. yolov8n here has RANDOM weights (built from the
architecture config): right for speed, meaningless for accuracy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")

import cv2
import numpy as np


def timed(fn: Callable[[], object], iters: int) -> float:
    """Mean milliseconds per call over ``iters`` calls."""
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1000 / iters


def round_ratio(per_round: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of throughput(a) / throughput(b) = time(b) / time(a), from per-round ms."""
    return statistics.median(tb / ta for ta, tb in zip(per_round[a], per_round[b], strict=True))


def square_photo(size: int = 640) -> np.ndarray:
    import ultralytics

    img = cv2.imread(str(Path(ultralytics.__file__).parent / "assets" / "bus.jpg"))
    h, w = img.shape[:2]
    s = min(h, w)
    return cv2.resize(img[(h - s) // 2 : (h + s) // 2, (w - s) // 2 : (w + s) // 2], (size, size))


def wide_photo() -> np.ndarray:
    import ultralytics

    return cv2.imread(str(Path(ultralytics.__file__).parent / "assets" / "zidane.jpg"))  # 1280x720


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8n.yaml")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="also write the table as Markdown here")
    args = ap.parse_args()

    import onnxruntime as ort
    import torch
    from ultralytics import YOLO

    from campusguard.backends.torch_backend import build_architecture
    from campusguard.detector import Detector
    from campusguard.models.export import export_onnx
    from campusguard.models.registry import cache_dir, exported_onnx_path
    from campusguard.models.resolve import parse_model_ref
    from campusguard.ops.preprocess import letterbox, make_batch

    ref = parse_model_ref(args.model)
    onnx_sq = exported_onnx_path(ref, (640, 640), 1, False)
    if not onnx_sq.is_file():
        export_onnx(ref, onnx_sq, imgsz_hw=(640, 640))
    onnx_wide = exported_onnx_path(ref, (384, 640), 1, False)
    if not onnx_wide.is_file():
        export_onnx(ref, onnx_wide, imgsz_hw=(384, 640))
    pt = cache_dir() / f"{ref.name}-random.pt"
    if ref.kind == "arch" and not pt.is_file():
        torch.save({"model": build_architecture(args.model), "train_args": {}}, pt)
    elif ref.kind == "pt":
        pt = ref.path

    frame = square_photo()
    wide = wide_photo()
    sess = ort.InferenceSession(str(onnx_sq), providers=["CPUExecutionProvider"])
    blob = make_batch([letterbox(frame, (640, 640))[0]])
    name = sess.get_inputs()[0].name
    det = Detector(onnx_sq, device="cpu")
    det_wide_static = Detector(onnx_sq, device="cpu")
    det_wide_matched = Detector(onnx_wide, device="cpu")
    y_pt = YOLO(str(pt), task="detect")
    y_onnx = YOLO(str(onnx_sq), task="detect")
    torch.set_num_threads(os.cpu_count() or 1)

    contenders: dict[str, Callable[[], object]] = {
        "raw InferenceSession.run (640x640)": lambda: sess.run(None, {name: blob}),
        "CampusGuard Detector, frame -> Detections (640x640)": lambda: det(frame),
        "Ultralytics predict, PyTorch model": lambda: y_pt.predict(frame, imgsz=640, verbose=False),
        "Ultralytics predict, same ONNX file": lambda: y_onnx.predict(frame, imgsz=640, verbose=False),
        "16:9 frame: Ultralytics PyTorch predict (rect 384x640)": lambda: y_pt.predict(wide, imgsz=640, verbose=False),
        "16:9 frame: Detector, static 640x640 ONNX": lambda: det_wide_static(wide),
        "16:9 frame: Detector, aspect-matched 384x640 ONNX": lambda: det_wide_matched(wide),
    }
    for fn in contenders.values():  # warm-up
        for _ in range(3):
            fn()
    per_round: dict[str, list[float]] = {k: [] for k in contenders}
    for r in range(args.rounds):
        for key, fn in contenders.items():
            per_round[key].append(timed(fn, args.iters))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    keys = list(contenders)
    med = {k: statistics.median(v) for k, v in per_round.items()}

    def ratio(a: str, b: str) -> float:
        return round_ratio(per_round, a, b)

    lines = [
        f"# Detector overhead ({args.model}, batch 1, CPU, {args.rounds} interleaved rounds x {args.iters} frames)",
        "",
        f"Machine: {os.cpu_count()} logical CPUs; ONNX Runtime {ort.__version__}; torch {torch.__version__}.",
        f"Model: {args.model} {'with RANDOM weights (speed only)' if ref.kind == 'arch' else ''}.",
        "",
        "| contender | median ms/frame | frames/s |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {k} | {med[k]:.1f} | {1000 / med[k]:.1f} |" for k in keys]
    checks = [
        ("Detector / raw run", ratio(keys[1], keys[0]), 0.95),
        ("Detector / Ultralytics PyTorch predict", ratio(keys[1], keys[2]), 1.8),
        ("Detector / Ultralytics ONNX predict", ratio(keys[1], keys[3]), 1.05),
        ("16:9 aspect-matched Detector / Ultralytics PyTorch predict", ratio(keys[6], keys[4]), None),
        ("16:9 aspect-matched / static 640x640 Detector", ratio(keys[6], keys[5]), None),
    ]
    lines += ["", "| throughput ratio (median of per-round ratios) | value | target |", "| --- | ---: | ---: |"]
    report(lines, checks, args.out, "overhead.py", digits=2)
    return 0


def report(
    lines: list[str], checks: list[tuple[str, float, float | None]], out: Path | None, script: str, digits: int
) -> None:
    """Append the ratio rows (with met / NOT met against each target) to ``lines``, print, and write ``out``."""
    for label, value, target in checks:
        verdict = "" if target is None else (f">= {target} " + ("met" if value >= target else "NOT met"))
        lines.append(f"| {label} | {value:.{digits}f}x | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + f"\nCommand: `python benchmarks/{script} " + " ".join(sys.argv[1:]) + "`\n")


if __name__ == "__main__":
    sys.exit(main())
