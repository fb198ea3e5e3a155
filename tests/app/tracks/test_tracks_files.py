"""The track file format: blocks round-trip (boxes to 1/128 px, never on a whole pixel), a block cut
short by a crash leaves the part before it readable, periods cut segments, a re-read file supersedes."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from campusguard.app.infra.diskspace import DiskHealth
from campusguard.app.tracks.files import BOX_STEPS, SegmentMeta, read_track_file
from campusguard.app.tracks.recorder import TrackWriter
from campusguard.app.tracks.segments import load_segments
from campusguard.detections import Detections

T0 = datetime(2026, 12, 7, 12, 59, 30, tzinfo=UTC).timestamp()


def _frames(n: int, seed: int = 0) -> list[tuple[int, float, datetime, Detections]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(0, 6))
        xy = rng.random((k, 2)) * 500
        xyxy = np.concatenate([xy, xy + 20 + rng.random((k, 2)) * 80], axis=1).astype(np.float32)
        det = Detections(xyxy, np.ones(k, np.float32), rng.integers(0, 3, k), np.arange(1, k + 1) + i // 7)
        if i % 3 == 0:
            det = det.with_data(fallen=rng.random(k) > 0.5)
        out.append((i, i / 10, datetime.fromtimestamp(T0 + i * 0.1, UTC), det))
    return out


def _record(folder: Path, frames, *, source: str | None = None, block_frames: int = 16) -> SegmentMeta:
    writer = TrackWriter(folder, disk=DiskHealth(reserve_bytes=0))
    meta = SegmentMeta(
        "cam1", f"s{time.monotonic_ns():x}", (640, 360), 10.0, {0: "person"}, source=source, started_at=time.time()
    )
    rec = writer.recorder(meta, block_frames=block_frames)
    for index, t, wall, det in frames:
        rec.record(index, t, wall, det)
    rec.close()
    writer.close()
    return meta


def test_a_segment_round_trips_across_an_hour_and_blocks(tmp_path: Path) -> None:
    frames = _frames(700)  # 70 s from 12:59:30: two hour files
    _record(tmp_path, frames)
    assert len(list(tmp_path.iterdir())) == 2
    (seg,) = load_segments(tmp_path)
    b = seg.block
    assert b.index.tolist() == list(range(700)) and np.allclose(b.t, [f[1] for f in frames])
    assert np.abs(b.wall - np.array([f[2].timestamp() for f in frames])).max() < 1e-6
    want = np.concatenate([f[3].xyxy for f in frames])
    assert np.abs(b.xyxy - want).max() <= 0.5 / BOX_STEPS + 1e-4
    assert not np.any(b.xyxy == np.round(b.xyxy))  # never exactly on a whole pixel (a zone edge)
    assert b.tracker_id.tolist() == np.concatenate([f[3].tracker_id for f in frames]).tolist()
    fallen = np.concatenate([f[3].data.get("fallen", np.zeros(len(f[3]), bool)) for f in frames])
    assert b.fallen.astype(bool).tolist() == fallen.tolist()
    assert b.flags.astype(bool).tolist() == ["fallen" in f[3].data for f in frames]


def test_a_block_cut_short_leaves_what_precedes_it(tmp_path: Path) -> None:
    _record(tmp_path, _frames(100)[:50], block_frames=10)
    (path,) = tmp_path.iterdir()
    whole = path.read_bytes()
    path.write_bytes(whole[:-7])
    tf = read_track_file(path)
    assert tf.truncated and tf.block.frames == 40
    path.write_bytes(b"not a track file")
    with pytest.raises(ValueError, match="not a CampusGuard track file"):
        read_track_file(path)


def test_a_period_cuts_frames_and_a_reread_file_supersedes(tmp_path: Path) -> None:
    frames = _frames(100)
    _record(tmp_path, frames, source="/videos/a.mp4")
    since = datetime.fromtimestamp(T0 + 2.0, UTC)
    until = datetime.fromtimestamp(T0 + 5.0, UTC)
    (seg,) = load_segments(tmp_path, since=since, until=until)
    assert seg.block.index.tolist() == list(range(20, 50))
    time.sleep(0.01)
    _record(tmp_path, frames[:30], source="/videos/a.mp4")  # the same file read again (a shorter run)
    (newest,) = load_segments(tmp_path)
    assert newest.block.frames == 30
    assert load_segments(tmp_path, cameras={"cam9"}) == []
