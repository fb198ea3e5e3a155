"""Segments: one run of a camera's analytics stage, as its track files hold it.

`segment_meta` is what the service writes at a segment's start; `load_segments` reads the track
files of a period back, one `Segment` per recording session, its hour files joined in order and
its frames cut to the period. A file camera read again supersedes its earlier reads of the same
file (the same frames, clock and event ids: the store upserted their incidents), so only the
newest read of each file is replayed, as the store holds one copy of its incidents.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from campusguard.app.config import CameraConfig, source_kind
from campusguard.app.tracks.files import SegmentMeta, TrackBlock, list_track_files, read_track_file
from campusguard.app.tracks.recorder import new_segment_id

__all__ = ["Segment", "load_segments", "segment_meta"]

log = logging.getLogger("campusguard.app.tracks")


def segment_meta(
    cam: CameraConfig, names: dict[int, str], resolution_wh: tuple[int, int], fps: float, stream_key: str = ""
) -> SegmentMeta:
    """The `SegmentMeta` of a camera's analytics stage starting now."""
    source = str(Path(str(cam.source)).resolve()) if source_kind(cam.source) == "path" else None
    return SegmentMeta(
        camera_id=cam.id,
        segment=new_segment_id(),
        resolution_wh=(int(resolution_wh[0]), int(resolution_wh[1])),
        fps=float(fps),
        names={int(k): str(v) for k, v in names.items()},
        stream_key=stream_key,
        source=source,
        started_at=time.time(),
    )


@dataclass
class Segment:
    """One recording session of a camera: its meta and its frames within the asked period.

    Attributes:
        files: the hour files it was read from.
        truncated: a file ended in a block cut short (a killed run): its frames up to there are here.
    """

    meta: SegmentMeta
    block: TrackBlock
    files: list[Path]
    truncated: bool = False

    @property
    def first_wall(self) -> float:
        return float(self.block.wall[0]) if self.block.frames else self.meta.started_at

    @property
    def last_wall(self) -> float:
        return float(self.block.wall[-1]) if self.block.frames else self.meta.started_at

    @property
    def stream_seconds(self) -> float:
        """Stream time the segment covers (last frame's time less the first's)."""
        return float(self.block.t[-1] - self.block.t[0]) if self.block.frames > 1 else 0.0


def _cut(block: TrackBlock, since_s: float | None, until_s: float | None) -> TrackBlock:
    """The frames of ``block`` with ``since_s <= wall < until_s`` (a contiguous run: wall time increases)."""
    lo = 0 if since_s is None else int(np.searchsorted(block.wall, since_s, side="left"))
    hi = block.frames if until_s is None else int(np.searchsorted(block.wall, until_s, side="left"))
    if lo == 0 and hi == block.frames:
        return block
    off = block.offsets()
    a, b = int(off[lo]), int(off[hi])
    return TrackBlock(
        index=block.index[lo:hi],
        t=block.t[lo:hi],
        wall=block.wall[lo:hi],
        n=block.n[lo:hi],
        flags=block.flags[lo:hi],
        tracker_id=block.tracker_id[a:b],
        class_id=block.class_id[a:b],
        fallen=block.fallen[a:b],
        xyxy=block.xyxy[a:b],
    )


def load_segments(
    folder: Path,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    cameras: set[str] | None = None,
) -> list[Segment]:
    """The segments with frames in ``[since, until)`` (wall clock), oldest first; ``cameras``: only these.

    A file that cannot be read is skipped with a warning; a file camera's earlier reads of the same
    file (same source and stream key) are left out for its newest.
    """
    since_s = None if since is None else since.timestamp()
    until_s = None if until is None else until.timestamp()
    by_segment: dict[str, list[tuple[datetime, Path]]] = {}
    for path, camera, hour, segment in list_track_files(folder):
        if cameras is not None and camera not in cameras:
            continue
        if since_s is not None and hour.timestamp() + 3600 <= since_s:
            continue
        if until_s is not None and hour.timestamp() >= until_s:
            continue
        by_segment.setdefault(segment, []).append((hour, path))
    segments: list[Segment] = []
    for _segment, files in by_segment.items():
        files.sort()
        blocks: list[TrackBlock] = []
        meta: SegmentMeta | None = None
        truncated = False
        for _, path in files:
            try:
                tf = read_track_file(path)
            except (OSError, ValueError) as exc:
                log.warning("tracks: %s skipped: %s", path, exc)
                continue
            meta = meta or tf.meta
            truncated = truncated or tf.truncated
            blocks.append(tf.block)
        if meta is None:
            continue
        block = _cut(TrackBlock.concat(blocks), since_s, until_s)
        if block.frames:
            segments.append(Segment(meta, block, [p for _, p in files], truncated))
    return _newest_reads(sorted(segments, key=lambda s: (s.first_wall, s.meta.camera_id)))


def _newest_reads(segments: list[Segment]) -> list[Segment]:
    """``segments`` less the file reads a later read of the same file by the same camera supersedes."""
    newest: dict[tuple[str, str, str], float] = {}
    for s in segments:
        if s.meta.source is not None:
            key = (s.meta.camera_id, s.meta.source, s.meta.stream_key)
            newest[key] = max(newest.get(key, s.meta.started_at), s.meta.started_at)
    return [
        s
        for s in segments
        if s.meta.source is None or newest[(s.meta.camera_id, s.meta.source, s.meta.stream_key)] == s.meta.started_at
    ]
