"""Camera readers: one thread per camera, feeding a bounded per-camera frame queue.

A reader opens its source (video file, image folder, webcam index, or rtsp/http URL through
OpenCV's FFMPEG backend), reads frames, stamps them and puts them on a `FrameQueue`:

- live sources (and files with ``realtime: true``) drop the oldest queued frame when the
  detector falls behind, so the backlog never grows; drops are counted;
- file sources by default block instead, so every frame is processed in order and results
  are reproducible (timestamps come from the frame index and the file's frame rate);
- a live source that cannot be opened (at start too: the camera is ``offline``), fails or
  stalls is reopened with exponential back-off (0.5 s doubling to 10 s by default, back to
  0.5 s only after a minute of frames), and may come back at another resolution (every frame
  carries its own size); the outage is logged once when it starts and once when it ends
  (`campusguard.app.infra.throttle.OutageLog`), not on every attempt;
- a camera's privacy masks are filled on each frame here, as it is read: this is the one place
  frames enter the pipeline, so detection, the motion gate, live view, snapshots, clips and
  recordings never see the masked pixels (`CameraReader.mask`, swapped live by a config edit).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

import cv2
import numpy as np

from campusguard.app.config.cameras import source_kind
from campusguard.app.infra.backoff import Backoff
from campusguard.app.infra.queues import BoundedQueue
from campusguard.app.infra.secrets import redact_url
from campusguard.app.infra.throttle import OutageLog
from campusguard.errors import CampusGuardError, SourceError
from campusguard.io.images import IMAGE_SUFFIXES
from campusguard.ops.preprocess import to_bgr_uint8 as _to_bgr
from campusguard.ops.privacy import FrameMask

__all__ = [
    "CameraReader",
    "CameraState",
    "CaptureSource",
    "EndOfStream",
    "FolderSource",
    "Frame",
    "PrependedSource",
    "FrameQueue",
    "FrameSource",
    "ReaderStats",
    "open_source",
]

log = logging.getLogger("campusguard.app.engine.sources")


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame from one camera.

    Attributes:
        camera_id: the camera's id from the config.
        index: frame number from this reader, counting from 0 across reconnects and loops.
        timestamp_s: seconds; file sources ``index / fps`` (reproducible), live sources ``time.monotonic()``.
        image: ``(H, W, 3) uint8`` BGR pixels.
        read_at: ``time.monotonic()`` when the frame was read, for latency metrics.
    """

    camera_id: str
    index: int
    timestamp_s: float
    image: np.ndarray
    read_at: float

    @property
    def resolution_wh(self) -> tuple[int, int]:
        """Frame size as (width, height) in pixels."""
        return int(self.image.shape[1]), int(self.image.shape[0])


@dataclass(frozen=True, slots=True)
class EndOfStream:
    """The last message of a camera: its reader has stopped (end of file, stop request, or fatal error)."""

    camera_id: str
    reason: str = "end of stream"


# queue -------------------------------------------------------------------------------------
class FrameQueue(BoundedQueue[Frame | EndOfStream]):
    """The bounded FIFO between one reader and detection (a `BoundedQueue`).

    With ``drop_oldest=True`` a put on a full queue discards the oldest frame (counted in
    ``dropped``); otherwise it waits for room (or for ``stop`` to be set). An optional
    ``doorbell`` event is set on every put so one consumer can wait on many queues.
    """

    def __init__(self, maxsize: int, drop_oldest: bool, doorbell: threading.Event | None = None) -> None:
        super().__init__(maxsize, drop_oldest, doorbell)

    def put(
        self, item: Frame | EndOfStream, stop: threading.Event | None = None, *, beyond_maxsize: bool = False
    ) -> bool:
        """Enqueue ``item``; return False if ``stop`` was set while waiting for room (item not queued).

        An `EndOfStream` is always queued (it may exceed ``maxsize`` by one) so consumers learn the end.
        """
        return super().put(item, stop, beyond_maxsize=beyond_maxsize or isinstance(item, EndOfStream))


# frame sources -----------------------------------------------------------------------------
class FrameSource(Protocol):
    """What a reader needs from a source: frames in order, and its nominal frame rate."""

    fps: float | None

    def read(self) -> np.ndarray | None:
        """Next ``(H, W, 3) uint8`` BGR frame, or None when none could be read."""

    def at_end(self) -> bool:
        """True when a failed read means the end of a file rather than a broken frame or stream."""

    def close(self) -> None: ...


class CaptureSource:
    """A video file, webcam or stream URL read through OpenCV (FFMPEG backend for files and URLs).

    Args:
        source: path, URL or webcam index.
        timeout_s: open and read time-outs for URLs, seconds (a stalled stream returns no frame).
        threads: FFmpeg's decoder threads for files and URLs; 0 lets FFmpeg choose (one per core).
            One thread costs the least CPU per frame read alone: FFmpeg's frame threads trade CPU time
            for latency (on a 2-core AMD EPYC, 640x360 H.264 read in a loop: 2.3 to 2.5 core-ms a frame
            with one thread, 2.7 to 3.1 with FFmpeg's choice), and a camera reader has a thread of its
            own, so several cameras decode side by side anyway. In the whole busy pipeline of
            `benchmarks/cost.py` the difference was within the noise (four interleaved runs each).
    """

    def __init__(self, source: int | str, timeout_s: float = 10.0, threads: int = 0) -> None:
        kind = source_kind(source)
        ms = int(timeout_s * 1000)
        params = [cv2.CAP_PROP_OPEN_TIMEOUT_MSEC, ms, cv2.CAP_PROP_READ_TIMEOUT_MSEC, ms]
        if threads > 0:
            params += [cv2.CAP_PROP_N_THREADS, threads]
        if kind == "webcam":
            self.cap = cv2.VideoCapture(int(source))
        else:
            self.cap = cv2.VideoCapture(str(source), cv2.CAP_FFMPEG, params)
        if not self.cap.isOpened():
            self.cap.release()
            raise SourceError(f"cannot open video source {redact_url(str(source))!r}")
        fps = float(self.cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self.fps = fps if 0 < fps < 1000 else None
        self.frame_count = int(self.cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) if kind == "path" else 0
        self.is_file = kind == "path"
        self._attempts = 0
        log.debug(
            "opened %s %r with OpenCV's %s backend: %dx%d, %s fps, %s frames",
            kind,
            redact_url(str(source)),
            self.cap.getBackendName(),
            int(self.cap.get(cv2.CAP_PROP_FRAME_WIDTH) or 0),
            int(self.cap.get(cv2.CAP_PROP_FRAME_HEIGHT) or 0),
            f"{self.fps:g}" if self.fps is not None else "unknown",
            self.frame_count or "unknown",
        )

    def read(self) -> np.ndarray | None:
        ok, image = self.cap.read()
        self._attempts += 1
        if not ok or image is None or image.size == 0:
            return None
        return _to_bgr(image)

    def at_end(self) -> bool:
        # files only: a failed read before the announced frame count is a broken frame (the decoder
        # goes on at the next key frame when read again), past it the end
        return not self.is_file or self.frame_count <= 0 or self._attempts >= self.frame_count

    def close(self) -> None:
        self.cap.release()


class FolderSource:
    """The images of a folder in name order, as frames; unreadable files are skipped with a log line."""

    def __init__(self, folder: str | Path, fps: float) -> None:
        self.paths = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        if not self.paths:
            raise SourceError(f"image folder {str(folder)!r} has no images ({', '.join(IMAGE_SUFFIXES)})")
        self.fps: float | None = fps
        self._i = 0
        log.debug("opened image folder %s: %d image(s) at %g fps", folder, len(self.paths), fps)

    def read(self) -> np.ndarray | None:
        while self._i < len(self.paths):
            path = self.paths[self._i]
            self._i += 1
            image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
            if image is not None and image.size:
                return _to_bgr(image)
            log.warning("skipping unreadable image %s", path)
        return None

    def at_end(self) -> bool:
        return self._i >= len(self.paths)

    def close(self) -> None:
        self._i = len(self.paths)


class PrependedSource:
    """A source already opened (at start-up) whose first frame was already read: yields that frame first.

    Lets the start-up probe hand its connection to the reader, so a camera is not connected
    twice and a file's first frame is not skipped.
    """

    def __init__(self, source: FrameSource, first: np.ndarray) -> None:
        self.source = source
        self.fps = source.fps
        self._first: np.ndarray | None = first

    def read(self) -> np.ndarray | None:
        if self._first is not None:
            image, self._first = self._first, None
            return image
        return self.source.read()

    def at_end(self) -> bool:
        return self._first is None and self.source.at_end()

    def close(self) -> None:
        self._first = None
        self.source.close()


def open_source(
    source: int | str, *, folder_fps: float = 10.0, timeout_s: float = 10.0, decode_threads: int = 0
) -> FrameSource:
    """Open a source (video file, image folder, webcam index or stream URL); `SourceError` naming it when it cannot be opened.

    Args:
        source: as `source_kind` classifies it.
        folder_fps: frame rate given to the images of a folder, frames per second.
        timeout_s: open and read time-outs of stream URLs, seconds.
        decode_threads: FFmpeg's decoder threads for video files and URLs (`CaptureSource`).
    """
    if source_kind(source) == "path":
        path = Path(str(source))
        if path.is_dir():
            return FolderSource(path, folder_fps)
        if not path.exists():
            raise SourceError(f"video file {str(path)!r} does not exist")
    return CaptureSource(source, timeout_s=timeout_s, threads=decode_threads)


# reader ------------------------------------------------------------------------------------
CameraState = Literal["starting", "live", "reconnecting", "offline", "stopped", "failed"]
"""What a camera is doing, as the console's camera wall and ``/api/v1/cameras`` show it:
``starting`` (no frame yet), ``live``, ``reconnecting`` (source lost or stalled, not tried
again yet), ``offline`` (a live source that could not be opened: at start, or on the attempts
after a loss; retried with back-off), ``stopped`` (stream ended or the pipeline stopped),
``failed`` (reader or pipeline error).
`CameraReader.state` works it out for a reader in this process; the cluster driver reports a
camera on a Ray actor with the state its group's reader gave."""


@dataclass
class ReaderStats:
    """Counters of one reader; written by the reader thread, read by metrics (plain ints and floats)."""

    frames_read: int = 0
    frames_skipped_fps_cap: int = 0
    broken_frames: int = 0
    reconnects: int = 0
    loops: int = 0
    last_frame_at: float = field(default_factory=time.monotonic)
    resolution_wh: tuple[int, int] | None = None
    connected: bool = False
    open_failures: int = 0  # failed attempts to open the source since it last opened


class CameraReader:
    """Reads one camera into its `FrameQueue` until the stream ends or ``stop`` is set; call `run()` in a thread.

    Args:
        camera_id: the camera's id, put on every frame.
        queue: where frames go.
        stop: shared stop event.
        open_source: opens the camera's source (again after a lost stream); `SourceError` when it cannot.
        live: the source is paced by the outside world (webcam, URL): a failed read means a lost
            stream (reconnect with back-off) and timestamps are `time.monotonic()`; else a file
            or folder read to its end, with timestamps ``index / fps``.
        realtime: drop frames when behind and pace a file at its frame rate; default ``live``.
        loop: a file starts again at its end.
        fps_cap: emit at most this many frames per second (others skipped), or None.
        fallback_fps: frame rate of a source that reports none (image folders), frames per second.
        stall_timeout_s: seconds without a frame before the watchdog asks for a reconnect.
        reconnect_initial_s: first delay before reopening a live source, seconds.
        reconnect_max_s: longest delay between reopen attempts, seconds.
        reconnect_factor: each failed attempt multiplies the delay by this.
        reconnect_reset_s: the delay goes back to ``reconnect_initial_s`` only after a connection
            gave frames for this many seconds (a source that opens and fails at once keeps
            backing off).
        max_broken_frames: consecutive failed reads of a file tolerated (the decoder resumes at the next key frame) before it is treated as ended.
        opened: a source already opened (by the start-up probe) to read first instead of opening one.
        on_first_frame: called (in the reader's thread) with the first frame this reader reads and
            the source's frame rate, before the frame is queued: a camera that was offline at
            start gets its zones and rules built for the real frame then. A `CampusGuardError`
            it raises ends the reader (``reader failed: ...``, one log line).
        mask: privacy masks filled on every frame before it is queued; the attribute ``mask`` may be
            replaced while the reader runs (a reference swap, taken at the next frame).
    """

    def __init__(
        self,
        camera_id: str,
        queue: FrameQueue,
        stop: threading.Event,
        *,
        open_source: Callable[[], FrameSource],
        live: bool,
        realtime: bool | None = None,
        loop: bool = False,
        fps_cap: float | None = None,
        fallback_fps: float = 10.0,
        stall_timeout_s: float = 10.0,
        reconnect_initial_s: float = 0.5,
        reconnect_max_s: float = 30.0,
        reconnect_factor: float = 2.0,
        reconnect_reset_s: float = 60.0,
        max_broken_frames: int = 300,
        opened: FrameSource | None = None,
        mask: FrameMask | None = None,
        on_first_frame: Callable[[np.ndarray, float | None], None] | None = None,
    ) -> None:
        self.camera_id = camera_id
        self.mask = mask
        self.queue = queue
        self.stop = stop
        self.open_source = open_source
        self.live = live
        self.realtime = live if realtime is None else realtime
        self.loop = loop
        self.fps_cap = fps_cap
        self.fallback_fps = fallback_fps
        self.stall_timeout_s = stall_timeout_s
        self.max_broken_frames = max_broken_frames
        self._opened = opened
        self.stats = ReaderStats()
        self._reconnect_requested = threading.Event()
        self._backoff = Backoff(reconnect_initial_s, reconnect_max_s, reconnect_factor)
        self._delays = self._backoff.delays()
        self.reconnect_reset_s = reconnect_reset_s
        self.on_first_frame = on_first_frame
        self.outage = OutageLog(log, f"camera {camera_id}")
        self._lost_reason = "stream lost"
        self._wait_first = False
        self._index = 0
        self._last_emitted_ts: float | None = None
        self.ended_reason: str | None = None  # set when `run` has returned (why the stream ended)

    def request_reconnect(self, reason: str = "reconnect requested") -> None:
        """Ask the reader to drop and reopen its source (used by the watchdog); ``reason`` is logged."""
        self._lost_reason = reason
        self._reconnect_requested.set()

    def note_offline(self, reason: str) -> None:
        """The source could not be opened before the reader started (the start-up probe): the camera
        is ``offline`` from the start (logged once), and the first attempt waits the first delay."""
        self.stats.open_failures += 1
        self.outage.down(f"offline at start: {reason}; retrying with back-off up to {self._backoff.max_s:g} s")
        self._wait_first = True

    def stalled(self, now: float | None = None) -> bool:
        """Connected, but no frame for more than ``stall_timeout_s`` seconds (``now``: `time.monotonic`)."""
        now = time.monotonic() if now is None else now
        return self.stats.connected and now - self.stats.last_frame_at > self.stall_timeout_s

    def state(self, pipeline_failed: bool = False, now: float | None = None) -> CameraState:
        """The camera's `CameraState`; ``pipeline_failed``: the pipeline it feeds has failed."""
        if self.ended_reason is not None:
            return "failed" if self.ended_reason.startswith("reader failed") or pipeline_failed else "stopped"
        if pipeline_failed:
            return "failed"
        if self.live and not self.stats.connected and self.stats.open_failures > 0:
            return "offline"
        if self.stats.frames_read == 0:
            return "starting"
        if not self.stats.connected or self.stalled(now):
            return "reconnecting"
        return "live"

    def run(self) -> None:
        """Read until the end of a file, or until stopped; always finish with `EndOfStream`."""
        reason = "stopped"
        try:
            reason = self._run()
        except CampusGuardError as exc:  # the first frame's checks (`on_first_frame`): one line
            log.error("camera %s: %s; the camera is not watched", self.camera_id, exc)
            reason = f"reader failed: {exc}"
        except Exception as exc:  # a reader must never die silently: end the stream with the reason
            log.exception("camera %s: reader failed", self.camera_id)
            reason = f"reader failed: {exc.__class__.__name__}: {exc}"
        finally:
            if self._opened is not None:  # stopped before the handed-over source was used
                self._opened.close()
                self._opened = None
            self.stats.connected = False
            self.ended_reason = reason
            self.queue.put(EndOfStream(self.camera_id, reason))

    def _run(self) -> str:
        if self._wait_first:
            self.stop.wait(next(self._delays))
        while not self.stop.is_set():
            try:
                source, self._opened = (self._opened, None) if self._opened is not None else (self.open_source(), None)
            except SourceError as exc:
                if not self.live:
                    return str(exc)
                self.stats.open_failures += 1
                delay = next(self._delays)
                if not self.outage.down(f"offline: {exc}; retrying with back-off up to {self._backoff.max_s:g} s"):
                    log.debug("camera %s: %s; retrying in %.1f s", self.camera_id, exc, delay)
                self.stop.wait(delay)
                continue
            self.stats.connected = True
            self.stats.open_failures = 0
            frames_before, opened_at = self.stats.frames_read, time.monotonic()
            try:
                finished = self._read_all(source)
            finally:
                source.close()
                self.stats.connected = False
            if self.stats.frames_read > frames_before and time.monotonic() - opened_at >= self.reconnect_reset_s:
                self._delays = self._backoff.delays()  # a connection that gave frames long enough resets the back-off
            if finished:
                if not self.loop:
                    return "end of stream"
                self.stats.loops += 1
                continue  # a looping file starts again at once
            if self.stop.is_set():
                break
            self.stats.reconnects += 1
            delay = next(self._delays)
            reason, self._lost_reason = self._lost_reason, "stream lost"
            if not self.outage.down(f"{reason}; reconnecting with back-off up to {self._backoff.max_s:g} s"):
                log.debug("camera %s: stream lost again; reconnecting in %.1f s", self.camera_id, delay)
            self.stop.wait(delay)
        return "stopped"

    def _read_all(self, source: FrameSource) -> bool:
        """Read frames until the source fails; True at the end of a file, False when the stream was lost or stopped."""
        fps = source.fps or self.fallback_fps
        started = time.monotonic()
        first_index = self._index
        broken = 0
        while not self.stop.is_set():
            if self._reconnect_requested.is_set():
                self._reconnect_requested.clear()
                return False
            image = source.read()
            if image is None:
                if self.live:
                    return False
                if not source.at_end() and broken < self.max_broken_frames:
                    broken += 1
                    self.stats.broken_frames += 1
                    self._index += 1  # keep timestamps aligned with the file's frame numbers
                    continue
                return True
            if broken:
                log.warning(
                    "camera %s: %d undecodable frame(s) skipped before frame %d", self.camera_id, broken, self._index
                )
            broken = 0
            now = time.monotonic()
            index = self._index
            if self.outage.is_down:
                self.outage.up(f"back, {image.shape[1]}x{image.shape[0]}")
            if self.on_first_frame is not None:  # once, before this camera's first frame is queued
                hook, self.on_first_frame = self.on_first_frame, None
                hook(image, source.fps)
            if index == first_index:
                log.debug(
                    "camera %s: first frame of this connection: %dx%d, frame %d, %g fps%s",
                    self.camera_id,
                    image.shape[1],
                    image.shape[0],
                    index,
                    fps,
                    "" if source.fps else " (the source gives none: the configured fallback)",
                )
            self._index += 1
            timestamp = now if self.live else index / fps
            if self.realtime and not self.live:  # pace a file like a camera
                due = started + (index - first_index) / fps
                if due > now:
                    self.stop.wait(due - now)
            self.stats.frames_read += 1
            self.stats.last_frame_at = now
            wh = (int(image.shape[1]), int(image.shape[0]))
            if self.stats.resolution_wh is not None and wh != self.stats.resolution_wh:
                log.warning("camera %s: resolution changed from %s to %s", self.camera_id, self.stats.resolution_wh, wh)
            self.stats.resolution_wh = wh
            if (
                self.fps_cap is not None
                and self._last_emitted_ts is not None
                and timestamp - self._last_emitted_ts < 1.0 / self.fps_cap - 1e-6
            ):
                self.stats.frames_skipped_fps_cap += 1
                continue
            self._last_emitted_ts = timestamp
            mask = self.mask
            if mask is not None:
                image = mask.apply(image)
            if not self.queue.put(Frame(self.camera_id, index, timestamp, image, now), self.stop):
                return False
        return False
