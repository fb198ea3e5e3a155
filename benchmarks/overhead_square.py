"""Where `Detector` loses time against a bare ``InferenceSession.run`` and Ultralytics' ONNX predict
on one square 960x960 frame (issue 16), measured side by side.

Interleaved rounds, and the order of the contenders ROTATES every round, so that no contender
always runs right after another one's ONNX Runtime pool (whose idle threads spin-wait) or after
the PyTorch predict. Ratios are computed per round and their median reported.

    python benchmarks/overhead_square.py --rounds 9 --iters 10 --out docs/results/overhead-square-cpu.md

Contenders split the Detector's frame -> Detections call into its parts: the bare run on a fixed
blob, the same run through CampusGuard's backend, our letterbox + batch + bare run, the full
Detector, the Detector with ONNX Runtime's spinning off, and Ultralytics' predict on the same
file. The model has RANDOM weights (built from the architecture config): right for speed only.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")

import numpy as np
from overhead import report, round_ratio, square_photo, timed  # the sibling script: same timer, photo and report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8n.yaml")
    ap.add_argument("--frame", type=int, default=960, help="side of the square frame")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="also write the table as Markdown here")
    ap.add_argument(
        "--no-spin", action="store_true", help="the bare session and the Detector both without spin-waiting threads"
    )
    args = ap.parse_args()

    import onnxruntime as ort
    from ultralytics import YOLO

    from campusguard.detector import Detector
    from campusguard.models.export import export_onnx
    from campusguard.models.registry import exported_onnx_path
    from campusguard.models.resolve import parse_model_ref
    from campusguard.ops.preprocess import letterbox, make_batch

    ref = parse_model_ref(args.model)
    onnx_path = exported_onnx_path(ref, (640, 640), 1, False)
    if not onnx_path.is_file():
        export_onnx(ref, onnx_path, imgsz_hw=(640, 640))
    frame = square_photo(args.frame)
    opts = ort.SessionOptions()
    if args.no_spin:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(str(onnx_path), sess_options=opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    blob = make_batch([letterbox(frame, (640, 640))[0]])
    det = Detector(onnx_path, device="cpu", spinning=not args.no_spin)
    det_nospin = Detector(onnx_path, device="cpu", spinning=False)
    y_onnx = YOLO(str(onnx_path), task="detect")
    buf: list[np.ndarray | None] = [None]

    def ours_pre_then_run() -> object:
        buf[0] = make_batch([letterbox(frame, (640, 640))[0]], buf[0])
        return sess.run(None, {name: buf[0]})

    contenders: dict[str, Callable[[], object]] = {
        "bare InferenceSession.run, fixed blob": lambda: sess.run(None, {name: blob}),
        "Detector backend.infer, fixed blob": lambda: det.backend.infer(blob),
        "our letterbox + make_batch + bare run": ours_pre_then_run,
        "Detector, frame -> Detections": lambda: det(frame),
        "Detector, spinning off": lambda: det_nospin(frame),
        "Ultralytics predict, same ONNX file": lambda: y_onnx.predict(frame, imgsz=640, verbose=False),
    }
    keys = list(contenders)
    for fn in contenders.values():  # warm-up
        for _ in range(3):
            fn()
    per_round: dict[str, list[float]] = {k: [] for k in keys}
    stages: list[tuple[float, float, float]] = []
    for r in range(args.rounds):
        order = keys[r % len(keys) :] + keys[: r % len(keys)]
        for key in order:
            per_round[key].append(timed(contenders[key], args.iters))
            if key == "Detector, frame -> Detections":
                t = det.timings
                stages.append((t.preprocess_ms, t.inference_ms, t.postprocess_ms))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)

    med = {k: statistics.median(v) for k, v in per_round.items()}

    def ratio(a: str, b: str) -> float:
        return round_ratio(per_round, a, b)

    pre, inf, post = (statistics.median(s[i] for s in stages) for i in range(3))
    lines = [
        f"# Detector overhead on a square {args.frame}x{args.frame} frame ({args.model} at 640, batch 1, CPU)",
        "",
        f"{args.rounds} interleaved rounds x {args.iters} frames, contender order rotated every round"
        + (
            "; bare session and Detector with spinning OFF."
            if args.no_spin
            else "; ONNX Runtime defaults (spinning on)."
        ),
        f"Machine: {os.cpu_count()} logical CPUs, SHARED with other work (only the ratios mean much); "
        f"ONNX Runtime {ort.__version__}. Model: {args.model}"
        + (" with RANDOM weights (speed only)." if ref.kind == "arch" else "."),
        "",
        "| contender | median ms/frame | frames/s |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {k} | {med[k]:.1f} | {1000 / med[k]:.1f} |" for k in keys]
    lines += [
        "",
        f"Detector stages (median of the last call per round): pre-processing {pre:.1f} ms, "
        f"inference {inf:.1f} ms, post-processing {post:.1f} ms.",
        "",
        "| throughput ratio (median of per-round ratios) | value | target |",
        "| --- | ---: | ---: |",
    ]
    checks = [
        ("Detector / bare run", ratio(keys[3], keys[0]), 0.97),
        ("Detector / Ultralytics ONNX predict", ratio(keys[3], keys[5]), 1.0),
        ("Detector, spinning off / bare run", ratio(keys[4], keys[0]), None),
        ("backend.infer / bare run (same blob)", ratio(keys[1], keys[0]), None),
        ("letterbox + batch + bare run / bare run", ratio(keys[2], keys[0]), None),
        ("Detector / letterbox + batch + bare run", ratio(keys[3], keys[2]), None),
    ]
    report(lines, checks, args.out, "overhead_square.py", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
