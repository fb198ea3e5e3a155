"""Where one app run of the cost check spends its CPU: seconds per thread, read from ``/proc`` (Linux).

Runs `cost.run_app` (the cost check's app contender: the demo config, health on by default) once on the
cost check's campus day (or ``--busy``), in this process, while a sampler thread reads every thread's CPU
time from ``/proc/self/task`` every 50 ms. Threads are named as the service names them (``detection``,
``analytics-<camera>``, ``reader-<camera>``); the engine's own pool threads show as ``python`` (ONNX Runtime's
intra-op pool, OpenVINO's streams) and FFmpeg's decoder threads as ``av:h264:df<N>``. Thread totals include
start-up (model load, OpenVINO compile) where a thread did that work; the loop's CPU (``cpu_s``, what the cost
check divides) excludes it; ``MainThread`` also made the scene. The sampler costs about 0.15 s of CPU itself.

    python benchmarks/cost_threads.py --precision bf16 --backend openvino
    python benchmarks/cost_threads.py --precision int8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import cost  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


class ThreadCpu:
    """CPU seconds of every thread of this process seen so far, by name (a finished thread keeps its last figure)."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def sample(self) -> None:
        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid in os.listdir("/proc/self/task"):
            try:
                fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
                comm = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            except OSError:
                continue  # the thread ended
            tid_i = int(tid)
            name = names.get(tid_i) or self.seen.get(tid_i, (comm, 0.0))[0]
            self.seen[tid_i] = (name, (int(fields[11]) + int(fields[12])) / TICK)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.sample()

    def __enter__(self) -> ThreadCpu:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def by_name(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, cpu in self.seen.values():
            out[name] = out.get(name, 0.0) + cpu
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--busy", action="store_true", help="the busy scene instead of the campus day")
    ap.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "int8"))
    ap.add_argument("--backend", default=None, help="force a backend (openvino, onnxruntime)")
    args = ap.parse_args()
    from campusguard.data.synth.video import generate_video

    seed, seconds, idle = (12, 30.0, 0.0) if args.busy else (14, 80.0, 0.75)
    with tempfile.TemporaryDirectory(prefix="cost-threads-") as tmp:
        folder = Path(tmp)
        truth = generate_video(seed, folder / "scene", seconds=seconds, name=f"s{seed}", idle_fraction=idle)
        video, truth_path = folder / "scene" / truth.video, folder / "scene" / f"s{seed}.json"
        (folder / "run").mkdir()
        t0 = time.perf_counter()
        with ThreadCpu() as threads:
            result = cost.run_app(video, truth_path, folder / "run", args.precision, True, args.backend)
    keys = ("cpu_s", "startup_cpu_s", "frames", "detector_images", "f1", "precision_log")
    print(json.dumps({k: result[k] for k in keys} | {"wall_s": round(time.perf_counter() - t0, 2)}))
    for name, cpu in threads.by_name().items():
        if cpu >= 0.01:
            print(f"{cpu:7.2f} s  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
