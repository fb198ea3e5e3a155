"""Target 2 of issue 31: ``campusguard serve`` with ``retention: {max_media: 2MB}`` and the recording on.

Generates the demo's synthetic campus video (seed, 640x360, 10 fps), writes the demo's config with a
retention section (the recording in one segment per run, as the issue measured it: 11.5 MB), and runs
``campusguard serve`` on it as an operator would (a subprocess through the CLI), with the video's
ground truth as the detector so the run is about storage. Once every incident has ended it stops the
console (SIGINT) and measures: media bytes at the end by kind (snapshots, recordings, the console's
clips; hidden temporary segments included), incidents and their snapshots, rows naming a missing file.

    PYTHONPATH=src python benchmarks/serve_max_media.py --seconds 60 --out docs/results/serve-max-media-cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from campusguard.app.demo import demo_config  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.data.synth.video import generate_video  # noqa: E402

_CLI = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests" / "app")!r})
from pathlib import Path
from fakes_watch import TruthDetector
from campusguard.data.synth.classes import COCO_NAMES
import campusguard.app.service as service
names = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)
truth = Path(sys.argv.pop(1))
service.default_detector_factory = lambda loaded: (lambda *a: TruthDetector(truth, names))
from campusguard.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def media(out: Path) -> dict[str, int]:
    folders = {"snapshots": out / "snapshots", "recordings": out / "annotated", "clips": out / "media" / "clips"}
    return {
        kind: sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) if folder.is_dir() else 0
        for kind, folder in folders.items()
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--max-media", default="2MB")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cg-serve-max-media"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = args.work
    out = work / "run"
    out.mkdir(parents=True, exist_ok=False)
    truth = generate_video(args.seed, work, seconds=args.seconds, name=f"campus-seed{args.seed}").to_dict()
    video = next(work.glob(f"campus-seed{args.seed}.mp4"))
    data = demo_config(truth, video, out)
    data["outputs"]["annotated_segment_s"] = args.seconds + 60  # one segment for the run, as the issue saw it
    data["retention"] = {"max_media": args.max_media}
    config = out / "watch.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = [sys.executable, "-c", _CLI, str(video.with_suffix(".json")), "serve", str(config)]
    argv += ["--port", str(port), "--users-db", str(out / "users.db")]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    db = Path(data["storage"]["sqlite"])
    while True:  # the file ends, the console stays up: stop it once every incident ended and the segment is done
        time.sleep(1.0)
        if proc.poll() is not None:
            break
        parts = list((out / "annotated").glob(".*.part.mp4")) if (out / "annotated").is_dir() else []
        if db.exists() and not parts and time.monotonic() - t0 > 5:
            events = read_events(db)
            if events and all(not e.is_open for e in events) and len(events) >= len(truth["incidents"]) - 1:
                time.sleep(5.0)  # the last clip (3 s after its incident's start) and its writer
                proc.send_signal(signal.SIGINT)
                break
    _, err = proc.communicate(timeout=120)
    events = read_events(db)
    m = media(out)
    result = {
        "scene": {"seed": args.seed, "seconds": args.seconds, "size_wh": truth["resolution_wh"], "fps": 10},
        "max_media": args.max_media,
        "exit_code": proc.returncode,
        "traceback": "Traceback" in err,
        "wall_s": round(time.monotonic() - t0, 1),
        "incidents_scripted": len(truth["incidents"]),
        "incidents": len(events),
        "incidents_open": sum(1 for e in events if e.is_open),
        "snapshots_named": sum(1 for e in events if e.snapshot_path),
        "rows_naming_missing_files": sum(1 for e in events if e.snapshot_path and not Path(e.snapshot_path).exists()),
        "media_bytes": m,
        "media_total": sum(m.values()),
    }
    result["target_met"] = (
        result["exit_code"] == 0
        and result["media_total"] <= 2_200_000
        and result["rows_naming_missing_files"] == 0
        and result["snapshots_named"] == result["incidents"]
    )
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
