"""Test helpers for rules: scripted tracks and a frame generator (`make_detections` is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pytest

from campusguard.detections import Detections
from factories import build_detections

FPS = 10.0


@dataclass
class Track:
    """A scripted object: ``waypoints`` ``[(t_s, x, y), ...]`` of its bottom-centre, linearly
    interpolated, present from the first to the last waypoint time; ``drop_frames`` are frame
    indices where the detector misses it."""

    tid: int
    class_id: int
    waypoints: list[tuple[float, float, float]]
    size_wh: tuple[float, float] = (30.0, 80.0)
    drop_frames: set[int] = field(default_factory=set)

    def at(self, t: float) -> tuple[float, float] | None:
        ts = [w[0] for w in self.waypoints]
        if t < ts[0] - 1e-9 or t > ts[-1] + 1e-9:
            return None
        x = float(np.interp(t, ts, [w[1] for w in self.waypoints]))
        y = float(np.interp(t, ts, [w[2] for w in self.waypoints]))
        return x, y


def scripted_frames(
    tracks: Sequence[Track], duration_s: float, fps: float = FPS, with_ids: bool = True
) -> list[tuple[float, int, Detections]]:
    """``(timestamp_s, frame_index, detections)`` per frame of the scripted tracks."""
    frames = []
    for f in range(int(round(duration_s * fps))):
        t = f / fps
        boxes, cls, tids = [], [], []
        for tr in tracks:
            p = tr.at(t)
            if p is None or f in tr.drop_frames:
                continue
            w, h = tr.size_wh
            boxes.append([p[0] - w / 2, p[1] - h, p[0] + w / 2, p[1]])
            cls.append(tr.class_id)
            tids.append(tr.tid)
        frames.append((t, f, build_detections(boxes, 0.9, cls, tids if with_ids else None)))
    return frames


def run_rule(rule, frames, wall_time=None):
    """Feed frames to a rule (or engine), then close it; return every event emitted."""
    events = []
    for t, f, dets in frames:
        events += rule.update(t, dets, f, wall_time)
    events += rule.close(frames[-1][0] + 1 / FPS, wall_time)
    return events


@pytest.fixture
def scene():
    """The helpers as one namespace: ``scene.Track``, ``scene.frames``, ``scene.run``."""

    class _Scene:
        Track = Track
        frames = staticmethod(scripted_frames)
        run = staticmethod(run_rule)
        fps = FPS

    return _Scene
