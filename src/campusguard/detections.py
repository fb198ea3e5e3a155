"""`Detections`: the one type that flows through the whole system.

A frozen dataclass of named NumPy arrays. Shapes and dtypes are checked on creation;
every operation returns a new object.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Detections"]


def _as(arr: Any, dtype: npt.DTypeLike, shape_tail: tuple[int, ...], name: str) -> np.ndarray:
    out = np.ascontiguousarray(np.asarray(arr, dtype=dtype))
    if out.size == 0:
        out = out.reshape((0, *shape_tail))
    if out.ndim != 1 + len(shape_tail) or out.shape[1:] != shape_tail:
        raise ValueError(
            f"Detections.{name} must have shape (N, {', '.join(map(str, shape_tail))}), got {out.shape}".replace(
                ", )", ")"
            )
        )
    return out


@dataclass(frozen=True, eq=False)
class Detections:
    """Detections of one image.

    Attributes:
        xyxy: ``(N, 4) float32`` boxes as x1, y1, x2, y2 in original-frame pixels.
        confidence: ``(N,) float32`` scores in 0..1.
        class_id: ``(N,) int64`` class indices.
        tracker_id: ``(N,) int64`` track ids, or ``None`` before tracking.
        data: extra per-detection arrays (first axis N), sliced together with the rest.
    """

    xyxy: np.ndarray
    confidence: np.ndarray
    class_id: np.ndarray
    tracker_id: np.ndarray | None = None
    data: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        xyxy = _as(self.xyxy, np.float32, (4,), "xyxy")
        n = len(xyxy)
        conf = _as(self.confidence, np.float32, (), "confidence")
        cls = _as(self.class_id, np.int64, (), "class_id")
        if len(conf) != n or len(cls) != n:
            raise ValueError(
                f"Detections fields disagree in length: xyxy {n}, confidence {len(conf)}, class_id {len(cls)}"
            )
        object.__setattr__(self, "xyxy", xyxy)
        object.__setattr__(self, "confidence", conf)
        object.__setattr__(self, "class_id", cls)
        if self.tracker_id is not None:
            tid = _as(self.tracker_id, np.int64, (), "tracker_id")
            if len(tid) != n:
                raise ValueError(f"Detections.tracker_id has length {len(tid)}, expected {n}")
            object.__setattr__(self, "tracker_id", tid)
        data = {}
        for key, value in self.data.items():
            arr = np.asarray(value)
            if arr.ndim == 0 or len(arr) != n:
                raise ValueError(f"Detections.data[{key!r}] must have first axis {n}, got shape {arr.shape}")
            data[key] = arr
        object.__setattr__(self, "data", data)

    # construction -------------------------------------------------------------------------
    @classmethod
    def empty(cls) -> Detections:
        """Return detections with no rows."""
        return cls(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))

    # container protocol -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.xyxy)

    def __iter__(self) -> Iterator[tuple[np.ndarray, float, int, int | None]]:
        """Iterate rows as ``(xyxy, confidence, class_id, tracker_id)`` tuples."""
        for i in range(len(self)):
            yield (
                self.xyxy[i],
                float(self.confidence[i]),
                int(self.class_id[i]),
                None if self.tracker_id is None else int(self.tracker_id[i]),
            )

    def __getitem__(self, index: int | slice | np.ndarray | list[int]) -> Detections:
        """Select rows by integer, slice, integer array or boolean mask; every field together."""
        if isinstance(index, (int, np.integer)):
            index = np.array([index])
        idx = np.asarray(index) if not isinstance(index, slice) else index
        if isinstance(idx, np.ndarray) and idx.dtype == bool and idx.shape != (len(self),):
            raise IndexError(f"boolean mask of shape {idx.shape} does not match {len(self)} detections")
        return Detections(
            xyxy=self.xyxy[idx],
            confidence=self.confidence[idx],
            class_id=self.class_id[idx],
            tracker_id=None if self.tracker_id is None else self.tracker_id[idx],
            data={k: v[idx] for k, v in self.data.items()},
        )

    def is_empty(self) -> bool:
        return len(self) == 0

    # derived ------------------------------------------------------------------------------
    @property
    def area(self) -> np.ndarray:
        """``(N,) float32`` box areas in square pixels."""
        wh = np.clip(self.xyxy[:, 2:] - self.xyxy[:, :2], 0, None)
        return wh[:, 0] * wh[:, 1]

    def anchor(self, position: str = "bottom_center") -> np.ndarray:
        """``(N, 2) float32`` anchor points: ``bottom_center`` (default), ``center`` or ``top_left``."""
        x1, y1, x2, y2 = self.xyxy.T
        if position == "bottom_center":
            return np.stack([(x1 + x2) / 2, y2], axis=1)
        if position == "center":
            return np.stack([(x1 + x2) / 2, (y1 + y2) / 2], axis=1)
        if position == "top_left":
            return np.stack([x1, y1], axis=1)
        raise ValueError(f"unknown anchor position {position!r}")

    # new objects --------------------------------------------------------------------------
    def with_tracker_id(self, tracker_id: np.ndarray) -> Detections:
        """Return a copy with ``tracker_id`` set."""
        return Detections(self.xyxy, self.confidence, self.class_id, tracker_id, dict(self.data))

    def with_data(self, **arrays: np.ndarray) -> Detections:
        """Return a copy with extra per-row arrays added to ``data``."""
        return Detections(self.xyxy, self.confidence, self.class_id, self.tracker_id, {**self.data, **arrays})

    @staticmethod
    def merge(items: list[Detections]) -> Detections:
        """Concatenate several detections; tracker ids kept only if all have them."""
        if not items:
            return Detections.empty()
        keys = set.intersection(*(set(d.data) for d in items))
        tids = [d.tracker_id for d in items if d.tracker_id is not None]
        return Detections(
            xyxy=np.concatenate([d.xyxy for d in items]),
            confidence=np.concatenate([d.confidence for d in items]),
            class_id=np.concatenate([d.class_id for d in items]),
            tracker_id=np.concatenate(tids) if len(tids) == len(items) else None,
            data={k: np.concatenate([d.data[k] for d in items]) for k in keys},
        )

    def __repr__(self) -> str:
        tracked = "" if self.tracker_id is None else ", tracked"
        return f"Detections(n={len(self)}{tracked}, data={sorted(self.data)})"
