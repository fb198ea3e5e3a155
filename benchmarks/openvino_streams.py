"""OpenVINO on the CPU: how to run a batch of frames. Interleaved rounds, medians, wall and process CPU
time per frame, ratios against one request per frame, all measured side by side in one run.

Modes (the bundled model's files, a synthetic 1x3xHxW input, ``--imgsz`` the example config's 288x480):

- ``latency-b1``: one request compiled with ``PERFORMANCE_HINT=LATENCY``, the frames one after another;
- ``latency-bN``: one ``N``-image request compiled for latency (what the backend did before it had streams);
- ``streams``: the backend's path for a batch (`OpenVinoBackend.start`): one image per request
  on the ``THROUGHPUT`` streams, side by side;
- ``one-on-a-stream``: the frames one after another, each alone on one stream (one thread): the service's
  path for a single frame (``streams_for_one``, a live camera's usual call).

    python benchmarks/openvino_streams.py --batch 4 --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from campusguard.backends.openvino_backend import OpenVinoBackend
from campusguard.doctor import cpu_flags
from campusguard.models.resolve import DEFAULT_MODEL

FILES = {"int8-ir": DEFAULT_MODEL.with_name("campusguard-default-int8ov.xml"), "fp32-onnx": DEFAULT_MODEL}


def _modes(path: Path, batch: int, hw: tuple[int, int]) -> dict[str, Callable[[np.ndarray], object]]:
    backend = OpenVinoBackend(path, device="cpu")
    service = OpenVinoBackend(path, device="cpu", streams_for_one=True)  # the service's: one frame on a stream
    one = (1, 3, *hw)
    latency_one = backend._latency_request(one)
    latency_batch = backend._latency_request((batch, 3, *hw))

    def latency_b1(x: np.ndarray) -> object:
        for image in x:
            latency_one.infer({0: image[None]})
        return None

    def latency_bn(x: np.ndarray) -> object:
        return latency_batch.infer({0: x})

    def one_on_a_stream(x: np.ndarray) -> object:
        for image in x:
            service.infer(image[None])
        return None

    return {
        "latency-b1": latency_b1,
        f"latency-b{batch}": latency_bn,
        "streams": backend.infer,
        "one-on-a-stream": one_on_a_stream,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=5, help="batches per mode per round")
    ap.add_argument("--imgsz", default="288,480")
    args = ap.parse_args(argv)
    h, w = (int(v) for v in args.imgsz.split(","))
    x = np.random.default_rng(0).random((args.batch, 3, h, w), dtype=np.float32)
    flags = set(cpu_flags())
    isa = ", ".join(f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_int8") if f in flags)
    print(f"CPU: {_cpu_name()} ({isa}); batch {args.batch} at {h}x{w}; {args.rounds} rounds x {args.reps} batches")
    for name, path in FILES.items():
        modes = _modes(path, args.batch, (h, w))
        for run in modes.values():
            run(x)  # warm-up
        wall: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        names = list(modes)
        for r in range(args.rounds):
            for m in names[r % len(names) :] + names[: r % len(names)]:
                t, c = time.perf_counter(), time.process_time()
                for _ in range(args.reps):
                    modes[m](x)
                frames = args.reps * args.batch
                wall[m].append((time.perf_counter() - t) / frames * 1000)
                cpu[m].append((time.process_time() - c) / frames * 1000)
        base_w, base_c = statistics.median(wall["latency-b1"]), statistics.median(cpu["latency-b1"])
        for m in names:
            mw, mc = statistics.median(wall[m]), statistics.median(cpu[m])
            print(
                f"{name:9s} {m:15s} wall {mw:6.2f} ms/frame ({mw / base_w:.2f}x latency-b1)   "
                f"CPU {mc:6.2f} ms/frame ({mc / base_c:.2f}x)"
            )
    return 0


def _cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
