"""ByteTrackTracker: ids per instance from 1, rows aligned with the input, ids stable over motion."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.errors import InvalidInputError
from campusguard.tracking import ByteTrackTracker, Tracker

FPS = 10.0


def _box(cx: float, cy: float, w: float = 40, h: float = 80) -> list[float]:
    return [cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2]


def _walk(make_detections, n_frames: int, starts: list[tuple[float, float]], v: tuple[float, float] = (5, 0)):
    """Frames of objects moving at ``v`` pixels per frame from ``starts``."""
    frames = []
    for f in range(n_frames):
        frames.append(make_detections([_box(x + v[0] * f, y + v[1] * f) for x, y in starts]))
    return frames


def test_is_a_tracker():
    assert isinstance(ByteTrackTracker(frame_rate=FPS), Tracker)


def test_ids_start_at_one_per_instance_and_are_stable(make_detections):
    frames = _walk(make_detections, 20, [(100, 100), (400, 300)])
    trackers = [ByteTrackTracker(frame_rate=FPS), ByteTrackTracker(frame_rate=FPS)]
    for tracker in trackers:  # two cameras: independent counters
        ids_per_frame = [tracker.update(d, timestamp_s=i / FPS).tracker_id.tolist() for i, d in enumerate(frames)]
        # min_consecutive_frames=2: the first frame has no confirmed track yet
        assert ids_per_frame[0] == []
        assert all(ids == [1, 2] for ids in ids_per_frame[1:])


def test_rows_are_input_rows_in_input_order(make_detections):
    tracker = ByteTrackTracker(frame_rate=FPS)
    starts = [(100, 100), (300, 100), (500, 100)]
    for f in range(6):
        dets = make_detections([_box(x + 4 * f, y) for x, y in starts], confidence=[0.9, 0.8, 0.95])
        order = np.array([2, 0, 1]) if f % 2 else np.array([1, 2, 0])
        shuffled = dets[order]
        out = tracker.update(shuffled, timestamp_s=f / FPS)
        if f == 0:
            continue
        np.testing.assert_array_equal(out.xyxy, shuffled.xyxy)
        np.testing.assert_array_equal(out.confidence, shuffled.confidence)
        # the object first seen on the left keeps id 2 whatever the row order (frame 0 order 1,2,0)
        by_x = dict(zip(out.xyxy[:, 0].round().astype(int).tolist(), out.tracker_id.tolist(), strict=True))
        assert [by_x[int(round(x + 4 * f - 20))] for x, _ in starts] == [3, 1, 2]


def test_keep_unconfirmed_keeps_every_row_with_minus_one(make_detections):
    tracker = ByteTrackTracker(frame_rate=FPS, keep_unconfirmed=True)
    first = tracker.update(make_detections([_box(100, 100), _box(300, 100)]), timestamp_s=0.0)
    assert first.tracker_id.tolist() == [-1, -1]
    second = tracker.update(make_detections([_box(104, 100), _box(304, 100), _box(600, 300)]), timestamp_s=0.1)
    assert second.tracker_id.tolist() == [1, 2, -1]


def test_low_confidence_rows_are_dropped_unless_matched(make_detections):
    tracker = ByteTrackTracker(frame_rate=FPS, track_activation_threshold=0.5, high_conf_threshold=0.5)
    # a weak detection never starts a track
    for f in range(4):
        out = tracker.update(make_detections([_box(100 + 3 * f, 100)], confidence=0.3), timestamp_s=f / FPS)
        assert len(out) == 0
    # a confirmed track keeps its id through a low-confidence frame (ByteTrack's second stage)
    tracker = ByteTrackTracker(frame_rate=FPS)
    for f in range(3):
        tracker.update(make_detections([_box(100 + 3 * f, 100)], confidence=0.9), timestamp_s=f / FPS)
    out = tracker.update(make_detections([_box(109, 100)], confidence=0.3), timestamp_s=0.3)
    assert out.tracker_id.tolist() == [1]


@pytest.mark.parametrize(("gap_frames", "same_id"), [(3, True), (25, False)])
def test_dropout_within_lost_track_budget_keeps_id(make_detections, gap_frames, same_id):
    tracker = ByteTrackTracker(frame_rate=FPS, lost_track_s=1.0)
    t = 0
    for _ in range(5):
        tracker.update(make_detections([_box(100 + 2 * t, 100)]), timestamp_s=t / FPS)
        t += 1
    for _ in range(gap_frames):
        tracker.update(make_detections([]), timestamp_s=t / FPS)
        t += 1
    ids = []
    for _ in range(3):
        ids += tracker.update(make_detections([_box(100 + 2 * t, 100)]), timestamp_s=t / FPS).tracker_id.tolist()
        t += 1
    assert (ids[-1] == 1) is same_id
    if not same_id:
        assert ids[-1] == 2  # a new track, never a reused id


def test_reset_restarts_ids(make_detections):
    tracker = ByteTrackTracker(frame_rate=FPS)
    for f in range(3):
        tracker.update(make_detections([_box(100 + f, 100)]), timestamp_s=f / FPS)
    tracker.reset()
    ids = [
        tracker.update(make_detections([_box(500 + f, 300)]), timestamp_s=f / FPS).tracker_id.tolist() for f in range(3)
    ]
    assert ids[-1] == [1]


def test_empty_input_gives_empty_tracked_output(make_detections):
    out = ByteTrackTracker(frame_rate=FPS).update(make_detections([]), timestamp_s=0.0)
    assert len(out) == 0 and out.tracker_id is not None and out.tracker_id.dtype == np.int64


def test_extra_data_is_sliced_with_rows(make_detections):
    tracker = ByteTrackTracker(frame_rate=FPS)
    for f in range(2):
        dets = make_detections([_box(100 + f, 100), _box(300 + f, 100)]).with_data(tag=np.array(["a", "b"]))
        out = tracker.update(dets, timestamp_s=f / FPS)
    assert out.data["tag"].tolist() == ["a", "b"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"frame_rate": 0}, "frame_rate"),
        ({"lost_track_s": -1}, "lost_track_s"),
        ({"min_iou": 1.5}, "min_iou"),
        ({"high_conf_threshold": -0.1}, "high_conf_threshold"),
        ({"min_consecutive_frames": 0}, "min_consecutive_frames"),
    ],
)
def test_invalid_arguments(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        ByteTrackTracker(**kwargs)
