"""Recording the tracks the rules consume, off the analytics stage's path.

`TrackRecorder.record` (one per camera, called by `AnalyticsWorker` right after its rules ran on
a frame) only appends the frame's arrays to a list; every ``block_frames`` frames, or when the
UTC hour changes, the list goes to the service's one `TrackWriter` thread without waiting (a full
queue drops the block and counts it: the analytics stage never blocks on the disk). The writer
concatenates, compresses (`campusguard.app.tracks.files.encode_block`) and appends each block to
its camera-hour file. Tracks never ask for room (they are not evidence): a block that does not
fit above the media reserve is dropped and counted (`DiskHealth.skip`); retention's passes keep
them within `retention.tracks`, `max_media` and the free-space floor.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

import numpy as np

from campusguard.app.infra.diskspace import DiskHealth, disk_health, is_disk_full
from campusguard.app.infra.throttle import LogThrottle
from campusguard.app.tracks.files import (
    FLAG_FALLEN,
    SegmentMeta,
    TrackBlock,
    encode_block,
    file_name,
    hour_of,
    write_header,
)
from campusguard.detections import Detections

__all__ = ["TrackRecorder", "TrackWriter", "TrackWriterStats", "new_segment_id"]

log = logging.getLogger("campusguard.app.tracks")

_FALLEN = "fallen"  # `campusguard.app.rules.fall.FALLEN_KEY` (the app's rules are not imported here)


def new_segment_id() -> str:
    """A segment id unique on this machine: the start time in milliseconds and the process, base 36."""
    return np.base_repr(int(time.time() * 1000), 36).lower() + np.base_repr(os.getpid() % 1296, 36).lower().zfill(2)


@dataclass
class TrackWriterStats:
    """What the writer did since start (the console's metrics and the docs' measurements)."""

    blocks: int = 0
    frames: int = 0
    detections: int = 0
    bytes: int = 0
    dropped_blocks: int = 0
    failed_blocks: int = 0


@dataclass
class _Pending:
    meta: SegmentMeta
    hour: str
    index: list[int] = field(default_factory=list)
    t: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)
    n: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)
    tracker_id: list[np.ndarray] = field(default_factory=list)
    class_id: list[np.ndarray] = field(default_factory=list)
    fallen: list[np.ndarray] = field(default_factory=list)
    xyxy: list[np.ndarray] = field(default_factory=list)

    def block(self) -> TrackBlock:
        def cat(parts: list[np.ndarray], dtype: str, shape: tuple[int, ...] = ()) -> np.ndarray:
            return np.concatenate(parts).astype(dtype) if parts else np.zeros((0, *shape), dtype)

        return TrackBlock(
            index=np.asarray(self.index, np.int64),
            t=np.asarray(self.t, np.float64),
            wall=np.asarray(self.wall, np.float64),
            n=np.asarray(self.n, np.uint16),
            flags=np.asarray(self.flags, np.uint8),
            tracker_id=cat(self.tracker_id, "int32"),
            class_id=cat(self.class_id, "int16"),
            fallen=cat(self.fallen, "uint8"),
            xyxy=cat(self.xyxy, "float32", (4,)).reshape(-1, 4),
        )


_CLOSE = object()


class TrackWriter:
    """The thread that appends the cameras' track blocks to their files.

    Args:
        folder: where the track files go (created if missing).
        disk: where full volumes are reported and room is asked for (default: the process's).
        max_pending: blocks waiting at most; beyond, new blocks are dropped (and counted).
        level: zlib level of the blocks.
    """

    def __init__(
        self, folder: Path, *, disk: DiskHealth | None = None, max_pending: int = 256, level: int = 6
    ) -> None:
        self.folder = Path(folder)
        self.disk = disk or disk_health()
        self.level = level
        self.stats = TrackWriterStats()
        self._queue: queue.Queue = queue.Queue(maxsize=max_pending)
        self._files: dict[str, tuple[str, IO[bytes], Path]] = {}  # segment -> (hour, file, path)
        self._warn = LogThrottle(log, 60.0)
        self._thread = threading.Thread(target=self._run, name="tracks", daemon=True)
        self._closed = False
        self._thread.start()

    def recorder(self, meta: SegmentMeta, *, block_frames: int = 300) -> TrackRecorder:
        """A camera's recorder for one segment (one run of its analytics stage)."""
        return TrackRecorder(self, meta, block_frames=block_frames)

    def submit(self, pending: _Pending | tuple[str, str]) -> bool:
        """Queue a block (or a segment's end) without waiting; False when the queue is full (dropped)."""
        try:
            self._queue.put_nowait(pending)
            return True
        except queue.Full:
            self.stats.dropped_blocks += 1
            self._warn.log(logging.WARNING, "full", "tracks: the writer is behind; a block of tracks was dropped")
            return False

    def close(self, timeout_s: float = 10.0) -> None:
        """Write what is queued, close the files and end the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_CLOSE)
        self._thread.join(timeout_s)

    # the thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                break
            try:
                if isinstance(item, tuple):
                    self._end_segment(item[1])
                else:
                    self._write(item)
            except Exception:  # a bug here must not take the pipeline down: tracks are not evidence
                log.exception("tracks: writing a block failed")
                self.stats.failed_blocks += 1
        for segment in list(self._files):
            self._end_segment(segment)

    def _end_segment(self, segment: str) -> None:
        entry = self._files.pop(segment, None)
        if entry is not None:
            try:
                entry[1].close()
            except OSError as exc:
                self.disk.failed("tracks", entry[2], exc)

    def _write(self, pending: _Pending) -> None:
        block = pending.block()
        if block.frames == 0:
            return
        data = encode_block(block, self.level)
        meta = pending.meta
        entry = self._files.get(meta.segment)
        if entry is not None and entry[0] != pending.hour:
            self._end_segment(meta.segment)
            entry = None
        path = self.folder / file_name(meta.camera_id, pending.hour, meta.segment)
        header = b"" if entry is not None else write_header(meta)
        need = len(data) + len(header)
        if not self.disk.has_room(self.folder, need):  # tracks never take room from evidence: retention frees it
            self.stats.dropped_blocks += 1
            self.disk.skip("tracks", path, need)
            return
        try:
            if entry is None:
                self.folder.mkdir(parents=True, exist_ok=True)
                fh = open(path, "ab")  # noqa: SIM115 - kept open for the segment's hour
                if fh.tell() == 0:
                    fh.write(header)
                entry = (pending.hour, fh, path)
                self._files[meta.segment] = entry
            entry[1].write(data)
            entry[1].flush()
        except OSError as exc:
            self.stats.failed_blocks += 1
            self.disk.failed("tracks", path, exc)
            if not is_disk_full(exc):
                self._warn.log(logging.WARNING, "error", "tracks: cannot write %s: %s", path, exc)
            self._end_segment(meta.segment)
            return
        self.disk.ok(path)
        self.stats.blocks += 1
        self.stats.frames += block.frames
        self.stats.detections += block.detections
        self.stats.bytes += need


class TrackRecorder:
    """One camera's tracks for one segment: `record` each processed frame; `close` at its end.

    Used from the camera's analytics thread only; `record` appends and returns (microseconds).
    """

    def __init__(self, writer: TrackWriter, meta: SegmentMeta, *, block_frames: int = 300) -> None:
        self.writer = writer
        self.meta = meta
        self.block_frames = max(1, int(block_frames))
        self._pending: _Pending | None = None
        self._hour_span = (0.0, -1.0)  # [start, end) wall seconds of the pending block's hour
        self.closed = False

    def record(self, frame_index: int, timestamp_s: float, wall_time: datetime, tracked: Detections) -> None:
        """Keep one processed frame: its index, stream time, wall time and the tracked rows the rules got."""
        if self.closed:
            return
        wall_s = wall_time.timestamp()
        start, end = self._hour_span
        if not start <= wall_s < end:
            self.flush()
            hour_start = wall_s - (wall_s % 3600.0)
            self._hour_span = (hour_start, hour_start + 3600.0)
        pending = self._pending
        if pending is None:
            pending = self._pending = _Pending(self.meta, hour_of(wall_s))
        n = len(tracked)
        pending.index.append(int(frame_index))
        pending.t.append(float(timestamp_s))
        pending.wall.append(wall_s)
        pending.n.append(n)
        fallen = tracked.data.get(_FALLEN)
        pending.flags.append(FLAG_FALLEN if fallen is not None else 0)
        if n:
            tid = tracked.tracker_id if tracked.tracker_id is not None else np.full(n, -1, np.int64)
            pending.tracker_id.append(tid)
            pending.class_id.append(tracked.class_id)
            pending.xyxy.append(tracked.xyxy)
            pending.fallen.append(np.asarray(fallen, bool) if fallen is not None else np.zeros(n, bool))
        if len(pending.index) >= self.block_frames:
            self.flush()

    def flush(self) -> None:
        """Hand the frames kept so far to the writer (never waits)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending.index:
            self.writer.submit(pending)

    def close(self) -> None:
        """Flush and end the segment (its file is closed by the writer)."""
        if self.closed:
            return
        self.flush()
        self.closed = True
        self.writer.submit(("end", self.meta.segment))
