"""The track files: what the rules consumed on every processed frame, compact, per camera-hour.

One file per camera, recording session (*segment*: one run of a camera's analytics stage) and
UTC hour, in one folder (`StorageConfig.tracks_path`), named ``<camera>_<YYYYmmddTHH>Z_<segment>.cgtracks``
so retention finds each file's camera like a recording's (`campusguard.app.retention.policy.camera_of`).

Layout (little-endian):

- ``MAGIC`` (8 bytes), ``u32`` length, then the segment's `SegmentMeta` as JSON: camera, stream
  key (the event ids' ``stream_key``), the rules' frame size, the model's class names, the frame
  rate, the source file (file cameras: a re-read of the same file supersedes the older tracks);
- blocks, each ``<IIII``: payload bytes, frames, detections, CRC-32 of the payload; the payload is
  zlib of columns, each byte-shuffled (the bytes of each value position together, which compresses
  timestamps and boxes far better than row order):

  ========== ======== ==============================================================
  column     dtype    per
  ========== ======== ==============================================================
  index      int64    frame: the frame index, delta-coded (1s compress to nothing)
  t          float64  frame: the stream clock (``Frame.timestamp_s``), seconds
  wall       int64    frame: wall-clock POSIX microseconds (what time windows test), delta-coded
  n          uint16   frame: detections on the frame
  flags      uint8    frame: ``FLAG_FALLEN``: the detections carry ``data["fallen"]``
  tracker_id int32    detection
  class_id   int16    detection
  fallen     uint8    detection (0 where the frame has no fallen flag)
  xyxy       int32    detection, 4 columns: the box in 1/`BOX_STEPS` pixels of the rules' frame size,
                      each less its track's previous box in the block (a track moves little)
  ========== ======== ==============================================================

Boxes are kept to 1/64 px (`BOX_STEPS`), which halves the file against float32 (measured in
docs/replay.md). A block cut short by a crash (or a bad CRC) ends the file's readable part; what
precedes it is read.
"""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

__all__ = [
    "BOX_STEPS",
    "FLAG_FALLEN",
    "MAGIC",
    "SUFFIX",
    "SegmentMeta",
    "TrackBlock",
    "TrackFile",
    "decode_block",
    "encode_block",
    "file_name",
    "hour_of",
    "list_track_files",
    "read_track_file",
    "write_header",
]

MAGIC = b"CGTRK01\n"
BOX_STEPS = 64
"""Boxes are kept to 1/64 px (a detector's boxes are good to a pixel or so at best) and read back
as the middle of their 1/64 px cell: at most 1/128 px from what the rules saw, and never on a
whole, half or quarter pixel, so a zone edge drawn on such a value never catches a read-back
anchor that the live run saw just outside. A replay's zone tests and line sides agree with the
live run's but for an anchor within 1/128 px of an edge."""
SUFFIX = ".cgtracks"
FLAG_FALLEN = 1
_BLOCK = struct.Struct("<IIII")
_LEN = struct.Struct("<I")
_NAME = re.compile(r"^(?P<camera>.+)_(?P<hour>\d{8}T\d{2})Z_(?P<segment>[0-9a-z]+)" + re.escape(SUFFIX) + "$")
_MAX_META = 1 << 20


@dataclass(frozen=True)
class SegmentMeta:
    """What a replay needs to build a camera's rules as its analytics stage built them.

    Attributes:
        camera_id: the camera.
        segment: this recording session's id (unique: start time and process).
        stream_key: the event ids' ``stream_key`` (`campusguard.app.events.types.event_id_for`); empty for `watch`.
        resolution_wh: the frame size the rules were built for (boxes are in its pixels).
        fps: the source's frame rate.
        names: the model's class names, id to name.
        source: a file camera's resolved path (a later read of the same file supersedes these
            tracks), or None for a live camera.
        started_at: wall-clock POSIX seconds when the segment started.
    """

    camera_id: str
    segment: str
    resolution_wh: tuple[int, int]
    fps: float
    names: dict[int, str]
    stream_key: str = ""
    source: str | None = None
    started_at: float = 0.0

    def to_json(self) -> bytes:
        data = asdict(self)
        data["names"] = {str(k): v for k, v in self.names.items()}
        data["resolution_wh"] = list(self.resolution_wh)
        return json.dumps(data, sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes) -> SegmentMeta:
        data = json.loads(raw.decode("utf-8"))
        return cls(
            camera_id=str(data["camera_id"]),
            segment=str(data["segment"]),
            resolution_wh=(int(data["resolution_wh"][0]), int(data["resolution_wh"][1])),
            fps=float(data["fps"]),
            names={int(k): str(v) for k, v in data["names"].items()},
            stream_key=str(data.get("stream_key", "")),
            source=data.get("source"),
            started_at=float(data.get("started_at", 0.0)),
        )


@dataclass
class TrackBlock:
    """Consecutive frames of one camera as columns (see the module docstring).

    Attributes:
        index, t, wall, n, flags: ``(F,)`` per frame.
        tracker_id, class_id, fallen: ``(D,)`` per detection, frames' rows one after another.
        xyxy: ``(D, 4) float32``.
    """

    index: np.ndarray
    t: np.ndarray
    wall: np.ndarray
    n: np.ndarray
    flags: np.ndarray
    tracker_id: np.ndarray
    class_id: np.ndarray
    fallen: np.ndarray
    xyxy: np.ndarray

    @property
    def frames(self) -> int:
        return len(self.index)

    @property
    def detections(self) -> int:
        return len(self.tracker_id)

    @classmethod
    def concat(cls, blocks: Sequence[TrackBlock]) -> TrackBlock:
        """One block of ``blocks`` one after another (an empty one for none)."""
        if not blocks:
            return empty_block()
        if len(blocks) == 1:
            return blocks[0]
        return cls(
            **{
                name: np.concatenate([getattr(b, name) for b in blocks])
                for name in ("index", "t", "wall", "n", "flags", "tracker_id", "class_id", "fallen", "xyxy")
            }
        )

    def offsets(self) -> np.ndarray:
        """``(F + 1,) int64``: frame ``i``'s detections are rows ``offsets[i]:offsets[i + 1]``."""
        out = np.zeros(self.frames + 1, dtype=np.int64)
        np.cumsum(self.n, out=out[1:])
        return out


def empty_block() -> TrackBlock:
    return TrackBlock(
        index=np.zeros(0, np.int64),
        t=np.zeros(0, np.float64),
        wall=np.zeros(0, np.float64),
        n=np.zeros(0, np.uint16),
        flags=np.zeros(0, np.uint8),
        tracker_id=np.zeros(0, np.int32),
        class_id=np.zeros(0, np.int16),
        fallen=np.zeros(0, np.uint8),
        xyxy=np.zeros((0, 4), np.float32),
    )


def _shuffle(a: np.ndarray) -> bytes:
    """The bytes of ``a`` (1-D, contiguous) grouped by position within each value."""
    size = a.dtype.itemsize
    if size == 1 or len(a) == 0:
        return a.tobytes()
    return np.ascontiguousarray(a.view(np.uint8).reshape(-1, size).T).tobytes()


def _unshuffle(raw: memoryview, dtype: np.dtype, count: int) -> np.ndarray:
    size = dtype.itemsize
    flat = np.frombuffer(raw, dtype=np.uint8, count=count * size)
    if size == 1 or count == 0:
        return flat.view(dtype).copy()
    return np.ascontiguousarray(flat.reshape(size, count).T).view(dtype).reshape(count)


_FRAME_COLS: tuple[tuple[str, np.dtype], ...] = (
    ("index", np.dtype("<i8")),
    ("t", np.dtype("<f8")),
    ("wall", np.dtype("<i8")),
    ("n", np.dtype("<u2")),
    ("flags", np.dtype("u1")),
)
_DET_COLS: tuple[tuple[str, np.dtype], ...] = (
    ("tracker_id", np.dtype("<i4")),
    ("class_id", np.dtype("<i2")),
    ("fallen", np.dtype("u1")),
)
_BOX = np.dtype("<i4")
_LIMIT = float(2**31 - 1) / BOX_STEPS


def _delta(values: np.ndarray) -> np.ndarray:
    """Each value less the previous one (the first kept): ``(F,)`` int64."""
    out = np.empty_like(values)
    if len(values):
        out[0] = values[0]
        out[1:] = np.diff(values)
    return out


def _by_track(tracker_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, first)``: the rows sorted by track (stable: a track's rows in frame order) and
    whether each sorted row is its track's first in the block."""
    order = np.argsort(tracker_id, kind="stable")
    st = tracker_id[order]
    first = np.ones(len(st), dtype=bool)
    first[1:] = st[1:] != st[:-1]
    return order, first


def _encode_boxes(xyxy: np.ndarray, tracker_id: np.ndarray) -> np.ndarray:
    """``(D, 4) int32``: the 1/`BOX_STEPS` px cell of each coordinate, each row less its track's previous row."""
    q = np.floor(np.clip(xyxy.astype(np.float64), -_LIMIT, _LIMIT) * BOX_STEPS).astype(np.int64)
    order, first = _by_track(tracker_id)
    sq = q[order]
    d = sq.copy()
    d[1:] -= np.where(first[1:, None], 0, sq[:-1])
    out = np.empty_like(q)
    out[order] = d
    return out.astype(np.int32)


def _decode_boxes(coded: np.ndarray, tracker_id: np.ndarray) -> np.ndarray:
    """The inverse of `_encode_boxes`: ``(D, 4) float32`` pixels."""
    order, first = _by_track(tracker_id)
    cs = np.cumsum(coded[order].astype(np.int64), axis=0)
    starts = np.flatnonzero(first)
    base = np.zeros_like(cs)
    before = np.where(starts > 0, starts - 1, 0)
    group_base = np.where((starts > 0)[:, None], cs[before], 0)
    base = np.repeat(group_base, np.diff(np.append(starts, len(cs))), axis=0)
    q = np.empty_like(cs)
    q[order] = cs - base
    return ((q.astype(np.float64) + 0.5) / BOX_STEPS).astype(np.float32)  # the middle of the cell


def encode_block(block: TrackBlock, level: int = 6) -> bytes:
    """One block as written to a file: header and compressed payload."""
    cols = {
        "index": _delta(np.asarray(block.index, np.int64)),
        "wall": _delta(np.round(np.asarray(block.wall, np.float64) * 1e6).astype(np.int64)),
    }
    parts: list[bytes] = []
    for name, dtype in _FRAME_COLS:
        parts.append(_shuffle(np.ascontiguousarray(cols.get(name, getattr(block, name)), dtype=dtype)))
    for name, dtype in _DET_COLS:
        parts.append(_shuffle(np.ascontiguousarray(getattr(block, name), dtype=dtype)))
    boxes = _encode_boxes(np.asarray(block.xyxy, np.float32).reshape(-1, 4), np.asarray(block.tracker_id, np.int64))
    for k in range(4):
        parts.append(_shuffle(np.ascontiguousarray(boxes[:, k], dtype=_BOX)))
    payload = zlib.compress(b"".join(parts), level)
    return _BLOCK.pack(len(payload), block.frames, block.detections, zlib.crc32(payload)) + payload


def decode_block(payload: bytes, frames: int, detections: int) -> TrackBlock:
    """The `TrackBlock` of one block's payload (its header read already).

    Raises:
        ValueError: the payload does not hold that many frames and detections.
    """
    raw = memoryview(zlib.decompress(payload))
    pos = 0
    cols: dict[str, np.ndarray] = {}
    for name, dtype in _FRAME_COLS:
        cols[name] = _unshuffle(raw[pos:], dtype, frames)
        pos += dtype.itemsize * frames
    for name, dtype in _DET_COLS:
        cols[name] = _unshuffle(raw[pos:], dtype, detections)
        pos += dtype.itemsize * detections
    boxes = []
    for _ in range(4):
        boxes.append(_unshuffle(raw[pos:], _BOX, detections))
        pos += _BOX.itemsize * detections
    if pos != len(raw):
        raise ValueError(f"block of {len(raw)} bytes does not hold {frames} frames and {detections} detections")
    if int(cols["n"].astype(np.int64).sum()) != detections:
        raise ValueError("block's per-frame counts do not add up to its detections")
    cols["index"] = np.cumsum(cols["index"])
    cols["wall"] = np.cumsum(cols["wall"]).astype(np.float64) / 1e6
    coded = np.stack(boxes, axis=1) if detections else np.zeros((0, 4), np.int32)
    return TrackBlock(xyxy=_decode_boxes(coded, cols["tracker_id"].astype(np.int64)), **cols)


def write_header(meta: SegmentMeta) -> bytes:
    """The bytes a track file starts with."""
    raw = meta.to_json()
    return MAGIC + _LEN.pack(len(raw)) + raw


@dataclass
class TrackFile:
    """One track file read: its segment, its blocks (readable part) and whether it was cut short."""

    path: Path
    meta: SegmentMeta
    block: TrackBlock
    truncated: bool = False
    nbytes: int = 0
    problems: list[str] = field(default_factory=list)


def read_track_file(path: Path) -> TrackFile:
    """Read a track file; a block cut short or damaged ends the readable part (``truncated``).

    Raises:
        ValueError: not a track file (its magic or header is wrong).
    """
    data = Path(path).read_bytes()
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _LEN.size:
        raise ValueError(f"{path} is not a CampusGuard track file")
    (mlen,) = _LEN.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _LEN.size
    if mlen > _MAX_META or start + mlen > len(data):
        raise ValueError(f"{path}: damaged track file header")
    meta = SegmentMeta.from_json(data[start : start + mlen])
    pos = start + mlen
    blocks: list[TrackBlock] = []
    truncated = False
    while pos < len(data):
        if pos + _BLOCK.size > len(data):
            truncated = True
            break
        size, frames, dets, crc = _BLOCK.unpack_from(data, pos)
        body = data[pos + _BLOCK.size : pos + _BLOCK.size + size]
        if len(body) < size or zlib.crc32(body) != crc:
            truncated = True
            break
        try:
            blocks.append(decode_block(body, frames, dets))
        except (ValueError, zlib.error):
            truncated = True
            break
        pos += _BLOCK.size + size
    return TrackFile(Path(path), meta, TrackBlock.concat(blocks), truncated, len(data))


def hour_of(wall_s: float) -> str:
    """The UTC hour a wall-clock time falls in, as file names spell it (``20261207T13``)."""
    return datetime.fromtimestamp(wall_s, UTC).strftime("%Y%m%dT%H")


def file_name(camera_id: str, hour: str, segment: str) -> str:
    """``<camera>_<hour>Z_<segment>.cgtracks``."""
    return f"{camera_id}_{hour}Z_{segment}{SUFFIX}"


def list_track_files(folder: Path) -> Iterator[tuple[Path, str, datetime, str]]:
    """``(path, camera, hour start (UTC), segment)`` of the track files in ``folder`` (none when it is missing)."""
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        m = _NAME.match(entry.name)
        if m is None or not entry.is_file(follow_symlinks=False):
            continue
        hour = datetime.strptime(m.group("hour"), "%Y%m%dT%H").replace(tzinfo=UTC)
        yield Path(entry.path), m.group("camera"), hour, m.group("segment")
