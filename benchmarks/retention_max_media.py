"""Target 2 of issue 24: ``retention: {max_media: 2MB}`` on a 60 s demo scene with recording and snapshots.

Generates the demo's synthetic campus video (seed, 640x360, 10 fps), watches it with the demo's
config plus a retention section, twice: once without limits (the reference: every incident and
all the media it writes) and once with ``max_media``. Detection is the video's ground truth
(`TruthDetector`), so both runs raise the same incidents and the measurement is about storage.
Prints and writes JSON: incidents stored in each run, media bytes at the end by kind.

    PYTHONPATH=src python benchmarks/retention_max_media.py --seconds 60 --out docs/results/retention-max-media-cpu.json
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "app"))

from fakes_watch import TruthDetector  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.demo import demo_config  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.data.synth.classes import COCO_NAMES  # noqa: E402
from campusguard.data.synth.video import generate_video  # noqa: E402

NAMES = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)


def media_bytes(out_dir: Path) -> dict[str, int]:
    return {
        kind: sum(p.stat().st_size for p in (out_dir / folder).glob("*") if p.is_file())
        for kind, folder in (("snapshots", "snapshots"), ("recordings", "annotated"))
    }


def run(
    video_dir: Path, truth: dict[str, Any], video: Path, out_dir: Path, retention: dict[str, Any] | None
) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    data = demo_config(truth, video, out_dir)
    data["outputs"]["annotated_segment_s"] = 10.0  # recordings in finished segments the pruner may delete
    if retention is not None:
        data["retention"] = retention
    path = out_dir / "watch.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    loaded = parse_config(path.read_text(encoding="utf-8"), str(path))
    truth_path = video.with_suffix(".json")
    service = WatchService(loaded, detector_factory=lambda *_: TruthDetector(truth_path, NAMES), out=io.StringIO())
    t0 = time.monotonic()
    clean = service.run()
    events = read_events(out_dir / "events.db")
    m = media_bytes(out_dir)
    return {
        "clean": clean,
        "seconds": round(time.monotonic() - t0, 2),
        "incidents": len(events),
        "incidents_ended": sum(1 for e in events if not e.is_open),
        "snapshots_named": sum(1 for e in events if e.snapshot_path),
        "snapshots_missing": sum(1 for e in events if e.snapshot_path and not Path(e.snapshot_path).exists()),
        "media_bytes": m,
        "media_total": sum(m.values()),
        "pruned": None if service.retention is None else service.retention.metrics.files_pruned,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max-media", default="2MB")
    ap.add_argument("--work", type=Path, default=Path("/tmp/cg-retention-bench"))
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    work = args.work
    truth = generate_video(args.seed, work, seconds=args.seconds, name=f"campus-seed{args.seed}").to_dict()
    video = work / f"campus-seed{args.seed}.mp4"
    if not video.exists():
        video = next(work.glob(f"campus-seed{args.seed}.*"))
    reference = run(work, truth, video, work / "reference", {"enabled": False})
    limited = run(work, truth, video, work / "limited", {"max_media": args.max_media, "check_s": 0.5})
    result = {
        "scene": {"seed": args.seed, "seconds": args.seconds, "size_wh": [640, 360], "fps": 10},
        "max_media": args.max_media,
        "reference": reference,
        "limited": limited,
        "target_met": limited["media_total"] <= 2_000_000
        and limited["incidents"] == reference["incidents"]
        and limited["snapshots_missing"] == 0,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0 if result["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
