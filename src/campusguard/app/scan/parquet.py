"""Per-frame detections of a scanned recording as a Parquet file (pyarrow, the ``parquet`` extra).

One file per recording, one row per tracked detection: ``frame`` (index in the file), ``t_s``
(stream seconds), ``x1 y1 x2 y2`` (pixels of the frame), ``confidence``, ``class_id`` and
``tracker_id`` (-1 where the tracker gave none). Rows are written in row groups as the scan goes,
to a ``.partial`` file renamed into place at the end, so a killed scan leaves no truncated file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import require

__all__ = ["DetectionsParquet", "COLUMNS"]

COLUMNS: tuple[str, ...] = ("frame", "t_s", "x1", "y1", "x2", "y2", "confidence", "class_id", "tracker_id")


class DetectionsParquet:
    """Writes one recording's detections to ``path`` (`commit` renames it into place).

    Args:
        path: the final ``.parquet`` file; its folder is created.
        rows_per_group: detections buffered before a row group is written.

    Raises:
        MissingDependencyError: pyarrow is not installed (names the ``parquet`` extra).
    """

    def __init__(self, path: Path, rows_per_group: int = 65536) -> None:
        self._pa = require("pyarrow", "parquet")
        self._pq = require("pyarrow.parquet", "parquet")
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.rows_per_group = rows_per_group
        self.rows = 0
        pa = self._pa
        self.schema = pa.schema(
            [
                ("frame", pa.int64()),
                ("t_s", pa.float64()),
                ("x1", pa.float32()),
                ("y1", pa.float32()),
                ("x2", pa.float32()),
                ("y2", pa.float32()),
                ("confidence", pa.float32()),
                ("class_id", pa.int64()),
                ("tracker_id", pa.int64()),
            ]
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        self._writer: Any = self._pq.ParquetWriter(str(self.partial), self.schema)
        self._buffer: list[tuple[int, float, Detections]] = []
        self._buffered = 0

    def add(self, frame_index: int, timestamp_s: float, detections: Detections) -> None:
        """Buffer one frame's detections (``xyxy`` in that frame's pixels)."""
        if len(detections):
            self._buffer.append((frame_index, timestamp_s, detections))
            self._buffered += len(detections)
            if self._buffered >= self.rows_per_group:
                self._flush()

    def _flush(self) -> None:
        if not self._buffer:
            return
        frames = np.concatenate([np.full(len(d), i, np.int64) for i, _, d in self._buffer])
        times = np.concatenate([np.full(len(d), t, np.float64) for _, t, d in self._buffer])
        xyxy = np.concatenate([d.xyxy for _, _, d in self._buffer]).astype(np.float32)
        conf = np.concatenate([d.confidence for _, _, d in self._buffer]).astype(np.float32)
        cls = np.concatenate([d.class_id for _, _, d in self._buffer]).astype(np.int64)
        tid = np.concatenate(
            [d.tracker_id if d.tracker_id is not None else np.full(len(d), -1, np.int64) for _, _, d in self._buffer]
        ).astype(np.int64)
        columns = [frames, times, xyxy[:, 0], xyxy[:, 1], xyxy[:, 2], xyxy[:, 3], conf, cls, tid]
        self._writer.write_table(self._pa.Table.from_arrays(columns, schema=self.schema))
        self.rows += len(frames)
        self._buffer.clear()
        self._buffered = 0

    def commit(self) -> Path:
        """Write what is buffered, close, and move the file into place; returns its path."""
        self._flush()
        self._writer.close()
        os.replace(self.partial, self.path)
        return self.path

    def discard(self) -> None:
        """Close and delete the partial file (the recording failed)."""
        self._writer.close()
        self.partial.unlink(missing_ok=True)
