"""`Detector.stream`: frame by frame or in batches, unreadable files kept in order with no detections."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.detector import Detector, StageTimings
from campusguard.errors import InvalidInputError
from campusguard.io.sources import MediaItem
from factories import build_tiny_detector_onnx


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> Detector:
    return Detector(build_tiny_detector_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx"), device="cpu")


def frames(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.integers(0, 255, (64, 64 + 32 * (i % 2), 3), dtype=np.uint8) for i in range(n)]


@pytest.mark.parametrize(("batch", "calls"), [(1, 5), (2, 3), (8, 1)])
def test_stream_batches_give_the_single_frame_results(detector: Detector, batch: int, calls: int) -> None:
    timings: list[StageTimings] = []
    got = list(detector.stream(frames(5), batch=batch, on_batch=timings.append))
    assert [i for i, _ in got] == [0, 1, 2, 3, 4]
    for (_, dets), frame in zip(got, frames(5), strict=True):
        np.testing.assert_allclose(dets.xyxy, detector(frame).xyxy, atol=1e-4)
    assert len(timings) == calls and sum(t.images for t in timings) == 5


def test_stream_of_a_folder_keeps_unreadable_files(detector: Detector, tmp_path: Path) -> None:
    cv2.imwrite(str(tmp_path / "a.png"), frames(1)[0])
    (tmp_path / "b.png").write_text("not an image")
    cv2.imwrite(str(tmp_path / "c.png"), frames(1)[0])
    got = list(detector.stream(tmp_path, batch=2))
    items = [item for item, _ in got]
    assert all(isinstance(i, MediaItem) for i in items)
    assert [(i.path.name, i.error is None) for i in items] == [("a.png", True), ("b.png", False), ("c.png", True)]
    assert len(got[1][1]) == 0 and len(got[0][1]) == len(got[2][1]) > 0


def test_stream_rejects_a_bad_batch(detector: Detector) -> None:
    with pytest.raises(InvalidInputError, match="batch=0"):
        next(detector.stream(frames(1), batch=0))
