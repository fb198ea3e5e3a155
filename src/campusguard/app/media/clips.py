"""Incident clips: a bounded ring buffer of recent frames per camera, and MP4 clips cut from it.

The analytics threads hand every processed frame to `ClipRecorder.add`, which only puts a
reference on a small drop-oldest inbox (at most ``max_fps`` frames a second per camera: a
clip for review needs no more). The recorder's own thread draws the overlay, downscales to
``max_width`` and JPEG-encodes each frame into the camera's ring, which is bounded both in
seconds and in bytes, so memory stays flat whatever the stream's size.

When an incident starts, `ClipRecorder.request` asks for a clip from ``pre_s`` seconds
before its start to ``post_s`` after (stream time). The clip is complete when a frame past
its end has been seen, or when the camera has sent nothing for ``idle_flush_s`` seconds (a
file that ended), or at `close`; a writer thread then encodes it as H.264 (Main profile,
yuv420p, ``+faststart``) MP4, which browsers play, through PyAV's libx264 (OpenCV's wheels
cannot encode H.264). Presentation times come from the frames' timestamps, so a clip keeps
its real duration when frames were dropped.

A frame of a camera with blur on (`LiveFrame.blurred`) is buffered twice, sharp and redacted,
and its incidents get two clips: ``<event_id>.mp4`` and, for viewers,
``<event_id>.redacted.mp4`` (`campusguard.app.media.redact.redacted_path`), the redacted one
written first.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from campusguard.app.infra.diskspace import disk_health
from campusguard.app.infra.queues import DropOldestQueue
from campusguard.app.media.live import LiveFrame, encode_jpeg, render_live_frame
from campusguard.app.media.redact import redacted_path
from campusguard.errors import SourceError
from campusguard.io.video_writer import H264Writer

__all__ = ["ClipRecorder", "FrameRing", "write_mp4"]

log = logging.getLogger("campusguard.app.media.clips")


class FrameRing:
    """Recent ``(timestamp_s, jpeg)`` frames of one camera (each with its redacted JPEG or None),
    bounded by seconds and by bytes.

    Args:
        max_seconds: frames older than the newest minus this are dropped.
        max_bytes: total JPEG bytes kept at most (the oldest go first).
    """

    def __init__(self, max_seconds: float, max_bytes: int) -> None:
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._frames: deque[tuple[float, bytes, bytes | None]] = deque()

    def append(self, timestamp_s: float, jpeg: bytes, redacted: bytes | None = None) -> None:
        self._frames.append((timestamp_s, jpeg, redacted))
        self.nbytes += len(jpeg) + len(redacted or b"")
        while self._frames and (timestamp_s - self._frames[0][0] > self.max_seconds or self.nbytes > self.max_bytes):
            _, old, old_redacted = self._frames.popleft()
            self.nbytes -= len(old) + len(old_redacted or b"")

    def between(self, start_s: float, end_s: float) -> list[tuple[float, bytes]]:
        """Frames with ``start_s <= timestamp <= end_s``, oldest first."""
        return [(t, j) for t, j, _ in self.between_both(start_s, end_s)]

    def between_both(self, start_s: float, end_s: float) -> list[tuple[float, bytes, bytes | None]]:
        """`between` with each frame's redacted JPEG (None for a frame of a camera without blur)."""
        return [f for f in self._frames if start_s <= f[0] <= end_s]

    @property
    def newest_s(self) -> float | None:
        """Timestamp of the newest frame, or ``None`` when empty."""
        return self._frames[-1][0] if self._frames else None

    def __len__(self) -> int:
        return len(self._frames)


@dataclass
class _Job:
    camera: str
    event_id: str
    start_s: float
    end_s: float
    frames: list[tuple[float, bytes, bytes | None]] = field(default_factory=list)


def write_mp4(path: Path, frames: list[tuple[float, bytes]], *, crf: int = 26) -> int:
    """Encode ``(timestamp_s, jpeg)`` frames as an H.264 MP4 at ``path`` (atomically); returns frames written.

    The frame rate is the median rate of the timestamps; each frame's presentation time is
    its timestamp on that clock, so gaps stay gaps. Frames are resized to the first one's
    size, rounded down to even numbers (yuv420p needs them).
    """
    if not frames:
        raise ValueError("a clip needs at least one frame")
    stamps = np.asarray([t for t, _ in frames], np.float64)
    steps = np.diff(stamps)
    steps = steps[steps > 0]
    fps = float(np.clip(1.0 / np.median(steps), 1.0, 120.0)) if len(steps) else 10.0
    first = cv2.imdecode(np.frombuffer(frames[0][1], np.uint8), cv2.IMREAD_COLOR)
    if first is None:
        raise ValueError("the first frame of the clip is not a JPEG")
    tmp = path.with_name(f".{path.name}.part")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with H264Writer(tmp, fps, (first.shape[1], first.shape[0]), crf=crf) as writer:
            for t, jpeg in frames:
                image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
                if image is not None:
                    writer.write(image, t - float(stamps[0]))
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half clip taking room
        raise
    return writer.frames


class ClipRecorder:
    """Ring buffers of every camera and the clips cut from them (two threads of its own).

    Args:
        out_dir: where ``<event_id>.mp4`` clips go.
        pre_s: seconds before an incident's start in its clip.
        post_s: seconds after it.
        max_width: frames wider than this are downscaled before buffering.
        max_fps: frames per second buffered at most per camera (the others are skipped).
        jpeg_quality: JPEG quality of buffered frames.
        max_bytes_per_camera: memory bound of each camera's ring.
        inbox_size: frames waiting for the buffering thread at most (the oldest are dropped).
        idle_flush_s: a clip whose camera sent no frame for this long is written with what it has.
    """

    def __init__(
        self,
        out_dir: Path,
        *,
        pre_s: float = 3.0,
        post_s: float = 3.0,
        max_width: int = 640,
        max_fps: float = 10.0,
        jpeg_quality: int = 70,
        max_bytes_per_camera: int = 32 * 1024 * 1024,
        inbox_size: int = 64,
        idle_flush_s: float = 2.0,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.pre_s = pre_s
        self.post_s = post_s
        self.max_width = max_width
        self.max_fps = max_fps
        self.jpeg_quality = jpeg_quality
        self.max_bytes_per_camera = max_bytes_per_camera
        self.idle_flush_s = idle_flush_s
        self.rings: dict[str, FrameRing] = {}
        self.written: dict[str, int] = {}  # event id -> frames in its clip
        self.failed = 0
        self._inbox: DropOldestQueue[LiveFrame] = DropOldestQueue(inbox_size)
        self._requests: list[_Job] = []
        self._jobs: list[_Job] = []
        self._last_frame_at: dict[str, float] = {}
        self._next_due_s: dict[str, float] = {}  # per camera, written by its analytics thread only
        self._lock = threading.Lock()
        self._to_write: queue.Queue[_Job | None] = queue.Queue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def dropped(self) -> int:
        """Frames the buffering thread had no time for."""
        return self._inbox.dropped

    def path_for(self, event_id: str) -> Path:
        """Where the clip of an event is (or will be) written."""
        return self.out_dir / f"{event_id}.mp4"

    def start(self) -> None:
        """Start the buffering and writing threads."""
        if self._threads:
            return
        for name, target in (("clips-buffer", self._buffer_loop), ("clips-writer", self._write_loop)):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    # producer side (pipeline threads) -------------------------------------------------------
    def add(self, frame: LiveFrame) -> None:
        """Queue a processed frame for buffering (at most ``max_fps`` per camera); never waits."""
        period, t = 1.0 / self.max_fps, frame.timestamp_s
        due = self._next_due_s.get(frame.camera_id)
        if due is not None and due - 2 * period <= t < due - 1e-6:
            return
        # the next frame is due one period after this one was, so the average rate is max_fps
        self._next_due_s[frame.camera_id] = due + period if due is not None and t < due + period else t + period
        self._inbox.offer(frame)

    def request(self, camera: str, event_id: str, start_s: float) -> None:
        """Ask for the clip of an incident that started at stream time ``start_s``."""
        job = _Job(camera, event_id, start_s - self.pre_s, start_s + self.post_s)
        with self._lock:
            self._requests.append(job)

    # buffering thread -----------------------------------------------------------------------
    def _buffer_loop(self) -> None:
        while True:
            frame = self._inbox.get(timeout=0.2)
            if frame is not None:
                self._buffer(frame)
            self._take_requests()
            self._flush_idle(time.monotonic())
            if frame is None and self._stop.is_set() and not len(self._inbox):
                break
        self._take_requests()
        for job in self._jobs:
            self._to_write.put(job)
        self._jobs.clear()
        self._to_write.put(None)

    def _encode(self, frame: LiveFrame, redacted: bool) -> bytes:
        image = render_live_frame(frame, redacted)
        h, w = image.shape[:2]
        if w > self.max_width:
            image = cv2.resize(image, (self.max_width, round(h * self.max_width / w)), interpolation=cv2.INTER_AREA)
        return encode_jpeg(image, self.jpeg_quality)

    def _buffer(self, frame: LiveFrame) -> None:
        jpeg = self._encode(frame, False)
        redacted = self._encode(frame, True) if frame.blurred else None
        ring = self.rings.get(frame.camera_id)
        if ring is None:
            ring = self.rings[frame.camera_id] = FrameRing(self.pre_s + self.post_s + 10.0, self.max_bytes_per_camera)
        ring.append(frame.timestamp_s, jpeg, redacted)
        self._last_frame_at[frame.camera_id] = time.monotonic()
        for job in list(self._jobs):
            if job.camera != frame.camera_id:
                continue
            if frame.timestamp_s > job.end_s:
                self._done(job)
            elif frame.timestamp_s >= job.start_s and (not job.frames or frame.timestamp_s > job.frames[-1][0]):
                job.frames.append((frame.timestamp_s, jpeg, redacted))

    def _take_requests(self) -> None:
        with self._lock:
            new, self._requests = self._requests, []
        for job in new:
            ring = self.rings.get(job.camera)
            job.frames = ring.between_both(job.start_s, job.end_s) if ring is not None else []
            self._jobs.append(job)
            newest = None if ring is None else ring.newest_s
            if newest is not None and newest > job.end_s:
                self._done(job)

    def _flush_idle(self, now: float) -> None:
        for job in list(self._jobs):
            if now - self._last_frame_at.get(job.camera, now) > self.idle_flush_s:
                self._done(job)

    def _done(self, job: _Job) -> None:
        self._jobs.remove(job)
        self._to_write.put(job)

    # writing thread -------------------------------------------------------------------------
    def _write_loop(self) -> None:
        while True:
            job = self._to_write.get()
            if job is None:
                return
            if not job.frames:
                log.warning("clip of event %s: no buffered frames of camera %s", job.event_id, job.camera)
                continue
            path = self.path_for(job.event_id)
            disk = disk_health()
            need = sum(len(j) for _, j, _ in job.frames)  # its JPEGs: more than the H.264 clip takes
            if not (disk.has_room(self.out_dir, need) or disk.make_room(self.out_dir, need)):
                self.failed += 1
                disk.skip("clip", path, need)  # media yield to events: one rate-limited line
                continue
            try:
                redacted = [(t, r) for t, _, r in job.frames if r is not None]  # sharp frames never go in
                if redacted:  # blur on: the viewers' clip first
                    write_mp4(redacted_path(path), redacted)
                n = write_mp4(path, [(t, j) for t, j, _ in job.frames])
                self.written[job.event_id] = n
                log.info("clip of event %s: %d frames", job.event_id, n)
            except (OSError, SourceError) as exc:  # SourceError: the H.264 writer's file could not be written
                self.failed += 1
                redacted_path(path).unlink(missing_ok=True)  # never a viewers' clip without its sharp one
                disk.failed("clip", path, exc)  # a full disk: one rate-limited line, no traceback
            except Exception:  # a clip that cannot be written must not stop the console
                self.failed += 1
                log.exception("clip of event %s could not be written", job.event_id)

    def close(self, timeout_s: float = 30.0) -> None:
        """Buffer what is queued, write every pending clip with the frames it has, stop the threads."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads.clear()

    def stats(self) -> dict[str, Any]:
        """Buffer sizes and counters, for tests and diagnostics."""
        return {
            "frames": {c: len(r) for c, r in self.rings.items()},
            "bytes": {c: r.nbytes for c, r in self.rings.items()},
            "dropped": self.dropped,
            "written": len(self.written),
            "failed": self.failed,
        }
