"""ByteTrack on `Detections`, wrapping the maintained ``trackers`` package (Roboflow).

Why a wrapper and not our own tracker: ``trackers.ByteTrackTracker`` is a maintained,
clean-room ByteTrack (two-stage high/low confidence association, Kalman prediction,
per-instance id allocator, timestamp-aware lost-track budget). This module only converts
between `campusguard.detections.Detections` and ``supervision.Detections``, restores the
input row order, shifts ids to start at 1 and exposes typed keyword arguments with units.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError, require

__all__ = ["ByteTrackTracker"]

_ROW_KEY = "_campusguard_row"


class ByteTrackTracker:
    """ByteTrack for one camera; ids start at 1 and are never reused within an instance.

    Args:
        frame_rate: nominal frames per second of the stream (> 0); scales the lost-track budget
            when no timestamps are passed and bootstraps the first Kalman step otherwise.
        lost_track_s: seconds a track survives without a matching detection (>= 0).
        track_activation_threshold: minimum confidence (0..1) for a detection to start a track.
        high_conf_threshold: confidence (0..1) splitting the first (high) and second (low)
            association stages.
        min_iou: minimum IoU (0..1) between a predicted track box and a detection to match.
        min_consecutive_frames: frames a new track must be matched in a row before it gets an id.
        keep_unconfirmed: if ``False`` (default) `update` drops rows that are not (yet) part of a
            confirmed track; if ``True`` it keeps every input row and gives those ``tracker_id -1``.

    Raises:
        InvalidInputError: an argument is out of range.
        MissingDependencyError: the ``trackers`` package (extra ``track``) is not installed.
    """

    def __init__(
        self,
        *,
        frame_rate: float = 30.0,
        lost_track_s: float = 1.0,
        track_activation_threshold: float = 0.5,
        high_conf_threshold: float = 0.5,
        min_iou: float = 0.1,
        min_consecutive_frames: int = 2,
        keep_unconfirmed: bool = False,
    ) -> None:
        if not (np.isfinite(frame_rate) and frame_rate > 0):
            raise InvalidInputError(f"ByteTrackTracker frame_rate must be > 0, got {frame_rate}")
        if lost_track_s < 0:
            raise InvalidInputError(f"ByteTrackTracker lost_track_s must be >= 0, got {lost_track_s}")
        for name, value in (
            ("track_activation_threshold", track_activation_threshold),
            ("high_conf_threshold", high_conf_threshold),
            ("min_iou", min_iou),
        ):
            if not 0.0 <= value <= 1.0:
                raise InvalidInputError(f"ByteTrackTracker {name} must be in 0..1, got {value}")
        if min_consecutive_frames < 1:
            raise InvalidInputError(
                f"ByteTrackTracker min_consecutive_frames must be >= 1, got {min_consecutive_frames}"
            )
        trackers: Any = require("trackers", "track")
        # trackers counts its buffer in 30 FPS frames whatever the real rate, i.e. buffer/30 seconds
        self._impl = trackers.ByteTrackTracker(
            lost_track_buffer=int(round(lost_track_s * 30.0)),
            frame_rate=float(frame_rate),
            track_activation_threshold=track_activation_threshold,
            minimum_consecutive_frames=min_consecutive_frames,
            minimum_iou_threshold=min_iou,
            high_conf_det_threshold=high_conf_threshold,
        )
        self.keep_unconfirmed = keep_unconfirmed

    def update(self, detections: Detections, timestamp_s: float | None = None) -> Detections:
        """Associate one frame's detections with this camera's tracks.

        Args:
            detections: ``N`` detections of one frame (xyxy float32 pixels, confidence, class_id).
                Any existing ``tracker_id`` is ignored and replaced.
            timestamp_s: capture time in seconds (non-decreasing), or ``None`` for a fixed
                ``frame_rate``. A timestamp earlier than the previous one skips the update
                (every row then counts as unconfirmed).

        Returns:
            ``M <= N`` rows of the input, in input order, with ``tracker_id (M,) int64 >= 1``;
            with ``keep_unconfirmed=True`` all ``N`` rows, unconfirmed ones with ``tracker_id -1``.
            Class ids are not used for association (ByteTrack is class-agnostic).
        """
        sv: Any = require("supervision", "track")
        n = len(detections)
        sv_dets = sv.Detections(
            xyxy=detections.xyxy.astype(np.float32).reshape(-1, 4),
            confidence=detections.confidence.astype(np.float32),
            class_id=detections.class_id.astype(np.int64),
            data={_ROW_KEY: np.arange(n, dtype=np.int64)},
        )
        out = self._impl.update(sv_dets, timestamp=timestamp_s)
        tracker_id = np.full(n, -1, dtype=np.int64)
        if len(out) > 0:
            rows = np.asarray(out.data[_ROW_KEY], dtype=np.int64)
            ids = np.asarray(out.tracker_id, dtype=np.int64)
            # trackers allocates ids from 0 and uses -1 for "not confirmed"; ours start at 1
            tracker_id[rows] = np.where(ids >= 0, ids + 1, -1)
        result = detections.with_tracker_id(tracker_id)
        if self.keep_unconfirmed:
            return result
        return result[tracker_id >= 1]

    def reset(self) -> None:
        """Forget all tracks and restart ids at 1 (for a new video or scene)."""
        self._impl.reset()
