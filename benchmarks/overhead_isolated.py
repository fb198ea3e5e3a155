"""`Detector` against a bare ``InferenceSession.run`` and Ultralytics' ONNX predict on one square
frame, each contender in ITS OWN PROCESS (issue 16's per-frame overhead item).

Why processes: every ONNX Runtime session owns an intra-op pool whose idle threads spin-wait after
each run. With all contenders in one process (``overhead_square.py``) the pool of whichever ran
last steals the cores of whichever runs next, which moved the ratios by more than the 5% being
chased. A user runs one of these per process, so that is what is measured here: one spawned
worker per contender, driven in turn by this process (the others block on a pipe, their pools
parked), in interleaved rounds whose order rotates; ratios are computed per round and their
median reported.

    python benchmarks/overhead_isolated.py --rounds 9 --iters 10 --out docs/results/overhead-isolated-cpu.md

The model has RANDOM weights (built from the architecture config): right for speed only.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")

BARE = "bare InferenceSession.run, fixed blob"
OURS_PRE = "our letterbox + make_batch + bare run"
DETECTOR = "Detector, frame -> Detections"
DETECTOR_NOSPIN = "Detector, spinning off"
ULTRA = "Ultralytics predict, same ONNX file"
CONTENDERS = (BARE, OURS_PRE, DETECTOR, DETECTOR_NOSPIN, ULTRA)


def make_contender(name: str, onnx_path: str, frame_side: int) -> tuple[Callable[[], object], Callable[[], tuple]]:
    """Build one contender in this (worker) process: ``(call, stages)``; ``stages()`` gives the
    Detector's last pre/inference/post milliseconds, ``()`` for the others."""
    sys.path.insert(0, str(Path(__file__).parent))
    from overhead import square_photo

    frame = square_photo(frame_side)
    if name in (BARE, OURS_PRE):
        import onnxruntime as ort

        from campusguard.ops.preprocess import letterbox, make_batch

        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        input_name = sess.get_inputs()[0].name
        blob = make_batch([letterbox(frame, (640, 640))[0]])
        if name == BARE:
            return (lambda: sess.run(None, {input_name: blob})), tuple
        buf = [blob]

        def pre_then_run() -> object:
            buf[0] = make_batch([letterbox(frame, (640, 640))[0]], buf[0])
            return sess.run(None, {input_name: buf[0]})

        return pre_then_run, tuple
    if name in (DETECTOR, DETECTOR_NOSPIN):
        from campusguard.detector import Detector

        det = Detector(onnx_path, device="cpu", spinning=name == DETECTOR)

        def stages() -> tuple:
            t = det.timings
            return (t.preprocess_ms, t.inference_ms, t.postprocess_ms)

        return (lambda: det(frame)), stages
    if name == ULTRA:
        from ultralytics import YOLO

        model = YOLO(onnx_path, task="detect")
        return (lambda: model.predict(frame, imgsz=640, verbose=False)), tuple
    raise ValueError(f"unknown contender {name!r}")


def worker(name: str, onnx_path: str, frame_side: int, conn: Connection) -> None:
    """Serve timing requests for one contender: receive ``iters``, answer ``(ms per call, stages)``."""
    call, stages = make_contender(name, onnx_path, frame_side)
    for _ in range(3):
        call()
    conn.send("ready")
    while (iters := conn.recv()) is not None:
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        conn.send(((time.perf_counter() - t0) * 1000 / iters, stages()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8n.yaml")
    ap.add_argument("--frame", type=int, default=960, help="side of the square frame")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--pause-s", type=float, default=0.3, help="idle time between contenders (pools park)")
    ap.add_argument("--out", type=Path, default=None, help="also write the table as Markdown here")
    args = ap.parse_args()

    import onnxruntime as ort
    from overhead import report, round_ratio

    from campusguard.doctor import cpu_name
    from campusguard.models.export import export_onnx
    from campusguard.models.registry import exported_onnx_path
    from campusguard.models.resolve import parse_model_ref

    ref = parse_model_ref(args.model)
    onnx_path = exported_onnx_path(ref, (640, 640), 1, False)
    if not onnx_path.is_file():
        export_onnx(ref, onnx_path, imgsz_hw=(640, 640))

    ctx = mp.get_context("spawn")
    conns: dict[str, Connection] = {}
    procs = []
    for name in CONTENDERS:
        parent, child = ctx.Pipe()
        p = ctx.Process(target=worker, args=(name, str(onnx_path), args.frame, child), daemon=True)
        p.start()
        conns[name] = parent
        procs.append(p)
    for name, c in conns.items():  # one at a time: start-up (imports, sessions) is not timed
        if c.recv() != "ready":
            raise SystemExit(f"{name}: worker failed")
    per_round: dict[str, list[float]] = {k: [] for k in CONTENDERS}
    stage_rows: list[tuple] = []
    try:
        for r in range(args.rounds):
            order = CONTENDERS[r % len(CONTENDERS) :] + CONTENDERS[: r % len(CONTENDERS)]
            for name in order:
                time.sleep(args.pause_s)
                conns[name].send(args.iters)
                ms, stages = conns[name].recv()
                per_round[name].append(ms)
                if name == DETECTOR:
                    stage_rows.append(stages)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    finally:
        for c in conns.values():
            c.send(None)
        for p in procs:
            p.join(timeout=10)

    med = {k: statistics.median(v) for k, v in per_round.items()}

    def ratio(a: str, b: str) -> float:
        return round_ratio(per_round, a, b)

    pre, inf, post = (statistics.median(s[i] for s in stage_rows) for i in range(3))
    lines = [
        f"# Detector overhead on a square {args.frame}x{args.frame} frame ({args.model} at 640, batch 1, CPU), one process per contender",
        "",
        f"{args.rounds} interleaved rounds x {args.iters} frames, order rotated every round, {args.pause_s} s idle "
        "between contenders; each contender in its own spawned process with ONNX Runtime's defaults "
        "(intra-op threads one per physical core, spinning on), as a user runs it.",
        f"CPU: {cpu_name()}, {os.cpu_count()} logical CPUs; ONNX Runtime {ort.__version__}. Model: {args.model}"
        + (" with RANDOM weights (speed only)." if ref.kind == "arch" else "."),
        "",
        "| contender | median ms/frame | frames/s |",
        "| --- | ---: | ---: |",
        *[f"| {k} | {med[k]:.2f} | {1000 / med[k]:.1f} |" for k in CONTENDERS],
        "",
        f"Detector stages (median over rounds of the last call): pre-processing {pre:.2f} ms, "
        f"inference {inf:.2f} ms, post-processing {post:.2f} ms.",
        "",
        "| throughput ratio (median of per-round ratios) | value | target |",
        "| --- | ---: | ---: |",
    ]
    checks = [
        ("Detector / bare run", ratio(DETECTOR, BARE), 0.97),
        ("Detector / Ultralytics ONNX predict", ratio(DETECTOR, ULTRA), 1.0),
        ("Detector, spinning off / bare run", ratio(DETECTOR_NOSPIN, BARE), None),
        ("Detector, spinning off / Ultralytics ONNX predict", ratio(DETECTOR_NOSPIN, ULTRA), None),
        ("letterbox + batch + bare run / bare run", ratio(OURS_PRE, BARE), None),
        ("Detector / letterbox + batch + bare run", ratio(DETECTOR, OURS_PRE), None),
    ]
    report(lines, checks, args.out, "overhead_isolated.py", digits=3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
