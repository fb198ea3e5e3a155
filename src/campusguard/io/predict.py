"""Predict to files: stream media through a `Detector` and write what ``campusguard predict`` writes.

Into the output folder go ``predictions.json`` (one record per frame), ``labels/<stem>.txt``
(YOLO txt, one file per image or video frame) and annotated media (``<stem>.jpg`` for images,
``<stem>.mp4`` for videos). Frames flow one batch at a time (`Detector.stream`), so memory
does not grow with the length of a video.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, TextIO

import cv2

from campusguard.adapters import to_records, to_yolo_txt
from campusguard.detections import Detections
from campusguard.io.draw import draw_detections
from campusguard.io.sources import MediaItem, open_video_writer
from campusguard.io.video_writer import H264Writer

if TYPE_CHECKING:
    from campusguard.detector import Detector, StageTimings

__all__ = ["PredictSummary", "PredictionWriter", "predict_to_files"]


@dataclass(frozen=True)
class PredictSummary:
    """What a `predict_to_files` run did.

    Attributes:
        files: media files given.
        frames: frames (images and video frames) detected on.
        detections: detections over all frames.
        failed: files or frames that could not be read.
        pre_ms, infer_ms, post_ms: mean milliseconds per frame in each stage.
    """

    files: int
    frames: int
    detections: int
    failed: int
    pre_ms: float
    infer_ms: float
    post_ms: float


class PredictionWriter:
    """Writes detections of media frames into ``out``; use as a context manager (closing ends the JSON
    list and releases the video writers).

    Args:
        out: output folder (created).
        names: class id to name, for the JSON records and the drawn labels.
        save_media: write annotated images and videos.
        save_txt: write YOLO txt labels under ``out/labels``.
    """

    def __init__(self, out: Path, names: dict[int, str], *, save_media: bool = True, save_txt: bool = True) -> None:
        self.out = Path(out)
        self.names = names
        self.save_media = save_media
        self.save_txt = save_txt
        self.out.mkdir(parents=True, exist_ok=True)
        if save_txt:
            (self.out / "labels").mkdir(exist_ok=True)
        self._videos: dict[Path, H264Writer] = {}
        self._json: TextIO = open(self.out / "predictions.json", "w")  # noqa: SIM115 - closed by close()
        self._json.write("[\n")
        self._first = True

    def write(self, item: MediaItem, detections: Detections) -> None:
        """Record one readable frame: its JSON record, YOLO labels and annotated image or video frame."""
        assert item.frame is not None, "unreadable items have no frame to write"
        h, w = item.frame.shape[:2]
        record = {
            "file": str(item.path),
            "frame": item.frame_index,
            "width": w,
            "height": h,
            "detections": to_records(detections, self.names),
        }
        self._json.write(("" if self._first else ",\n") + json.dumps(record))
        self._first = False
        stem = item.path.stem if not item.is_video else f"{item.path.stem}_{item.frame_index:06d}"
        if self.save_txt:
            (self.out / "labels" / f"{stem}.txt").write_text(to_yolo_txt(detections, (w, h)))
        if self.save_media:
            drawn = draw_detections(item.frame, detections, self.names, copy=False)
            if item.is_video:
                if item.path not in self._videos:
                    self._videos[item.path] = open_video_writer(
                        self.out / f"{item.path.stem}.mp4", item.fps or 30.0, (w, h)
                    )
                self._videos[item.path].write(drawn)
            else:
                cv2.imwrite(str(self.out / f"{item.path.stem}.jpg"), drawn)

    def end_file(self, path: Path) -> None:
        """Finish the annotated video of ``path``, if one is open."""
        if path in self._videos:
            self._videos.pop(path).close()

    def close(self) -> None:
        if self._json.closed:
            return
        self._json.write("\n]\n")
        self._json.close()
        for writer in self._videos.values():
            writer.close()
        self._videos.clear()

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def predict_to_files(
    detector: Detector,
    files: Sequence[Path],
    out: Path,
    *,
    batch: int = 1,
    save_media: bool = True,
    save_txt: bool = True,
    on_item: Callable[[MediaItem], None] | None = None,
) -> PredictSummary:
    """Detect on every frame of ``files`` (images and videos, e.g. from `list_media`) and write the results into ``out``.

    Args:
        detector: the `Detector` to run.
        files: media files, in order; batches never span two files.
        out: output folder (see `PredictionWriter`).
        batch: frames per inference call.
        save_media, save_txt: what to write besides ``predictions.json``.
        on_item: called with every item after it is handled, unreadable ones (``error`` set)
            included: progress and messages are the caller's.
    """
    totals = {"pre": 0.0, "infer": 0.0, "post": 0.0}

    def add(t: StageTimings) -> None:
        totals["pre"] += t.preprocess_ms
        totals["infer"] += t.inference_ms
        totals["post"] += t.postprocess_ms

    frames = detections = failed = 0
    with PredictionWriter(out, detector.names, save_media=save_media, save_txt=save_txt) as writer:
        for path in files:
            for item, dets in detector.stream(path, batch=batch, on_batch=add):
                assert isinstance(item, MediaItem)
                if item.error:
                    failed += 1
                else:
                    writer.write(item, dets)
                    frames += 1
                    detections += len(dets)
                if on_item is not None:
                    on_item(item)
            writer.end_file(path)
    n = max(frames, 1)
    return PredictSummary(
        files=len(files),
        frames=frames,
        detections=detections,
        failed=failed,
        pre_ms=totals["pre"] / n,
        infer_ms=totals["infer"] / n,
        post_ms=totals["post"] / n,
    )
