"""Predict to files: the records, labels and media `campusguard predict` writes, through `Detector.stream`."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.detector import Detector
from campusguard.io.predict import PredictionWriter, predict_to_files
from campusguard.io.sources import MediaItem, iter_media, list_media
from factories import build_tiny_detector_onnx

BOXES = [[32, 32, 20, 20, 0.9, 0.0], [16, 40, 10, 12, 0.0, 0.8]]  # cx, cy, w, h (input pixels), class scores


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> Detector:
    path = build_tiny_detector_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx", boxes=BOXES)
    return Detector(path, device="cpu")


@pytest.fixture
def media(tmp_path: Path) -> Path:
    folder = tmp_path / "media"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name, hw in (("a.png", (64, 64)), ("b.jpg", (48, 96))):
        cv2.imwrite(str(folder / name), rng.integers(0, 255, (*hw, 3), dtype=np.uint8))
    (folder / "c_broken.png").write_text("not an image")
    writer = cv2.VideoWriter(str(folder / "d.mp4"), cv2.VideoWriter.fourcc(*"mp4v"), 10, (96, 64))
    for _ in range(3):
        writer.write(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    writer.release()
    return folder


def test_predict_to_files_writes_every_readable_frame(detector: Detector, media: Path, tmp_path: Path) -> None:
    seen: list[MediaItem] = []
    out = tmp_path / "out"
    summary = predict_to_files(detector, list_media(media), out, batch=2, on_item=seen.append)

    assert (summary.files, summary.frames, summary.failed) == (4, 5, 1)
    assert [(i.path.name, i.frame_index, i.error is not None) for i in seen] == [
        ("a.png", 0, False),
        ("b.jpg", 0, False),
        ("c_broken.png", 0, True),
        ("d.mp4", 0, False),
        ("d.mp4", 1, False),
        ("d.mp4", 2, False),
    ]
    records = json.loads((out / "predictions.json").read_text())
    assert [(Path(r["file"]).name, r["frame"]) for r in records] == [
        (i.path.name, i.frame_index) for i in seen if i.error is None
    ]
    expected = [detector(item.frame) for item in iter_media(media) if item.frame is not None]
    assert [len(r["detections"]) for r in records] == [len(d) for d in expected]
    assert summary.detections == sum(len(d) for d in expected) > 0
    for record, dets in zip(records, expected, strict=True):
        np.testing.assert_allclose([d["xyxy"] for d in record["detections"]], dets.xyxy, atol=1e-3)
    assert sorted(p.name for p in (out / "labels").iterdir()) == [
        "a.txt",
        "b.txt",
        "d_000000.txt",
        "d_000001.txt",
        "d_000002.txt",
    ]
    assert len((out / "labels" / "a.txt").read_text().splitlines()) == len(expected[0])
    assert (out / "a.jpg").is_file() and (out / "b.jpg").is_file()
    cap = cv2.VideoCapture(str(out / "d.mp4"))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    cap.release()
    assert summary.pre_ms > 0 and summary.infer_ms > 0


def test_predict_to_files_writes_only_json_when_asked(detector: Detector, media: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    predict_to_files(detector, list_media(media), out, save_media=False, save_txt=False)
    assert sorted(p.name for p in out.iterdir()) == ["predictions.json"]
    assert len(json.loads((out / "predictions.json").read_text())) == 5


def test_writer_closes_an_empty_json_list(tmp_path: Path) -> None:
    with PredictionWriter(tmp_path / "out", {0: "a"}) as writer:
        pass
    writer.close()  # closing twice is harmless
    assert json.loads((tmp_path / "out" / "predictions.json").read_text()) == []
