"""Host work per frame of one 720p camera on one CPU core: decode, motion gate, tracking and rules, events.

What `campusguard plan --host-cost FILE` adds to the detector's work. One synthetic 1280x720 campus
camera (`capacity.make_video`: the scripted scene, then the empty scene with sensor noise, so the
camera is busy part of the time as in `benchmarks/capacity.py`), encoded as camera-like H.264
(``--codec h264``, default) or as the MPEG-4 part 2 file the capacity benchmark plays (``mp4v``).
The process is pinned to one core and every frame goes through the app's own code, one stage at a
time, each timed in process CPU time:

- ``decode``: `CaptureSource.read` (the camera reader's OpenCV FFMPEG capture; one decoder thread);
- ``motion``: the camera's `MotionGate` built by `motion_gate_for` from the config's ``motion``
  section, planning the frame with the tracked boxes, then its crops and the merge of their boxes;
- ``tracking_rules``: `AnalyticsWorker.process` (tracking, rules, events handed on; no annotated
  video, no snapshots: `watch`'s defaults);
- ``events``: `EventWorker.handle` on the frame's events (the SQLite event store; no alert sinks,
  as in the capacity benchmark), spread over all frames.

The detector runs between the stages, untimed: the bundled model (INT8 at imgsz 320, one thread, as
in the capacity benchmark) on what the gate planned, so tracking and rules see real detections.
The gate's detector images per frame on this video are recorded too (an active fraction measured on
one camera). Results go to stdout and, with ``--out``, to a host-cost JSON file
(`campusguard.bench.host_cost`).

    python benchmarks/host_cost.py --scripted-s 15 --quiet-s 45 --out docs/results/host-cost-cpu.json
"""

from __future__ import annotations

import argparse
import io
import json
import os
import queue
import shlex
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENCV_FFMPEG_CAPTURE_OPTIONS", "threads;1")  # read before the first capture opens
os.environ.setdefault("YOLO_OFFLINE", "1")

import cv2  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from capacity import make_video  # noqa: E402  (the sibling script: the same videos as the capacity benchmark)

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.demo import demo_config  # noqa: E402
from campusguard.app.engine.analytics import AnalyticsWorker  # noqa: E402
from campusguard.app.engine.detection import TrackedBoxes  # noqa: E402
from campusguard.app.engine.metrics import CameraMetrics  # noqa: E402
from campusguard.app.engine.sources import CaptureSource, Frame  # noqa: E402
from campusguard.app.engine.stages import DetectedFrame  # noqa: E402
from campusguard.app.engine.wiring import (  # noqa: E402
    build_camera,
    default_detector_factory,
    detector_key,
    motion_gate_for,
    open_store_and_sinks,
)
from campusguard.app.engine.writer import EventMessage, EventWorker  # noqa: E402
from campusguard.bench.host_cost import HOST_COST_KIND, HOST_COST_SCHEMA_VERSION, STAGES, write_host_cost  # noqa: E402
from campusguard.doctor import cpu_name  # noqa: E402
from campusguard.motion import crop_regions, merge_region_detections  # noqa: E402

FPS = 10
"""Frame rate of the test camera (the capacity benchmark's)."""


def camera_config(video: Path, truth: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The watch config of one motion-gated camera, with the capacity benchmark's detector (INT8, imgsz 320)."""
    cfg = demo_config(truth, video, folder, motion=True, precision="int8")
    cfg["detector"].update(imgsz=320, threads=1)
    cfg["alerts"] = []
    cfg["outputs"] = {"metrics_interval_s": 0}
    return cfg


def measure(video: Path, truth: dict[str, Any], folder: Path, scripted_frames: int) -> dict[str, Any]:
    """Per-stage CPU ms of every frame of ``video``, summed over the scripted part and the quiet rest."""
    loaded = parse_config(yaml.safe_dump(camera_config(video, truth, folder)), "host-cost.yaml")
    cam = loaded.config.cameras[0]
    model, device, imgsz = detector_key(loaded.config, cam)
    detector = default_detector_factory(loaded)(model, device, imgsz)
    source = CaptureSource(str(video))
    fps = source.fps or FPS
    c0 = time.process_time()
    first = source.read()
    decode_ms = (time.process_time() - c0) * 1000
    if first is None:
        raise RuntimeError(f"cannot read {video}")
    wh = (int(first.shape[1]), int(first.shape[0]))
    parts = build_camera(loaded, 0, detector.names, wh, fps)
    gate = motion_gate_for(cam, detector, wh)
    store, sinks = open_store_and_sinks(loaded, out=io.StringIO())
    failed = threading.Event()
    events: queue.Queue = queue.Queue()
    metrics = CameraMetrics(cam.id)
    tracked = TrackedBoxes()  # what the analytics worker publishes for the gate, as in `watch`
    analytics = AnalyticsWorker(
        cam.id,
        queue.Queue(),
        events,
        parts.tracker,
        parts.rules,
        parts.geometry,
        detector.names,
        metrics,
        failed,
        tracked_out=tracked,
    )
    event_worker = EventWorker(queue.Queue(), store, sinks, [cam.id], failed)
    phases = {p: {**dict.fromkeys(STAGES, 0.0), "frames": 0} for p in ("scripted", "quiet")}
    detector_images = skipped = regions = 0
    last_boxes = np.zeros((0, 4), np.float32)
    index, image = 0, first
    while image is not None:
        frame = Frame(cam.id, index, index / fps, image, time.monotonic())
        c0 = time.process_time()
        plan = gate.plan(image, frame.timestamp_s, np.concatenate([last_boxes, tracked.boxes_for(wh)]))
        crops = crop_regions(image, plan)
        motion_ms = (time.process_time() - c0) * 1000
        dets = detector.predict_batch(crops) if crops else []  # untimed: the detector is the plan's other term
        c0 = time.process_time()
        merged = merge_region_detections(plan, dets, loaded.config.detector.iou, wh)
        motion_ms += (time.process_time() - c0) * 1000
        last_boxes = merged.xyxy
        detector_images += plan.calls if plan.kind != "skip" else 0
        skipped += plan.kind == "skip"
        regions += plan.kind == "regions"
        c0 = time.process_time()
        analytics.process(DetectedFrame(frame, merged, 0.0))
        track_ms = (time.process_time() - c0) * 1000
        c0 = time.process_time()
        while not events.empty():
            msg = events.get_nowait()
            if isinstance(msg, EventMessage):
                event_worker.handle(msg.event)
        events_ms = (time.process_time() - c0) * 1000
        phase = phases["scripted" if index < scripted_frames else "quiet"]
        for key, ms in (
            ("decode", decode_ms),
            ("motion", motion_ms),
            ("tracking_rules", track_ms),
            ("events", events_ms),
        ):
            phase[key] += ms
        phase["frames"] += 1
        index += 1
        c0 = time.process_time()
        image = source.read()
        decode_ms = (time.process_time() - c0) * 1000
    source.close()
    event_worker.close()
    frames = index
    return {
        "phases": phases,
        "frames": frames,
        "events": event_worker.stored,
        "gating": {
            "detector_images_per_frame": detector_images / frames,
            "skipped_fraction": skipped / frames,
            "regions_fraction": regions / frames,
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0, help="video seed (even seeds script every incident kind)")
    ap.add_argument("--scripted-s", type=float, default=15.0, help="seconds of the scripted scene")
    ap.add_argument("--quiet-s", type=float, default=45.0, help="seconds of the empty scene after it")
    ap.add_argument("--codec", choices=("h264", "mp4v"), default="h264", help="how the test video is encoded")
    ap.add_argument("--bitrate-kbps", type=int, default=2000, help="H.264 target bitrate")
    ap.add_argument("--core", type=int, default=0, help="CPU core to pin to")
    ap.add_argument("--notes", default="", help="conditions of the run (e.g. machine loaded by other jobs)")
    ap.add_argument("--out", type=Path, default=None, help="host-cost JSON file for `campusguard plan --host-cost`")
    args = ap.parse_args()

    created = datetime.now(UTC).replace(microsecond=0).isoformat()
    os.sched_setaffinity(0, {args.core})
    cv2.setNumThreads(1)
    with tempfile.TemporaryDirectory(prefix="host-cost-") as tmp:
        folder = Path(tmp)
        video, truth_path = make_video(
            args.seed, folder, args.scripted_s, args.quiet_s, fps=FPS, codec=args.codec, bitrate_kbps=args.bitrate_kbps
        )
        truth = json.loads(truth_path.read_text())
        result = measure(video, truth, folder, scripted_frames=round(args.scripted_s * FPS))
    frames = result["frames"]
    total = {k: sum(p[k] for p in result["phases"].values()) / frames for k in STAGES}
    phases = {
        name: {**{k: p[k] / p["frames"] for k in STAGES}, "frames": p["frames"]}
        for name, p in result["phases"].items()
        if p["frames"]
    }
    doc = {
        "schema_version": HOST_COST_SCHEMA_VERSION,
        "kind": HOST_COST_KIND,
        "created_utc": created,
        "command": "python benchmarks/host_cost.py " + shlex.join(sys.argv[1:]),
        "notes": args.notes or None,
        "cpu": cpu_name(),
        "logical_cores": os.cpu_count(),
        "load_average": round(os.getloadavg()[0], 2),
        "video": {
            "resolution_wh": [1280, 720],
            "fps": FPS,
            "codec": args.codec,
            "frames": frames,
            "description": f"synthetic campus scene, seed {args.seed}: {args.scripted_s:g} s scripted, then "
            f"{args.quiet_s:g} s of the empty scene with sensor noise"
            + (f"; H.264 main profile at {args.bitrate_kbps} kbit/s" if args.codec == "h264" else "; MPEG-4 part 2"),
        },
        "stages_ms": {k: round(v, 4) for k, v in total.items()},
        "phases": {n: {k: round(v, 4) if isinstance(v, float) else v for k, v in p.items()} for n, p in phases.items()},
        "gating": {k: round(v, 4) for k, v in result["gating"].items()} | {"events_stored": result["events"]},
    }
    print(yaml.safe_dump(doc, sort_keys=False))
    print(f"host work per frame: {sum(total.values()):.2f} core-ms with motion gating, "
          f"{sum(v for k, v in total.items() if k != 'motion'):.2f} without")  # fmt: skip
    if args.out:
        write_host_cost(doc, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
