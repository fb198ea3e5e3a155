"""`campusguard scan` throughput with 1 and with 2 worker processes (one ONNX Runtime thread each).

The real measurement (quiet machine, 2+ cores; about 4 minutes on 2 cores):

    python benchmarks/scan_throughput.py --videos 4 --seconds 30 --rounds 3 --out docs/results/scan-throughput-cpu.md

Smoke run (proves the script works; numbers mean nothing on a shared machine):

    python benchmarks/scan_throughput.py --videos 2 --seconds 2 --rounds 1 --imgsz 320 --smoke --out docs/results/scan-throughput-cpu.md

The same synthetic 1280x720 campus videos (different seeds, 10 frames/s) are scanned by the real
CLI in a fresh process per run (``python -m campusguard.cli.main scan DIR --config C --workers N
--rescan``, a new event store and scan state each time), with the bundled model at ``--imgsz``
(640: a 384x640 input for 720p). Each run's frames/s is the scan's own summary (frames over the
scan's wall time, worker start-up and model loading included; Python's start-up excluded).
Rounds interleave the contenders (1, 2 then 2, 1) so drift on the machine hits both alike; the
ratio 2 workers / 1 worker is taken per round and its median reported. Target: >= 1.7x.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from campusguard.doctor import cpu_name  # noqa: E402

os.environ.setdefault("YOLO_OFFLINE", "1")

TARGET = 1.7


def make_archive(folder: Path, videos: int, seconds: float, size_wh: tuple[int, int]) -> tuple[list[Path], dict]:
    """``videos`` synthetic campus videos (seeds 0..n-1) in ``folder``; returns them and the first one's truth."""
    from campusguard.data.synth.video import generate_video

    paths, first = [], None
    for seed in range(videos):
        truth = generate_video(seed, folder, size_wh=size_wh, seconds=seconds, fps=10, name=f"cam-{seed:02d}")
        paths.append(folder / truth.video)
        first = first or truth.to_dict()
    assert first is not None
    return paths, first


def write_config(truth: dict, video: Path, out: Path, imgsz: int) -> Path:
    """The demo's config (zones, lines, rules of the first video's camera) with no outputs but the event store."""
    import yaml

    from campusguard.app.demo import demo_config

    cfg = demo_config(truth, video, out)
    cfg["detector"]["imgsz"] = imgsz
    cfg.update(alerts=[], outputs={"metrics_interval_s": 0})
    path = out / "scan.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


_SUMMARY = re.compile(r"scanned (\d+) of (\d+) file\(s\).*: (\d+) frames, .* in ([\d.]+) s, ([\d.]+) frames/s")


def scan_once(archive: Path, config: Path, workers: int, work: Path) -> tuple[float, int, float]:
    """One run of the CLI; returns (frames/s, frames, wall seconds of the whole process)."""
    state = work / f"state-{time.monotonic_ns()}.db"
    cmd = [sys.executable, "-m", "campusguard.cli.main", "scan", str(archive), "--config", str(config)]
    cmd += ["--workers", str(workers), "--rescan", "--state", str(state)]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    match = _SUMMARY.search(done.stdout)
    if done.returncode != 0 or match is None:
        raise SystemExit(f"scan failed ({done.returncode}): {done.stdout.strip()} {done.stderr.strip()[-500:]}")
    return float(match.group(5)), int(match.group(3)), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=4, help="synthetic videos in the archive (even: both workers busy)")
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each video (10 frames/s)")
    ap.add_argument("--size", default="1280x720", help="frame size WxH")
    ap.add_argument("--imgsz", type=int, default=640, help="network input long side")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="mark the result as a smoke run on a shared machine")
    ap.add_argument("--out", type=Path, default=None, help="write the Markdown report here")
    args = ap.parse_args()
    size_wh = tuple(int(v) for v in args.size.lower().split("x"))
    assert len(size_wh) == 2

    work = Path(tempfile.mkdtemp(prefix="scan-bench-"))
    archive = work / "archive"
    print(f"rendering {args.videos} synthetic {args.size} videos of {args.seconds:g} s ...", flush=True)
    videos, truth = make_archive(archive, args.videos, args.seconds, size_wh)  # type: ignore[arg-type]
    config = write_config(truth, videos[0], work, args.imgsz)

    fps: dict[int, list[float]] = {1: [], 2: []}
    walls: dict[int, list[float]] = {1: [], 2: []}
    frames = 0
    for r in range(args.rounds):
        for workers in (1, 2) if r % 2 == 0 else (2, 1):
            rate, frames, wall = scan_once(archive, config, workers, work)
            fps[workers].append(rate)
            walls[workers].append(wall)
        print(f"round {r + 1}: 1 worker {fps[1][-1]:.1f} frames/s, 2 workers {fps[2][-1]:.1f} frames/s", flush=True)
    ratios = [b / a for a, b in zip(fps[1], fps[2], strict=True)]
    ratio = statistics.median(ratios)
    verdict = "meets" if ratio >= TARGET else "misses"

    cmd = (
        f"python benchmarks/scan_throughput.py --videos {args.videos} --seconds {args.seconds:g} --size {args.size} "
        f"--imgsz {args.imgsz} --rounds {args.rounds}{' --smoke' if args.smoke else ''}"
    )
    head = (
        "**Smoke run on a shared machine** (other jobs running; it proves the script works, the numbers are not a "
        "measurement: the lead measures on a quiet machine with the command at the top of the script)."
        if args.smoke
        else "Quiet machine."
    )
    lines = [
        "# `campusguard scan` throughput: 1 vs 2 workers (CPU)",
        "",
        head,
        "",
        f"`{cmd}`",
        "",
        f"CPU: {cpu_name()}, {os.cpu_count()} CPUs; load average at the end {os.getloadavg()[0]:.1f}. "
        f"{args.videos} synthetic {args.size} videos, {frames} frames in all, bundled model at imgsz {args.imgsz}; "
        "one ONNX Runtime thread per worker; each run a fresh `campusguard scan` process (worker start-up and model "
        f"loading included); rounds interleaved; median of {args.rounds}.",
        "",
        "| workers | frames/s (median) | per round | process wall s per round |",
        "| ---: | ---: | --- | --- |",
        *[
            f"| {w} | {statistics.median(fps[w]):.1f} | {', '.join(f'{x:.1f}' for x in fps[w])} | "
            f"{', '.join(f'{x:.1f}' for x in walls[w])} |"
            for w in (1, 2)
        ],
        "",
        f"2 workers / 1 worker: **{ratio:.2f}x** (median of per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}); "
        f"target >= {TARGET}x: {verdict} it{' (smoke run: not a verdict)' if args.smoke else ''}.",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
