"""Cameras per machine: how many 1280x720, 10 fps cameras `watch` sustains with < 1% dropped frames.

Every camera is a synthetic campus video (`campusguard.data.synth`) read with ``realtime: true``:
paced at its own 10 fps like a live camera, the oldest queued frame dropped when the pipeline is
behind (counted). Each video is a scripted part (people, vehicles, the scripted incidents) then a
quiet part (the empty scene with sensor noise), because a campus camera shows an empty, still
scene much of the day. A trial runs N cameras for the whole video; it is *sustained* when fewer
than 1% of the frames read were dropped and the run took at most 5% longer than the video (a
reader that cannot decode in real time falls behind without dropping). The count is raised
(1, 2, 4, ... then bisection) until a trial fails.

Contenders, stepped side by side in one run (each step runs every contender still rising):

- ``ultralytics``: Ultralytics' own predict (``YOLO(onnx).predict``, one image per call, its
  own letterbox, decode and NMS) as the detector of the same paced pipeline;
- ``fp32``: CampusGuard FP32, whole frames (aspect-matched 192x320 input);
- ``int8``: the bundled INT8 variant, whole frames (aspect-matched 192x320 input, like FP32);
- ``int8_motion``: INT8 with motion gating (crops around motion and tracks, whole frame every 5 s).

Incident F1 against the videos' ground truth is pooled over the cameras of each contender's
largest sustained trial. All contenders use the bundled model (trained on synthetic scenes).

    python benchmarks/capacity.py --out docs/results/capacity-cpu
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import platform
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

os.environ.setdefault("YOLO_OFFLINE", "1")

import cv2
import numpy as np
import yaml
from decode_cost import H264Writer  # the sibling script (benchmarks/ is on the path when run as one)

from campusguard.app.config import parse_config
from campusguard.app.demo import demo_config
from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth
from campusguard.app.events import read_events
from campusguard.app.service import WatchService
from campusguard.data.synth.video import SynthVideo
from campusguard.detections import Detections
from campusguard.doctor import cpu_name
from campusguard.models.resolve import DEFAULT_MODEL

CONTENDERS = ("ultralytics", "fp32", "int8", "int8_motion")


def campus_frames(
    video: SynthVideo, seed: int, quiet_s: float, lead_s: float, per_frame: list[list[dict]]
) -> Iterator[np.ndarray]:
    """``lead_s`` of the empty scene (with sensor noise), the video's script, then ``quiet_s - lead_s`` of the
    empty scene; each scripted frame's objects are appended to ``per_frame`` (for the truth)."""

    def quiet(n: int, first: int) -> Iterator[np.ndarray]:
        for i in range(first, first + n):
            frame = video.background.copy()
            video.noise.add(frame, np.random.default_rng([seed, 0xC0FFEE, i]), video.noise_level)
            yield frame

    lead = round(lead_s * video.fps)
    yield from quiet(lead, 0)
    for i in range(video.num_frames):
        frame, objects = video.frame(i)
        per_frame.append(objects)
        yield frame
    yield from quiet(round(quiet_s * video.fps) - lead, lead)


def make_video(
    seed: int,
    folder: Path,
    scripted_s: float,
    quiet_s: float,
    fps: int = 10,
    lead_s: float = 0.0,
    codec: str = "mp4v",
    bitrate_kbps: int = 2000,
) -> tuple[Path, Path]:
    """A 1280x720 mp4: ``lead_s`` of the empty scene, ``scripted_s`` of the seed's script, then
    ``quiet_s - lead_s`` of the empty scene (the truth file's times count from the script's start:
    `run_trial` adds ``lead_s``). ``codec``: ``mp4v`` (OpenCV's writer, MPEG-4 part 2) or ``h264``
    (camera-like H.264 at ``bitrate_kbps``, `decode_cost.H264Writer`)."""
    suffix = "" if codec == "mp4v" else f"-{codec}"
    path = folder / f"campus-seed{seed}-s{scripted_s:g}-q{quiet_s:g}-lead{lead_s:g}-fps{fps}{suffix}.mp4"
    truth_path = path.with_suffix(".json")
    if path.is_file() and truth_path.is_file():  # made by an earlier run with --work: the same bytes
        return path, truth_path
    video = SynthVideo(seed, (1280, 720), scripted_s, fps)
    if codec == "h264":
        writer: Any = H264Writer(path, fps, video.size_wh, bitrate_kbps)
    elif codec == "mp4v":
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), float(fps), video.size_wh)
    else:
        raise ValueError(f"codec must be mp4v or h264, got {codec!r}")
    per_frame: list[list[dict]] = []
    for frame in campus_frames(video, seed, quiet_s, lead_s, per_frame):
        writer.write(frame)
    writer.release()
    truth = video.truth(per_frame, video_name=path.name)
    truth.save(truth_path)
    return path, truth_path


class UltralyticsDetector:
    """Ultralytics' predict as a detector: ``YOLO(onnx).predict`` on one frame per call."""

    def __init__(self, model: Path, imgsz: int, conf: float, iou: float) -> None:
        from ultralytics import YOLO

        from campusguard.detector import Detector

        self.names = Detector(model=model).names
        self.model = YOLO(str(model), task="detect")
        self.imgsz, self.conf, self.iou = imgsz, conf, iou

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return (self.imgsz, self.imgsz)

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        out = []
        for im in images:
            r = self.model.predict(im, imgsz=self.imgsz, conf=self.conf, iou=self.iou, verbose=False)[0]
            b = r.boxes
            out.append(
                Detections(
                    b.xyxy.cpu().numpy().astype(np.float32),
                    b.conf.cpu().numpy().astype(np.float32),
                    b.cls.cpu().numpy().astype(np.int64),
                )
            )
        return out


def trial_config(contender: str, n: int, videos: list[tuple[Path, dict]], folder: Path) -> dict[str, Any]:
    """The watch config of N paced cameras (camera k plays video k mod len(videos))."""
    cams = []
    for k in range(n):
        video, truth = videos[k % len(videos)]
        cam = demo_config(truth, video, folder)["cameras"][0]
        cam.update(id=f"cam{k}", realtime=True, queue_size=8, motion={"enabled": contender == "int8_motion"})
        cams.append(cam)
    base = demo_config(videos[0][1], videos[0][0], folder)
    det = dict(base.get("detector", {}))
    det.update(precision="int8" if contender.startswith("int8") else "fp32", imgsz=320)
    det["batch_size"] = 1 if contender == "ultralytics" else 4
    return {
        "detector": det,
        "tracker": base.get("tracker", {}),
        "cameras": cams,
        "storage": {"sqlite": str(folder / "events.db")},
        "alerts": [],
        "outputs": {"metrics_interval_s": 0},
    }


def run_trial(
    contender: str,
    n: int,
    videos: list[tuple[Path, dict]],
    truths: list[Path],
    video_s: float,
    leads: list[float] | None = None,
) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"cap-{contender}-{n}-") as tmp:
        folder = Path(tmp)
        cfg = trial_config(contender, n, videos, folder)
        loaded = parse_config(yaml.safe_dump(cfg), "capacity.yaml")
        factory = None
        if contender == "ultralytics":
            det = cfg["detector"]
            factory = lambda *a: UltralyticsDetector(DEFAULT_MODEL, 320, det.get("conf", 0.25), det.get("iou", 0.7))  # noqa: E731
        service = WatchService(loaded, detector_factory=factory, out=io.StringIO())
        service.start()
        t0 = time.monotonic()
        service.wait()
        wall = time.monotonic() - t0
        service.finish()
        service.refresh_metrics()
        ms = list(service.metrics.values())
        frames_in = sum(m.frames_in for m in ms)
        dropped = sum(m.frames_dropped for m in ms)
        truth, predicted = [], []
        events = read_events(folder / "events.db")
        for k in range(n):
            cam = f"cam{k}"
            lead = leads[k % len(leads)] if leads else 0.0
            truth += [
                dataclasses.replace(i, camera_id=cam, start_s=i.start_s + lead, end_s=i.end_s + lead)
                for i in load_truth(truths[k % len(truths)])
            ]
        predicted = incidents_from_events(events)
        scores = evaluate_events(truth, predicted)
        o = scores.overall
        drop_frac = dropped / max(1, frames_in + 0)
        return {
            "contender": contender,
            "cameras": n,
            "frames_in": frames_in,
            "dropped": dropped,
            "drop_pct": round(100 * drop_frac, 2),
            "wall_s": round(wall, 1),
            "lag_ratio": round(wall / video_s, 3),
            "detector_images": sum(m.detector_images for m in ms),
            "frames_skipped": sum(m.frames_skipped for m in ms),
            "frames_regions": sum(m.frames_regions for m in ms),
            "inference_ms_per_frame": round(sum(m.inference_ms_total for m in ms) / max(1, frames_in - dropped), 2),
            "tp": o.tp,
            "fp": o.fp,
            "fn": o.fn,
            "f1": round(o.f1, 3),
            "sustained": drop_frac < 0.01 and wall <= 1.05 * video_s,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,2,4", help="video seeds (even seeds script every incident kind)")
    ap.add_argument("--scripted-s", type=float, default=20.0)
    ap.add_argument("--quiet-s", type=float, default=10.0)
    ap.add_argument("--max-cameras", type=int, default=16)
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument(
        "--stagger",
        action="store_true",
        help="cameras busy at different times: each seed also as variants led by 1, 2, ... script lengths of the empty "
        "scene, so about scripted / (scripted + quiet) of the cameras are busy at once (without it every camera's "
        "script runs at the same time: the peak)",
    )
    ap.add_argument("--cameras", default=None, help="run only these counts, e.g. 16,24 (no search)")
    ap.add_argument("--out", type=Path, default=Path("docs/results/capacity-cpu"))
    ap.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for the videos, kept and reused by later runs (default: a new temp folder)",
    )
    args = ap.parse_args()
    contenders = [c for c in args.contenders.split(",") if c]
    work = args.work or Path(tempfile.mkdtemp(prefix="cap-videos-"))
    work.mkdir(parents=True, exist_ok=True)
    videos, truths, leads = [], [], []
    n_leads = int((args.scripted_s + args.quiet_s) // args.scripted_s) if args.stagger else 1
    for j in range(n_leads):  # camera k plays video k mod len(videos): seed k mod S, lead (k // S) mod n_leads
        for seed in (int(s) for s in args.seeds.split(",")):
            lead = j * args.scripted_s
            video, truth_path = make_video(seed, work, args.scripted_s, args.quiet_s, lead_s=lead)
            videos.append((video, json.loads(truth_path.read_text())))
            truths.append(truth_path)
            leads.append(lead)
    video_s = args.scripted_s + args.quiet_s
    if args.cameras:
        fixed = []
        for n in (int(x) for x in args.cameras.split(",")):
            for c in contenders:
                r = run_trial(c, n, videos, truths, video_s, leads)
                fixed.append(r)
                print(json.dumps(r), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"cpu_name": cpu_name(), "trials": fixed}, indent=2) + "\n")
        return
    # per contender: highest sustained count, lowest failed count
    lo = {c: 0 for c in contenders}
    hi = {c: args.max_cameras + 1 for c in contenders}
    trials: list[dict] = []
    best: dict[str, dict] = {}

    def next_n(c: str) -> int | None:
        if hi[c] - lo[c] <= 1:
            return None
        if hi[c] == args.max_cameras + 1:
            return min(args.max_cameras, max(1, 2 * lo[c]))
        return (lo[c] + hi[c]) // 2

    while True:
        step = [(c, n) for c in contenders if (n := next_n(c)) is not None]
        if not step:
            break
        for c, n in step:
            r = run_trial(c, n, videos, truths, video_s, leads)
            trials.append(r)
            print(json.dumps(r), flush=True)
            if r["sustained"]:
                lo[c] = n
                best[c] = r
            else:
                hi[c] = n
    summary = {
        "cpu": platform.processor() or platform.machine(),
        "cpu_name": cpu_name(),
        "logical_cores": os.cpu_count(),
        "video": f"1280x720, 10 fps, {args.scripted_s:.0f} s scripted + {args.quiet_s:.0f} s quiet, seeds {args.seeds}",
        "capacity": {c: lo[c] for c in contenders},
        "best": best,
        "trials": trials,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["capacity"]))


if __name__ == "__main__":
    main()
