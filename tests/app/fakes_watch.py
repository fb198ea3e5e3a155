"""Test helpers for the watch app: a synthetic test video and a colour-blob detector.

`BlobDetector` is a real (if tiny) detector: it finds saturated colour blobs on a dark frame
with OpenCV and reports red blobs as class 0 (person) and blue ones as class 2 (car), so the
pipeline can be tested end to end, decoding included, without a neural network.
"""

from __future__ import annotations

import sys
from pathlib import Path

import cv2
import numpy as np

from campusguard.detections import Detections

NAMES = {0: "person", 1: "bicycle", 2: "car"}
RED, BLUE = (0, 0, 230), (230, 0, 0)  # BGR


class BlobDetector:
    """Colour blobs as detections; ``calls`` counts batches, ``images`` frames."""

    names = NAMES

    def __init__(self, min_area_px: int = 20) -> None:
        self.min_area_px = min_area_px
        self.calls = 0
        self.images = 0
        self.batch_sizes: list[int] = []

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return frame_hw

    def __call__(self, image: np.ndarray) -> Detections:
        rows = []
        for cls, channel in ((0, 2), (2, 0)):
            others = [c for c in range(3) if c != channel]
            mask = ((image[:, :, channel] > 150) & (image[:, :, others].max(axis=2) < 100)).astype(np.uint8)
            n, _, stats, _ = cv2.connectedComponentsWithStats(mask)
            for k in range(1, n):
                x, y, w, h, area = stats[k]
                if area >= self.min_area_px:
                    rows.append((x, y, x + w, y + h, 0.9, cls))
        if not rows:
            return Detections.empty()
        a = np.asarray(rows, np.float32)
        return Detections(a[:, :4], a[:, 4], a[:, 5].astype(np.int64))

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        self.calls += 1
        self.images += len(images)
        self.batch_sizes.append(len(images))
        return [self(im) for im in images]


def blob_detector_factory(model: str | None, device: str, imgsz: object) -> BlobDetector:
    """A `BlobDetector` for any model: a picklable detector factory (scan's worker processes import it)."""
    return BlobDetector()


def person_box(i: int) -> tuple[int, int, int, int] | None:
    """Scripted person: walks right from x=10 along y 100..140, frames 0..59; in the zone x>=160 from about frame 19."""
    x = 10 + 8 * i
    if x > 300:
        return None
    return x, 100, x + 14, 140


def write_scene(path: Path, n: int = 60, fps: float = 10.0, size_wh: tuple[int, int] = (320, 180)) -> Path:
    """An MP4 (or MJPEG AVI for ``.avi``) of a red 'person' walking right (see `person_box`) and a parked blue 'car'."""
    w, h = size_wh
    fourcc = "MJPG" if path.suffix == ".avi" else "mp4v"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*fourcc), fps, (w, h))
    for i in range(n):
        img = np.full((h, w, 3), 30, np.uint8)
        cv2.rectangle(img, (20, 150), (60, 170), BLUE, -1)
        box = person_box(i)
        if box is not None:
            cv2.rectangle(img, box[:2], box[2:], RED, -1)
        writer.write(img)
    writer.release()
    return path


def write_walks(path: Path, walks: int = 3, fps: float = 10.0) -> Path:
    """An MP4 of a person crossing the east half ``walks`` times (one intrusion each, every 45 frames) and a car
    parked in the fire lane."""
    w, h, cycle = 320, 180, 45
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    for i in range(walks * cycle):
        img = np.full((h, w, 3), 30, np.uint8)
        cv2.rectangle(img, (20, 150), (60, 170), BLUE, -1)
        k = i % cycle
        if k < 38:
            x = 10 + 8 * k
            cv2.rectangle(img, (x, 100), (x + 14, 140), RED, -1)
        writer.write(img)
    writer.release()
    return path


def scene_config(video: Path, tmp: Path, extra: str = "") -> str:
    """A watch config for `write_scene`: intrusion in the right half, annotated video and snapshots."""
    return f"""\
detector:
  batch_size: 2
tracker:
  min_consecutive_frames: 1
cameras:
  - id: cam1
    source: {video}
    zones:
      - name: east
        polygon: [[160, 0], [320, 0], [320, 180], [160, 180]]
      - name: parking
        polygon: [[0, 140], [100, 140], [100, 180], [0, 180]]
    rules:
      - kind: intrusion
        zone: east
        classes: [person]
        min_seconds: 1.0
      - kind: fire_lane
        zone: parking
        classes: [car]
        min_seconds: 2.0
alerts:
  - kind: stdout
  - kind: jsonl
    path: {tmp / "events.jsonl"}
storage:
  sqlite: {tmp / "events.db"}
outputs:
  annotated_video_dir: {tmp / "video"}
  snapshots_dir: {tmp / "snaps"}
  metrics_interval_s: 0
{extra}"""


def main(argv: list[str]) -> int:
    """``python fakes_watch.py CONFIG``: `campusguard watch` with `BlobDetector` (for subprocess tests);
    ``python fakes_watch.py --serve PORT USERS_DB CONFIG``: `campusguard serve` the same way (``USERS_DB``
    ``-``: none, the users are in the config's PostgreSQL).

    ``CG_FAKE_SECONDS_PER_IMAGE`` paces the detector (seconds per frame): a file run lasts long
    enough to be killed mid-run, and no frame is dropped, so every run raises the same incidents.
    The exit status is the command's: 0 clean, 1 not clean, 2 and one line for a `CampusGuardError`.
    """
    import os
    import time

    from campusguard.app.config import load_config
    from campusguard.app.service import WatchService
    from campusguard.app.signals import run_until_stopped
    from campusguard.errors import CampusGuardError

    pace = float(os.environ.get("CG_FAKE_SECONDS_PER_IMAGE", "0"))

    class Paced(BlobDetector):
        def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
            time.sleep(pace * len(images))
            return super().predict_batch(images)

    try:
        if argv[0] == "--serve":
            import typer

            from campusguard.cli.serve import serve_console

            port, config = int(argv[1]), Path(argv[3])
            users_db = None if argv[2] == "-" else Path(argv[2])  # "-": the config's PostgreSQL holds the users
            try:
                serve_console(config, port=port, users_db=users_db, detector_factory=lambda *a: Paced())
            except typer.Exit as exc:
                return int(exc.exit_code)
            return 0
        loaded = load_config(argv[0])
        service = WatchService(loaded, detector_factory=lambda *a: Paced())
        return 0 if run_until_stopped(service, stop_timeout_s=loaded.config.service.stop_timeout_s) else 1
    except CampusGuardError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


class TruthDetector:
    """Returns the ground-truth boxes of a synthetic video, frame after frame (one camera, every frame in order).

    Args:
        truth_path: the ground-truth JSON written next to the video; read lazily on first use, so
            the detector can be built before the video exists.
        names: class names (COCO).
    """

    def __init__(self, truth_path: Path, names: dict[int, str]) -> None:
        self.truth_path = truth_path
        self.names = names
        self._frames: list[dict] | None = None
        self._next = 0

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return frame_hw

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        import json

        if self._frames is None:
            self._frames = json.loads(self.truth_path.read_text())["frames"]
        out = []
        for _ in images:
            objects = self._frames[self._next]["objects"]
            self._next += 1
            if not objects:
                out.append(Detections.empty())
                continue
            xyxy = np.asarray([o["xyxy"] for o in objects], np.float32)
            out.append(
                Detections(xyxy, np.full(len(objects), 0.9, np.float32), np.asarray([o["class_id"] for o in objects]))
            )
        return out
