"""H.264 MP4 files a browser plays: the one video writer of the kit and the app.

OpenCV's wheels write MPEG-4 Part 2 (``mp4v``), which Chromium and Safari refuse
(``DEMUXER_ERROR_NO_SUPPORTED_STREAMS``). `H264Writer` encodes through PyAV's libx264 instead:
H.264 Main profile, yuv420p, optionally with the index at the front (``faststart``) so a page
can start playing before the file has loaded. Frames are BGR ``(H, W, 3) uint8`` like OpenCV's;
odd sizes are rounded down to even numbers (yuv420p needs them) and other sizes resized to the
first frame's.

Errors on write or close (a full disk, a folder that went away) become `SourceError` with the
file's name, never a bare PyAV error.
"""

from __future__ import annotations

import contextlib
from fractions import Fraction
from pathlib import Path
from types import TracebackType
from typing import Any

import cv2
import numpy as np

from campusguard.errors import SourceError

__all__ = ["H264Writer", "even_size_wh"]


def even_size_wh(size_wh: tuple[int, int]) -> tuple[int, int]:
    """``(width, height)`` rounded down to even numbers, at least 2 each (yuv420p's need)."""
    w, h = size_wh
    return max(2, int(w) - int(w) % 2), max(2, int(h) - int(h) % 2)


class H264Writer:
    """Write BGR frames as an H.264 MP4 at ``path``.

    Args:
        path: the output file (its folder must exist).
        fps: frames per second (presentation times are frame counts on this clock unless
            `write` is given a timestamp).
        size_wh: the output size; rounded down to even numbers.
        crf: x264's constant rate factor (lower is better quality and larger files; 18 is
            visually lossless, 23 x264's default).
        faststart: put the MP4 index at the front when the file is closed (one extra pass over
            the file); for files served to browsers.
        preset: x264's speed preset.
    """

    def __init__(
        self,
        path: str | Path,
        fps: float,
        size_wh: tuple[int, int],
        *,
        crf: int = 20,
        faststart: bool = True,
        preset: str = "veryfast",
    ) -> None:
        import av  # PyAV: a core dependency (its wheels carry libx264)

        self.path = Path(path)
        self.size_wh = even_size_wh(size_wh)
        self.rate = Fraction(float(fps)).limit_denominator(1001) if fps > 0 else Fraction(10)
        self.frames = 0
        self._av = av
        self._last_pts = -1
        options = {"movflags": "+faststart"} if faststart else {}
        try:
            self._container: Any = av.open(str(self.path), "w", format="mp4", options=options)
            stream = self._container.add_stream("libx264", rate=self.rate)
            stream.width, stream.height = self.size_wh
            stream.pix_fmt = "yuv420p"
            stream.time_base = 1 / self.rate
            stream.options = {"preset": preset, "crf": str(int(crf)), "profile": "main"}
            stream.codec_context.thread_count = 1
        except (OSError, av.FFmpegError) as exc:
            raise SourceError(f"{self.path}: cannot create an H.264 video ({exc})") from exc
        self._stream: Any = stream
        self._closed = False

    def write(self, image: np.ndarray, timestamp_s: float | None = None) -> None:
        """Append one frame; ``timestamp_s`` (seconds from the first frame) keeps gaps as gaps."""
        if self._closed:
            raise SourceError(f"{self.path}: the video is already closed")
        if (image.shape[1], image.shape[0]) != self.size_wh:
            image = cv2.resize(image, self.size_wh, interpolation=cv2.INTER_AREA)
        frame = self._av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="bgr24")
        pts = self._last_pts + 1 if timestamp_s is None else round(timestamp_s * float(self.rate))
        frame.pts = self._last_pts = max(self._last_pts + 1, pts)
        try:
            self._container.mux(self._stream.encode(frame))
        except (OSError, self._av.FFmpegError) as exc:
            raise SourceError(f"{self.path}: cannot write a frame ({exc})") from exc
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder and write the index (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._container.mux(self._stream.encode(None))
        except (OSError, self._av.FFmpegError) as exc:
            self._close_quietly()
            raise SourceError(f"{self.path}: cannot finish the video ({exc})") from exc
        try:
            self._container.close()
        except (OSError, self._av.FFmpegError) as exc:
            raise SourceError(f"{self.path}: cannot finish the video ({exc})") from exc

    def _close_quietly(self) -> None:
        with contextlib.suppress(OSError, self._av.FFmpegError):
            self._container.close()

    def __enter__(self) -> H264Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._closed = True
            self._close_quietly()
