"""Media sources for batch prediction: an image, a folder, a glob or a video file.

Frames are yielded one at a time and never accumulated, so memory does not grow with the
length of a video. A bad image in a folder is yielded as an item with ``error`` set.
"""

from __future__ import annotations

import glob
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from campusguard.errors import CampusGuardError, InvalidInputError
from campusguard.io.images import IMAGE_SUFFIXES, VIDEO_SUFFIXES, read_image
from campusguard.io.video_writer import H264Writer

__all__ = ["MediaItem", "iter_media", "list_media", "is_video"]


@dataclass
class MediaItem:
    """One frame of a source: its file, frame index (0 for images), frame and error."""

    path: Path
    frame_index: int
    frame: np.ndarray | None
    error: str | None = None
    fps: float | None = None
    num_frames: int | None = None

    @property
    def is_video(self) -> bool:
        return self.fps is not None


def is_video(path: Path) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES


def list_media(source: str | Path) -> list[Path]:
    """Files named by ``source`` (file, folder or glob), sorted; raise if none."""
    text = str(source)
    p = Path(text)
    if any(ch in text for ch in "*?["):
        files = sorted(Path(f) for f in glob.glob(text, recursive=True) if Path(f).is_file())
    elif p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and (f.suffix.lower() in IMAGE_SUFFIXES or is_video(f)))
    elif p.exists():
        files = [p]
    else:
        raise InvalidInputError(f"{p}: no such file or folder")
    if not files:
        raise InvalidInputError(f"{source}: no images or videos found")
    return files


def _iter_video(path: Path) -> Iterator[MediaItem]:
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            yield MediaItem(path, 0, None, f"{path}: cannot open video")
            return
        fps = cap.get(cv2.CAP_PROP_FPS) or 0.0
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) or None
        i = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            yield MediaItem(path, i, frame, None, fps or 30.0, n)
            i += 1
        if i == 0:
            yield MediaItem(path, 0, None, f"{path}: video has no readable frames")
    finally:
        cap.release()


def iter_media(source: str | Path) -> Iterator[MediaItem]:
    """Yield frames of every image and video in ``source``; unreadable files as error items."""
    for path in list_media(source):
        if is_video(path):
            yield from _iter_video(path)
            continue
        try:
            yield MediaItem(path, 0, read_image(path))
        except CampusGuardError as exc:
            yield MediaItem(path, 0, None, str(exc))


def open_video_writer(path: Path, fps: float, size_wh: tuple[int, int]) -> H264Writer:
    """An H.264 MP4 writer (browsers play it); raise `SourceError` if it cannot be created."""
    return H264Writer(path, fps, size_wh)


__all__ += ["open_video_writer"]
