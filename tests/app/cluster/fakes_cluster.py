"""Test helpers for camera groups: long synthetic scenes and a colour-blob detector with a cost per batch.

`make_detector_factory` is what a group calls with its config; the tests register this module
(and `fakes_watch`) with Ray's pickler by value, so Ray workers need no test path to unpickle it.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).parent.parent))
from fakes_watch import BLUE, RED, BlobDetector, person_box  # noqa: E402

from campusguard.app.events import read_events  # noqa: E402
from campusguard.detections import Detections  # noqa: E402

WALK_FRAMES = 50
"""The scripted person re-enters every this many frames (one intrusion incident per walk)."""


class CostlyBlobDetector(BlobDetector):
    """`BlobDetector` that also sleeps ``batch_s`` per batch, so a run lasts long enough to kill a node in it."""

    def __init__(self, batch_s: float = 0.01) -> None:
        super().__init__()
        self.batch_s = batch_s

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        time.sleep(self.batch_s)
        return super().predict_batch(images)


def make_detector_factory(loaded: object, batch_s: float = 0.01) -> object:
    """The `DetectorFactoryMaker` of the tests: one `CostlyBlobDetector` per (model, device, imgsz)."""
    return lambda *args: CostlyBlobDetector(batch_s)


def costly_detector_factory(loaded: object) -> object:
    """`make_detector_factory` at 30 ms per batch: a two-camera group processes about 60 frames a second."""
    return make_detector_factory(loaded, 0.03)


def write_walks(path: Path, n: int, offset: int = 0, fps: float = 10.0, size_wh: tuple[int, int] = (320, 180)) -> Path:
    """An MJPEG AVI of ``n`` frames: a red person walks right every `WALK_FRAMES` frames (from ``offset``), a blue car parks."""
    w, h = size_wh
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    for i in range(n):
        img = np.full((h, w, 3), 30, np.uint8)
        cv2.rectangle(img, (20, 150), (60, 170), BLUE, -1)
        box = person_box((i + offset) % WALK_FRAMES)
        if box is not None:
            cv2.rectangle(img, box[:2], box[2:], RED, -1)
        writer.write(img)
    writer.release()
    return path


def cameras_config(videos: list[Path], tmp: Path, cameras_per_actor: int = 2, extra: str = "") -> str:
    """A watch config with one camera per video (intrusion in the right half), a JSONL sink and a cluster section."""
    cams = "".join(
        f"""\
  - id: cam{k}
    source: {v}
    zones:
      - name: east
        polygon: [[160, 0], [320, 0], [320, 180], [160, 180]]
    rules:
      - kind: intrusion
        zone: east
        classes: [person]
        min_seconds: 0.5
"""
        for k, v in enumerate(videos)
    )
    return f"""\
detector:
  batch_size: 2
tracker:
  min_consecutive_frames: 1
cameras:
{cams}alerts:
  - kind: jsonl
    path: {tmp / "events.jsonl"}
storage:
  sqlite: {tmp / "events.db"}
outputs:
  metrics_interval_s: 0
cluster:
  cameras_per_actor: {cameras_per_actor}
  poll_interval_s: 0.05
{extra}"""


__all__ = [
    "RED",
    "WALK_FRAMES",
    "CostlyBlobDetector",
    "costly_detector_factory",
    "cameras_config",
    "make_detector_factory",
    "write_walks",
]


def incidents(db: Path) -> list[tuple]:
    """The stored incidents' deterministic fields, sorted (what a cluster run must reproduce)."""
    return sorted(
        (e.event_id, e.camera_id, e.phase, e.start_s, e.end_s, e.start_frame, e.end_frame, e.tracker_ids)
        for e in read_events(db)
    )


def sink_lines(path: Path) -> Counter:
    """(event id, phase) of every line the JSONL sink wrote, counted."""
    return Counter((d["event_id"], d["phase"]) for d in map(json.loads, path.read_text().splitlines()))
