"""The `Tracker` protocol every tracker implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from campusguard.detections import Detections

__all__ = ["Tracker"]


@runtime_checkable
class Tracker(Protocol):
    """A stateful multi-object tracker for one camera.

    Implementations keep all state (tracks, id counter) on the instance, so one tracker
    per camera gives independent ids per camera.
    """

    def update(self, detections: Detections, timestamp_s: float | None = None) -> Detections:
        """Associate one frame's detections with tracks.

        Args:
            detections: detections of one frame, ``xyxy`` in frame pixels.
            timestamp_s: capture time of the frame in seconds (any origin, non-decreasing),
                or ``None`` for a fixed frame rate.

        Returns:
            A subset of the input rows, in input order, with ``tracker_id`` ``(M,) int64`` set.
        """
        ...

    def reset(self) -> None:
        """Forget all tracks and restart ids at 1."""
        ...
