"""Replay rate: stream seconds of tracks `campusguard replay` runs per second, short scene against long.

A synthetic campus scene (``--seconds``, busy: people moving all the time) is watched once by the
real pipeline with the detector giving the scene's true boxes (tests/app/fakes_watch.TruthDetector),
which records its tracks. Those tracks are then tiled (each copy after the last, its frame indices,
stream clock and wall clock shifted, its track ids offset) into a short store (one copy) and a long
one (``--long-s`` of stream), and ``campusguard replay CONFIG --since 30d --json`` is run on each in a
fresh process, short and long in turn, ``--rounds`` times, for the scene's config (``as-watched``)
and for the changed config of issue 45's target 1 (``changed``: loitering's dwell raised, crowd's
count lowered, a new intrusion zone; `tests/app/tracks/test_tracks_replay.changed`). The rate is
(long - short stream seconds) / (long - short command seconds), from the best of the rounds of each:
start-up (imports, config, store) cancels out. Issue 45's target: at least 2,000x, i.e. 9 extra
minutes in at most 0.27 s. CPU time (user + system of the command) is reported beside wall time:
other work on the machine inflates wall time far more. So is the command's own clock (the
``seconds`` of its JSON: from the command's start, after the interpreter's start-up and imports, to
its answer), whose difference between short and long leaves out the start-up's jitter.

``--compare-src DIR``: also run each command with ``DIR`` (another checkout's ``src``, e.g.
``git archive BASE src | tar -x -C /tmp/base``) first on ``PYTHONPATH``, in turn with this one, so
both rates are measured under the same load; the ratio between them is printed.

    PYTHONPATH=src python benchmarks/replay_rate.py [--seconds 60] [--long-s 600] [--rounds 5]
        [--variant as-watched|changed|both] [--compare-src /tmp/base/src] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
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


def replay_once(config: Path, src: Path) -> tuple[float, float, dict]:
    """Wall seconds and CPU seconds (user + system of the child) of one command, and its output."""
    import os
    import resource

    env = {**os.environ, "PYTHONPATH": str(src)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _CLI, "replay", str(config), "--since", "30d", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"replay failed: {done.stderr.strip()[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(done.stdout)


def load() -> list[float]:
    import os

    return [round(x, 2) for x in os.getloadavg()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="the recorded scene's length (the short store)")
    ap.add_argument("--long-s", type=float, default=600.0, help="stream seconds of the long store")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--variant", choices=("as-watched", "changed", "both"), default="both")
    ap.add_argument("--compare-src", type=Path, default=None, help="another checkout's src, run in turn with this one")
    ap.add_argument("--json", type=Path, default=None, help="write the results here")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests" / "app" / "tracks"))
    from test_tracks_replay import changed  # the target's change, as the test makes it

    codes = {"this": ROOT / "src"}
    if args.compare_src is not None:
        codes["compared"] = args.compare_src.resolve()
    variants = ["as-watched", "changed"] if args.variant == "both" else [args.variant]
    report: dict = {"load_before": load(), "rounds": args.rounds, "seed": args.seed, "cpus": __import__("os").cpu_count()}
    with tempfile.TemporaryDirectory(prefix="replay-rate-") as tmp:
        root = Path(tmp)
        (root / "scene").mkdir()
        data, tracks = record_scene(root / "scene", args.seconds, args.seed)
        nbytes = sum(p.stat().st_size for p in tracks.iterdir())
        mb_hour = nbytes / 1e6 * 3600 / args.seconds
        print(f"tracks: {nbytes} bytes for {args.seconds:.0f} s: {mb_hour:.2f} MB per camera-hour, {mb_hour * 24:.1f} MB per camera-day")
        report["mb_per_camera_hour"] = round(mb_hour, 3)
        stores = {}
        for name, stream_s in (("short", args.seconds), ("long", args.long_s)):
            folder = root / name
            copies = max(1, round(stream_s / args.seconds))
            stores[name] = tile(tracks, folder / "tracks", copies)
            for variant in variants:
                cfg = changed(data) if variant == "changed" else data
                cfg = {**cfg, "storage": {"sqlite": str(folder / "events.db"), "tracks": str(folder / "tracks")}}
                (folder / f"{variant}.yaml").write_text(yaml.safe_dump(cfg))
        # every (code, variant, store) once per round, in turn, so that load changes hit them alike
        runs: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
        outs: dict[tuple[str, str, str], dict] = {}
        seconds: dict[tuple[str, str, str], list[dict]] = {}
        for _ in range(args.rounds):
            for variant in variants:
                for code, src in codes.items():
                    for name in ("short", "long"):
                        wall, cpu, out = replay_once(root / name / f"{variant}.yaml", src)
                        runs.setdefault((code, variant, name), []).append((wall, cpu))
                        outs[(code, variant, name)] = out
                        seconds.setdefault((code, variant, name), []).append(out)
        extra = stores["long"] - stores["short"]
        report["extra_stream_s"] = round(extra, 3)
        report["results"] = []
        rates: dict[tuple[str, str], tuple[float, float]] = {}
        for variant in variants:
            for code in codes:
                short, long_ = runs[(code, variant, "short")], runs[(code, variant, "long")]
                s_out, l_out = outs[(code, variant, "short")], outs[(code, variant, "long")]
                d_wall = min(w for w, _ in long_) - min(w for w, _ in short)
                d_cpu = min(c for _, c in long_) - min(c for _, c in short)
                d_median = statistics.median(w for w, _ in long_) - statistics.median(w for w, _ in short)
                # the command's own clock (`seconds` in its JSON: from its start to its answer, after the
                # interpreter's start-up and imports, whose jitter dominates the commands' differences)
                own = {n: min(o["seconds"] for o in seconds[(code, variant, n)]) for n in ("short", "long")}
                d_own = own["long"] - own["short"]
                spread = max(w for w, _ in short) - min(w for w, _ in short)
                rate, cpu_rate = extra / max(d_wall, 1e-9), extra / max(d_cpu, 1e-9)
                rates[(code, variant)] = (rate, cpu_rate)
                print(
                    f"[{code}, {variant}] short: {stores['short']:.0f} stream s, {s_out['frames']} frames, "
                    f"{len(s_out['incidents'])} incidents, command {min(w for w, _ in short):.3f} s, CPU "
                    f"{min(c for _, c in short):.3f} s; long: {stores['long']:.0f} stream s, {l_out['frames']} frames, "
                    f"{len(l_out['incidents'])} incidents, command {min(w for w, _ in long_):.3f} s, CPU "
                    f"{min(c for _, c in long_):.3f} s (best of {args.rounds})"
                )
                print(
                    f"[{code}, {variant}] extra {extra:.0f} stream s in {d_wall:.3f} s wall: {rate:.0f} stream seconds "
                    f"per second ({'meets' if rate >= 2000 else 'misses'} the 2,000x target); in {d_cpu:.3f} s CPU: "
                    f"{cpu_rate:.0f} per CPU second; medians: {d_median:.3f} s wall"
                )
                print(
                    f"[{code}, {variant}] by the command's own clock (its JSON's seconds, best of {args.rounds}): "
                    f"short {own['short']:.3f} s, long {own['long']:.3f} s, extra {d_own:.3f} s: "
                    f"{extra / max(d_own, 1e-9):.0f} stream seconds per second"
                )
                if spread > d_wall or d_wall <= 0:
                    print(
                        f"[{code}, {variant}] NOTE: the short command's wall time varied by {spread:.3f} s between "
                        "rounds, more than the difference measured: other work on the machine; trust CPU time"
                    )
                report["results"].append(
                    {
                        "code": code,
                        "variant": variant,
                        "short": {"stream_s": round(stores["short"], 3), "frames": s_out["frames"],
                                  "incidents": len(s_out["incidents"]), "wall_s": [round(w, 4) for w, _ in short],
                                  "cpu_s": [round(c, 4) for _, c in short]},
                        "long": {"stream_s": round(stores["long"], 3), "frames": l_out["frames"],
                                 "incidents": len(l_out["incidents"]), "wall_s": [round(w, 4) for w, _ in long_],
                                 "cpu_s": [round(c, 4) for _, c in long_]},
                        "extra_wall_s": round(d_wall, 4),
                        "extra_wall_median_s": round(d_median, 4),
                        "command_seconds": {n: round(v, 4) for n, v in own.items()},
                        "extra_command_seconds": round(d_own, 4),
                        "rate_command_seconds": round(extra / max(d_own, 1e-9), 1),
                        "extra_cpu_s": round(d_cpu, 4),
                        "rate_wall": round(rate, 1),
                        "rate_cpu": round(cpu_rate, 1),
                    }
                )
            if "compared" in codes:
                (t_w, t_c), (c_w, c_c) = rates[("this", variant)], rates[("compared", variant)]
                print(f"[{variant}] this / compared: {t_w / c_w:.2f}x by wall, {t_c / c_c:.2f}x by CPU (same rounds, in turn)")
                if outs[("this", variant, "long")]["incidents"] != outs[("compared", variant, "long")]["incidents"]:
                    print(f"[{variant}] NOTE: the two codes' incidents differ")
    report["load_after"] = load()
    print(f"load average (1, 5, 15 min): before {report['load_before']}, after {report['load_after']}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
