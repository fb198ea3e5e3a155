"""Multi-object tracking on `Detections`.

Public API:
    `Tracker`: protocol, ``update(detections, timestamp_s=None) -> Detections`` and ``reset()``.
    `ByteTrackTracker`: ByteTrack from the maintained ``trackers`` package (extra ``track``),
    one instance per camera, ids starting at 1 per instance.

Returned rows are always a subset of the input rows, in input order, with ``tracker_id`` set;
see `ByteTrackTracker.update` for which rows are kept.
"""

from campusguard.tracking.base import Tracker
from campusguard.tracking.bytetrack import ByteTrackTracker

__all__ = ["Tracker", "ByteTrackTracker"]
