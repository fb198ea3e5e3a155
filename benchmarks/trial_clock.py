"""``precision: auto``'s engine trial timed by the wall clock and by the process's CPU time, interleaved.

`campusguard.precision.run_trial` times each variant with ``time.perf_counter`` (wall) by default. On a
machine shared with other jobs a variant's wall time depends on what else runs during its calls, so
the trial's choice can change from one start to the next; the process's CPU time (``time.process_time``:
every thread of this process, the engines' pools included) counts only the work the variant itself did.
This runs the same trial (the bundled model, every installed variant, the service's build: no ONNX Runtime
spinning, OpenVINO's throughput streams) ``--repeats`` times with each clock, alternating, and prints what
each chose and its per-frame figures, with the load average.

    python benchmarks/trial_clock.py --repeats 3 --out docs/results/trial-clock-cpu.md
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path

CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def main() -> int:
    from campusguard.detector import Detector
    from campusguard.doctor import cpu_name
    from campusguard.models.resolve import DEFAULT_MODEL
    from campusguard.precision import run_trial, trial_candidates, trial_frames

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="trials per clock")
    ap.add_argument("--imgsz", type=int, default=480)
    ap.add_argument("--out", type=Path, default=None, help="write a Markdown table here")
    args = ap.parse_args()

    variants = trial_candidates(DEFAULT_MODEL)

    def build(path: Path, backend: str | None = None, precision: str | None = None) -> Detector:
        return Detector(
            path, device="cpu", imgsz=args.imgsz, backend=backend, precision=precision, spinning=False, throughput=True
        )

    frames = trial_frames()
    rows: list[str] = []
    for i in range(args.repeats):
        for name, clock in CLOCKS.items():
            load = os.getloadavg()[0]
            result = run_trial(variants, build, frames, clock=clock)
            figures = ", ".join(f"{v.precision} {v.ms:.1f}" for v in result.variants)
            row = f"| {i + 1} | {name} | {load:.1f} | {result.chosen} | {figures} |"
            print(row, flush=True)
            rows.append(row)
    if args.out:
        text = [
            "# precision: auto's trial by wall clock and by CPU time",
            "",
            f"`python benchmarks/trial_clock.py --repeats {args.repeats} --imgsz {args.imgsz}`; CPU: {cpu_name()}, "
            f"{os.cpu_count()} logical cores. Milliseconds per frame (two frames a call), wall or process CPU.",
            "",
            "| trial | clock | load (1 min) | chose | ms per frame |",
            "| --- | --- | ---: | --- | --- |",
            *rows,
            "",
        ]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
