"""The detection stage keeps one batch in flight on a detector that runs asynchronously: the next batch is
planned and started before the previous one is collected, frames come out in order, and a frame that needs
the batch in flight (a gated camera planning with its boxes, a camera's end) waits for it."""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from campusguard.app.engine.detection import DetectionWorker
from campusguard.app.engine.metrics import CameraMetrics
from campusguard.app.engine.sources import EndOfStream, Frame, FrameQueue
from campusguard.app.engine.stages import DetectedFrame
from campusguard.detections import Detections
from campusguard.motion import MotionGate


@dataclass
class _Pending:
    images: list[np.ndarray]
    running: bool


@dataclass
class AsyncFake:
    """A detector whose submissions are 'running' until collected; it logs every call in order.
    One box per image whose x is the image's first pixel (so each frame's boxes can be traced)."""

    running: bool = True
    log: list[tuple[str, int]] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=lambda: {0: "person"})

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return frame_hw

    def submit(self, images: list[np.ndarray]) -> _Pending:
        self.log.append(("submit", len(images)))
        return _Pending(images, self.running)

    def collect(self, pending: _Pending) -> list[Detections]:
        self.log.append(("collect", len(pending.images)))
        return [self._det(im) for im in pending.images]

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        return self.collect(self.submit(images))

    @staticmethod
    def _det(image: np.ndarray) -> Detections:
        x = float(image[0, 0, 0])
        return Detections(np.array([[x, 10, x + 20, 60]], np.float32), np.array([0.9], np.float32), np.array([0]))


def _frame(cam: str, i: int) -> Frame:
    image = np.zeros((120, 160, 3), np.uint8)
    image[0, 0, 0] = i  # traced through the fake's box
    image[40:80, 20 + i : 40 + i] = 200  # something moving, for a motion gate
    return Frame(cam, i, i / 10, image, time.monotonic())


def _run(
    detector: AsyncFake, frames: dict[str, int], batch_size: int = 2, gates: dict[str, MotionGate] | None = None
) -> dict[str, list[Any]]:
    """Queue every frame and the end of each camera, run the worker to the end, return what each camera got."""
    doorbell, stop, failed = threading.Event(), threading.Event(), threading.Event()
    inputs = {cam: FrameQueue(1000, drop_oldest=False, doorbell=doorbell) for cam in frames}
    outputs: dict[str, queue.Queue] = {cam: queue.Queue() for cam in frames}
    for cam, n in frames.items():
        for i in range(n):
            inputs[cam].put(_frame(cam, i))
        inputs[cam].put(EndOfStream(cam))
    worker = DetectionWorker(
        inputs,
        outputs,
        {cam: detector for cam in frames},
        {cam: CameraMetrics(cam) for cam in frames},
        stop,
        failed,
        doorbell,
        batch_size=batch_size,
        gates=gates,
    )
    t = threading.Thread(target=worker.run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive()
    got: dict[str, list[Any]] = {}
    for cam, q in outputs.items():
        got[cam] = []
        while not q.empty():
            got[cam].append(q.get_nowait())
    return got


def _check_in_order(got: list[Any], n: int) -> None:
    assert isinstance(got[-1], EndOfStream) and len(got) == n + 1
    frames = [m for m in got[:-1] if isinstance(m, DetectedFrame)]
    assert [m.frame.index for m in frames] == list(range(n))
    # each frame got its own detections, not a neighbour's
    assert [float(m.detections.xyxy[0, 0]) for m in frames] == [float(i) for i in range(n)]


def test_the_next_batch_starts_before_the_one_in_flight_is_collected() -> None:
    fake = AsyncFake(running=True)
    got = _run(fake, {"cam0": 9}, batch_size=2)
    _check_in_order(got["cam0"], 9)
    # 9 frames in batches of 2: each batch after the first is submitted before the previous one is collected
    assert fake.log[:4] == [("submit", 2), ("submit", 2), ("collect", 2), ("submit", 2)]
    submits = [k for k, (what, _) in enumerate(fake.log) if what == "submit"]
    collects = [k for k, (what, _) in enumerate(fake.log) if what == "collect"]
    assert len(submits) == len(collects) == 5
    assert all(s_next < c for s_next, c in zip(submits[1:], collects[:-1], strict=True))


def test_a_finished_submission_is_collected_before_the_next_is_taken() -> None:
    """A detector that has finished when submit returns (ONNX Runtime): no overlap, as before."""
    fake = AsyncFake(running=False)
    got = _run(fake, {"cam0": 7}, batch_size=2)
    _check_in_order(got["cam0"], 7)
    assert fake.log == [("submit", 2), ("collect", 2)] * 3 + [("submit", 1), ("collect", 1)]


def test_two_cameras_keep_each_ones_order() -> None:
    fake = AsyncFake(running=True)
    got = _run(fake, {"a": 11, "b": 6}, batch_size=3)
    _check_in_order(got["a"], 11)
    _check_in_order(got["b"], 6)


@pytest.mark.parametrize("busy_hold_s", [0.0, 5.0])
def test_a_gated_camera_plans_with_the_boxes_in_flight_unless_busy(busy_hold_s: float) -> None:
    """Outside a busy stretch a gated camera's next frame is planned with its previous frame's boxes: it waits
    for the batch in flight (submit and collect alternate). In a busy stretch its frames need no boxes and
    overlap."""
    fake = AsyncFake(running=True)
    gate = MotionGate(
        keyframe_s=100.0, full_frame_fraction=0.01, busy_after=1 if busy_hold_s else 0, busy_hold_s=busy_hold_s
    )  # any motion needs the whole frame: with busy_after, a busy stretch starts
    got = _run(fake, {"cam0": 12}, batch_size=4, gates={"cam0": gate})
    _check_in_order(got["cam0"], 12)
    pairs = list(zip(fake.log[::2], fake.log[1::2], strict=False))
    alternating = all(a[0] == "submit" and b[0] == "collect" for a, b in pairs)
    assert alternating == (busy_hold_s == 0.0), fake.log
