"""INT8 quantisation variants against FP32 on ONNX Runtime's CPU provider: speed and accuracy.

Variants (all static, U8 activations / S8 weights, the detection head's decode kept float):

- ``qop-pt``: QOperator, per-tensor weights, reduce_range (campusguard's `quantize_int8`);
- ``qop-pc``: QOperator, per-channel weights, reduce_range;
- ``qdq-pt``: QDQ format (ONNX Runtime fuses DQ -> op -> Q back into int8 kernels), per-tensor;
- ``qop-conv``: QOperator, only convolutions quantised (SiLU, Concat, Resize stay float).

Speed: every session is created once, then the variants are run in rotating order for several
rounds (so drifting load from other jobs hits all alike); wall time and this process's CPU time
per call are recorded. Accuracy (optional, ``--data``): COCO mAP of each variant through the
`Detector` on a YOLO data set.

Example:
    python benchmarks/int8_variants.py --model src/campusguard/models/assets/campusguard-default.onnx \
        --imgsz 320 --batch 1 --calib DIR --data data.yaml --out int8-variants.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("YOLO_OFFLINE", "1")

from campusguard.bench.inputs import calibration_images, list_images, load_frames  # noqa: E402
from campusguard.bench.prepare import prepare_onnx  # noqa: E402
from campusguard.models.export import _ImageCalibrationReader, head_float_nodes, set_metadata  # noqa: E402
from campusguard.models.registry import cache_dir  # noqa: E402

VARIANTS = {
    "qop-pt": {"format": "QOperator", "per_channel": False, "ops": None},
    "qop-pc": {"format": "QOperator", "per_channel": True, "ops": None},
    "qdq-pt": {"format": "QDQ", "per_channel": False, "ops": None},
    "qop-conv": {"format": "QOperator", "per_channel": False, "ops": ["Conv"]},
}


def quantize(fp32: Path, out: Path, calib: list[Path], fmt: str, per_channel: bool, ops: list[str] | None) -> Path:
    """Static INT8 of ``fp32`` with one variant's options (pre-processed, head decode float)."""
    import onnxruntime as ort
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    sess = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    meta = dict(sess.get_modelmeta().custom_metadata_map)
    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(fp32), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre), str(out),
            _ImageCalibrationReader(inp.name, calib, (inp.shape[2], inp.shape[3]), inp.shape[0]),
            quant_format=QuantFormat.QOperator if fmt == "QOperator" else QuantFormat.QDQ,
            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=per_channel,
            reduce_range=True, nodes_to_exclude=head_float_nodes(pre), op_types_to_quantize=ops,
            calibrate_method=CalibrationMethod.MinMax,
        )  # fmt: skip
    set_metadata(out, **{**meta, "campusguard_precision": "int8"})
    return out


def time_sessions(
    paths: dict[str, Path], batch: np.ndarray, rounds: int, calls: int, threads: int
) -> dict[str, dict[str, list[float]]]:
    """Per variant, per round: median wall ms and mean CPU ms per call, variants in rotating order.

    ``threads`` > 0 fixes ONNX Runtime's intra-op threads and turns spin-waiting off, so CPU time
    counts work only (spinning threads burn CPU time while they wait for each other).
    """
    import onnxruntime as ort

    def session(p: Path) -> ort.InferenceSession:
        opts = ort.SessionOptions()
        if threads > 0:
            opts.intra_op_num_threads = threads
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(p), sess_options=opts, providers=["CPUExecutionProvider"])

    sessions = {k: session(p) for k, p in paths.items()}
    names = list(sessions)
    out: dict[str, dict[str, list[float]]] = {k: {"wall_ms": [], "cpu_ms": []} for k in names}
    for s in sessions.values():  # warm-up
        for _ in range(2):
            s.run(None, {s.get_inputs()[0].name: batch})
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        if r % 2:
            order.reverse()
        for k in order:
            s = sessions[k]
            feed = {s.get_inputs()[0].name: batch}
            walls = []
            c0 = time.process_time()
            for _ in range(calls):
                t0 = time.perf_counter()
                s.run(None, feed)
                walls.append((time.perf_counter() - t0) * 1000)
            out[k]["cpu_ms"].append((time.process_time() - c0) * 1000 / calls)
            out[k]["wall_ms"].append(float(np.median(walls)))
        print(f"round {r + 1}: " + ", ".join(f"{k} {out[k]['wall_ms'][-1]:.1f} ms" for k in names), flush=True)
    return out


def accuracy(path: Path, data: Path, imgsz: int, limit: int | None) -> dict[str, float]:
    from campusguard.detector import Detector
    from campusguard.eval import evaluate_detections, load_yolo_dataset
    from campusguard.io.images import read_image

    ds = load_yolo_dataset(data, "val")
    n = len(ds) if limit is None else min(limit, len(ds))
    det = Detector(path, device="cpu", imgsz=imgsz, conf=0.001, rect=False)
    preds = [det(read_image(p)) for p in ds.image_paths[:n]]
    m = evaluate_detections(preds, ds.truths[:n], ds.names)
    return {"map50_95": m.map50_95, "map50": m.map50, "images": n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8n.yaml")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calib", type=Path, default=None, help="calibration image folder (default: built-in)")
    ap.add_argument("--calib-count", type=int, default=32)
    ap.add_argument("--data", type=Path, default=None, help="YOLO data.yaml for mAP")
    ap.add_argument("--accuracy-images", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads, spinning off (0: default)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    calib = calibration_images(
        cache_dir(), max(args.calib_count, args.batch), list_images(args.calib) if args.calib else None
    )
    fp32 = prepare_onnx(args.model, "fp32", args.batch, (args.imgsz, args.imgsz))
    from campusguard.bench.prepare import fix_input_shape

    fp32 = fix_input_shape(fp32, args.batch, (args.imgsz, args.imgsz))
    paths = {"fp32": fp32}
    work = cache_dir() / "int8-variants"
    work.mkdir(exist_ok=True)
    for name in args.variants.split(","):
        v = VARIANTS[name]
        out = work / f"{fp32.stem}.{name}-c{len(calib)}.onnx"
        if not out.is_file():
            t = time.perf_counter()
            quantize(fp32, out, calib, str(v["format"]), bool(v["per_channel"]), v["ops"])  # type: ignore[arg-type]
            print(f"quantised {name} in {time.perf_counter() - t:.1f} s", flush=True)
        paths[name] = out
    from campusguard.ops.preprocess import letterbox, make_batch

    frames = load_frames()[0]
    batch = make_batch([letterbox(frames[i % len(frames)], (args.imgsz, args.imgsz))[0] for i in range(args.batch)])
    times = time_sessions(paths, batch, args.rounds, args.calls, args.threads)
    result: dict[str, object] = {
        "kind": "campusguard-int8-variants",
        "command": "python benchmarks/int8_variants.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": args.model, "imgsz": args.imgsz, "batch": args.batch, "calibration_images": len(calib), "threads": args.threads,
        "variants": {},
    }  # fmt: skip
    base_wall = statistics.median(times["fp32"]["wall_ms"])
    base_cpu = statistics.median(times["fp32"]["cpu_ms"])
    print(
        "| variant | wall ms (median of rounds) | speed-up vs FP32 (wall) | CPU ms per call | speed-up (CPU time) | mAP50-95 | mAP50 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, p in paths.items():
        wall = statistics.median(times[name]["wall_ms"])
        cpu = statistics.median(times[name]["cpu_ms"])
        acc = accuracy(p, args.data, args.imgsz, args.accuracy_images) if args.data else {}
        per_round = [b / w for b, w in zip(times["fp32"]["wall_ms"], times[name]["wall_ms"], strict=True)]
        result["variants"][name] = {  # type: ignore[index]
            "file": p.name, "wall_ms_rounds": times[name]["wall_ms"], "cpu_ms_rounds": times[name]["cpu_ms"],
            "speedup_wall": base_wall / wall, "speedup_wall_per_round": per_round, "speedup_cpu": base_cpu / cpu, **acc,
        }  # fmt: skip
        m = f"| {acc['map50_95'] * 100:.1f} | {acc['map50'] * 100:.1f} |" if acc else "| - | - |"
        print(f"| {name} | {wall:.1f} | {base_wall / wall:.2f}x | {cpu:.1f} | {base_cpu / cpu:.2f}x {m}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
