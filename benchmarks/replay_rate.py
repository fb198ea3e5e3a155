"""Replay rate: stream seconds of tracks `campusguard replay` runs per second, short scene against long.

A synthetic campus scene (``--seconds``, busy: people moving all the time) is watched once by the
real pipeline with the detector giving the scene's true boxes (tests/app/fakes_watch.TruthDetector),
which records its tracks. Those tracks are then tiled (each copy after the last, its frame indices,
stream clock and wall clock shifted, its track ids offset) into a short store (one copy) and a long
one (``--long-s`` of stream), and ``campusguard replay CONFIG --since 30d --json`` is run on each in a
fresh process ``--rounds`` times. The rate is (long - short stream seconds) / (long - short command
seconds): start-up (imports, config, store) cancels out. Issue 45's target: at least 2,000x, i.e. 9
extra minutes in at most 0.27 s. Also prints the track files' MB per camera-hour and camera-day.

    PYTHONPATH=src python benchmarks/replay_rate.py [--seconds 60] [--long-s 600] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "app"))


def record_scene(folder: Path, seconds: float, seed: int) -> tuple[dict, Path]:
    from fakes_watch import TruthDetector

    from campusguard.app.config import parse_config
    from campusguard.app.demo import demo_config
    from campusguard.app.service import WatchService
    from campusguard.data.synth.classes import COCO_NAMES
    from campusguard.data.synth.video import generate_video

    names = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, list | tuple) else dict(COCO_NAMES)
    truth = generate_video(seed, folder, size_wh=(640, 360), seconds=seconds, fps=10, name="scene").to_dict()
    video = folder / "scene.mp4"
    data = demo_config(truth, video, folder)
    data["outputs"] = {"metrics_interval_s": 0}
    data["alerts"] = []
    data["storage"] = {"sqlite": str(folder / "events.db")}
    loaded = parse_config(yaml.safe_dump(data), str(folder / "watch.yaml"))
    service = WatchService(loaded, detector_factory=lambda *a: TruthDetector(video.with_suffix(".json"), names))
    assert service.run(), "the watch run failed"
    return data, folder / "tracks"


def tile(tracks: Path, out: Path, copies: int) -> float:
    """Write ``copies`` of the recorded segment one after another into ``out``; the stream seconds written."""
    from campusguard.app.tracks.files import SegmentMeta, TrackBlock, encode_block, file_name, hour_of, write_header
    from campusguard.app.tracks.segments import load_segments

    (seg,) = load_segments(tracks)
    b = seg.block
    span_t = float(b.t[-1] - b.t[0]) + 1.0 / seg.meta.fps
    span_i = int(b.index[-1] - b.index[0]) + 1
    id_step = int(b.tracker_id.max()) + 1
    start = time.time() - copies * span_t - 60
    blocks = []
    for k in range(copies):
        blocks.append(
            TrackBlock(
                index=b.index + k * span_i,
                t=b.t + k * span_t,
                wall=start + (b.wall - b.wall[0]) + k * span_t,
                n=b.n,
                flags=b.flags,
                tracker_id=b.tracker_id + k * id_step,
                class_id=b.class_id,
                fallen=b.fallen,
                xyxy=b.xyxy,
            )
        )
    whole = TrackBlock.concat(blocks)
    meta = SegmentMeta(
        seg.meta.camera_id, "tiled", seg.meta.resolution_wh, seg.meta.fps, seg.meta.names, started_at=start
    )
    out.mkdir(parents=True, exist_ok=True)
    hours = np.array([hour_of(w) for w in whole.wall])
    off = whole.offsets()
    for hour in dict.fromkeys(hours.tolist()):
        rows = np.flatnonzero(hours == hour)
        lo, hi = int(rows[0]), int(rows[-1]) + 1
        a, z = int(off[lo]), int(off[hi])
        part = TrackBlock(
            whole.index[lo:hi], whole.t[lo:hi], whole.wall[lo:hi], whole.n[lo:hi], whole.flags[lo:hi],
            whole.tracker_id[a:z], whole.class_id[a:z], whole.fallen[a:z], whole.xyxy[a:z],
        )
        with open(out / file_name(meta.camera_id, hour, meta.segment), "wb") as fh:
            fh.write(write_header(meta))
            for s in range(0, part.frames, 300):
                e = min(part.frames, s + 300)
                pa, pz = int(part.offsets()[s]), int(part.offsets()[e])
                fh.write(
                    encode_block(
                        TrackBlock(
                            part.index[s:e], part.t[s:e], part.wall[s:e], part.n[s:e], part.flags[s:e],
                            part.tracker_id[pa:pz], part.class_id[pa:pz], part.fallen[pa:pz], part.xyxy[pa:pz],
                        )
                    )
                )
    return copies * span_t


_CLI = "import sys; from campusguard.cli.main import main; sys.exit(main(sys.argv[1:]))"


def replay_seconds(config: Path, rounds: int) -> tuple[float, float, dict]:
    """Best wall seconds and best CPU seconds (user + system of the child) of the command, and its output."""
    import resource

    best, best_cpu, data = float("inf"), float("inf"), {}
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-c", _CLI, "replay", str(config), "--since", "30d", "--json"],
            capture_output=True,
            text=True,
        )
        if done.returncode:
            raise SystemExit(f"replay failed: {done.stderr.strip()[-2000:]}")
        best = min(best, time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best_cpu = min(best_cpu, cpu)
        data = json.loads(done.stdout)
    return best, best_cpu, data


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="the recorded scene's length (the short store)")
    ap.add_argument("--long-s", type=float, default=600.0, help="stream seconds of the long store")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="replay-rate-") as tmp:
        root = Path(tmp)
        (root / "scene").mkdir()
        data, tracks = record_scene(root / "scene", args.seconds, args.seed)
        nbytes = sum(p.stat().st_size for p in tracks.iterdir())
        mb_hour = nbytes / 1e6 * 3600 / args.seconds
        results = {}
        for name, stream_s in (("short", args.seconds), ("long", args.long_s)):
            folder = root / name
            copies = max(1, round(stream_s / args.seconds))
            written = tile(tracks, folder / "tracks", copies)
            cfg = {**data, "storage": {"sqlite": str(folder / "events.db"), "tracks": str(folder / "tracks")}}
            (folder / "watch.yaml").write_text(yaml.safe_dump(cfg))
            seconds, cpu, out = replay_seconds(folder / "watch.yaml", args.rounds)
            results[name] = (written, seconds, cpu, out["frames"], len(out["incidents"]))
        (s_stream, s_sec, s_cpu, s_frames, s_inc) = results["short"]
        (l_stream, l_sec, l_cpu, l_frames, l_inc) = results["long"]
        rate = (l_stream - s_stream) / max(l_sec - s_sec, 1e-9)
        cpu_rate = (l_stream - s_stream) / max(l_cpu - s_cpu, 1e-9)
        print(f"tracks: {nbytes} bytes for {args.seconds:.0f} s: {mb_hour:.2f} MB per camera-hour, {mb_hour * 24:.1f} MB per camera-day")
        print(
            f"short: {s_stream:.0f} stream s, {s_frames} frames, {s_inc} incidents, command {s_sec:.3f} s, "
            f"CPU {s_cpu:.3f} s (best of {args.rounds})"
        )
        print(
            f"long:  {l_stream:.0f} stream s, {l_frames} frames, {l_inc} incidents, command {l_sec:.3f} s, "
            f"CPU {l_cpu:.3f} s (best of {args.rounds})"
        )
        print(f"by CPU time: {cpu_rate:.0f} stream seconds per CPU second (load on the machine inflates both)")
        print(
            f"extra {l_stream - s_stream:.0f} stream s in {l_sec - s_sec:.3f} s: {rate:.0f} stream seconds per second "
            f"({'meets' if rate >= 2000 else 'misses'} the 2,000x target)"
        )


if __name__ == "__main__":
    main()
