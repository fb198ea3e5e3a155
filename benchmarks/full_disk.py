"""Issue 24, target 3: a 3 MiB disk that fills with media: exit 0, no traceback, one clear line about
the disk, every incident (within one) stored, ended and alerted; against the demo's own run of the
same held-out 60 s scene (seed 13, 11 scripted incidents) on an ordinary folder.

    sudo python benchmarks/full_disk.py --out docs/results/full-disk.json   # needs root for the tmpfs

The detector is the scene's ground truth (`TruthDetector`), so the numbers are about storage, not recall.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import json, sys
from pathlib import Path
import yaml
sys.path.insert(0, {tests!r})
from fakes_watch import TruthDetector
from campusguard.app.config import parse_config
from campusguard.app.demo import demo_config
from campusguard.app.service import WatchService
from campusguard.app.signals import run_until_stopped
from campusguard.data.synth.classes import COCO_NAMES
names = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)
video, out = Path(sys.argv[1]), Path(sys.argv[2])
data = demo_config(json.loads(video.with_suffix(".json").read_text()), video, out)
loaded = parse_config(yaml.safe_dump(data), str(out / "watch.yaml"))
service = WatchService(loaded, detector_factory=lambda *a: TruthDetector(video.with_suffix(".json"), names))
sys.exit(0 if run_until_stopped(service) else 1)
"""


def run(video: Path, out: Path) -> dict:
    from campusguard.app.events import read_events

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", RUN.format(tests=str(ROOT / "tests" / "app")), str(video), str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    events = read_events(out / "events.db")
    alerts = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    snaps = [e.snapshot_path for e in events if e.snapshot_path]
    return {
        "exit": done.returncode,
        "wall_s": round(time.perf_counter() - t0, 2),
        "traceback": "Traceback" in done.stderr,
        "disk_lines": [x for x in done.stderr.splitlines() if "disk full: volume" in x],
        "incidents_stored": len(events),
        "incidents_ended": sum(e.end_s is not None for e in events),
        "start_alerts": sum(a["phase"] == "start" for a in alerts),
        "end_alerts": sum(a["phase"] == "end" for a in alerts),
        "snapshots_named": len(snaps),
        "snapshots_missing": sum(not Path(p).is_file() for p in snaps),
        "recording_segments": len(list((out / "annotated").glob("*.mp4"))),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--size", default="3m", help="tmpfs size")
    ap.add_argument("--out", type=Path, default=None, help="JSON result file")
    args = ap.parse_args()
    from campusguard.data.synth.video import generate_video

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        truth = generate_video(args.seed, tmp, size_wh=(640, 360), seconds=args.seconds, fps=10, name="scene")
        video = tmp / truth.video
        (tmp / "ref").mkdir()
        reference = run(video, tmp / "ref")
        mnt = tmp / "disk"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={args.size}", "tmpfs", str(mnt)], check=True)
        try:
            full = run(video, mnt)
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
    result = {
        "command": " ".join(["python", "benchmarks/full_disk.py", *sys.argv[1:]]),
        "scene": {"seed": args.seed, "seconds": args.seconds, "scripted_incidents": len(truth.to_dict()["incidents"])},
        "tmpfs": args.size,
        "reference": reference,
        "full_disk": full,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
