"""Alternate two benchmark variants (A B, B A, A B, ...) and report B/A per round.

On a machine shared with other jobs the load drifts between minutes; alternating short runs
in ABBA order puts A and B under the same drift, so their ratio is steadier than two separate long runs.
Each variant is ``backend:precision:batch:export`` (export ``static`` or ``dynamic``).

Example (the INT8 and static-vs-dynamic checks in docs/results/cpu-<date>/):
    python benchmarks/ab_alternate.py --model yolov8n.yaml --a onnxruntime:fp32:8:static \
        --b onnxruntime:int8:8:static --rounds 3 --min-seconds 6 --out ab-int8-b8.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("YOLO_OFFLINE", "1")

from campusguard.backends.devices import resolve_device  # noqa: E402
from campusguard.bench.environment import environment_fingerprint  # noqa: E402
from campusguard.bench.harness import BenchSettings, Combination, bench_combination  # noqa: E402
from campusguard.bench.inputs import calibration_images, load_frames  # noqa: E402
from campusguard.models.registry import cache_dir  # noqa: E402


def parse_variant(text: str) -> tuple[str, str, int, bool]:
    """``backend:precision:batch:export`` -> (backend, precision, batch, dynamic)."""
    backend, precision, batch, export = text.split(":")
    if export not in ("static", "dynamic"):
        raise SystemExit(f"export must be static or dynamic, not {export!r}")
    return backend, precision, int(batch), export == "dynamic"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="yolov8n.yaml")
    ap.add_argument("--a", required=True, help="backend:precision:batch:export")
    ap.add_argument("--b", required=True, help="backend:precision:batch:export")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=6.0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--imgsz", type=int, default=640)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)

    spec = resolve_device(args.device)
    frames, frames_from = load_frames()
    calib = calibration_images(cache_dir(), 32)
    base = BenchSettings(imgsz_hw=(args.imgsz, args.imgsz), device=args.device, warmup=2, iters=args.iters,
                         min_seconds=args.min_seconds, repeat=1)  # fmt: skip
    variants = {"A": parse_variant(args.a), "B": parse_variant(args.b)}
    rounds = []
    for i in range(args.rounds):
        row: dict[str, object] = {"round": i + 1}
        order = ["A", "B"] if i % 2 == 0 else ["B", "A"]  # ABBA: neither variant always runs second
        row["order"] = "".join(order)
        for name in order:
            backend, precision, batch, dynamic = variants[name]
            rec = bench_combination(
                Combination(args.model, backend, precision, batch), replace(base, dynamic=dynamic), frames, spec,
                calibration=calib, measure_accuracy=False,
            )  # fmt: skip
            if rec["status"] != "ok":
                print(f"{name} {rec['status']}: {rec['reason']}", file=sys.stderr)
                return 1
            row[name] = {
                "throughput_ips": rec["throughput_ips"],
                "p50_ms": rec["latency_ms"]["p50"],
                "iterations": rec["iterations"],
                "other_processes_cpu_share": rec["contention"]["other_processes_cpu_share"],
            }
            print(f"round {i + 1} {name}: {rec['throughput_ips']:.2f} img/s, p50 {rec['latency_ms']['p50']:.1f} ms, "
                  f"other processes {rec['contention']['other_processes_cpu_share']:.0%} of the CPU", flush=True)  # fmt: skip
        row["ratio_b_over_a"] = row["B"]["throughput_ips"] / row["A"]["throughput_ips"]  # type: ignore[index]
        rounds.append(row)
    ratios = [float(r["ratio_b_over_a"]) for r in rounds]  # type: ignore[arg-type]
    summary = {
        "kind": "campusguard-ab",
        "command": "python benchmarks/ab_alternate.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "model": args.model,
        "a": args.a,
        "b": args.b,
        "frames": frames_from,
        "rounds": rounds,
        "ratio_median": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "environment": environment_fingerprint(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"B/A throughput: median {summary['ratio_median']:.2f}x (rounds: {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
