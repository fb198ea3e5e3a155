"""Incidents computed from per-frame tracked boxes with the rule semantics the app uses.

Every rule evaluates the bottom-centre of each box; zone membership is point-in-polygon
(boundary counts as inside). A frame in which a track is missing counts as "condition false"
for that track. ``start_s`` is the first frame time at which the condition has held
continuously for ``min_seconds`` (``t - t_run_start >= min_seconds``); ``end_s`` is the last
frame time at which it holds.

- ``crowd``: at least ``min_count`` people (class 0) inside ``danger_area``.
- ``fire_lane``: one vehicle (classes 2, 3, 5, 7) inside ``fire_lane`` and stationary: its
  anchor moved less than ``stationary_frac`` of the frame width since the frame 1 s earlier
  (which must exist for that track).
- ``intrusion``: one person inside ``restricted``.
- ``loitering``: one track (any class) inside ``loiter_area``.
- ``fall`` (only when ``RuleParams.fall_min_seconds`` is set): one person anywhere in the
  frame (zone ``frame``) who is down: the box is at least ``fall_down_aspect`` times wider than
  tall, the track was upright (at least ``fall_upright_aspect`` times taller than wide) on an
  earlier frame, and it is stationary as for ``fire_lane``. The app's ``FallRule`` with
  ``signal: track-shape``.
- ``line_crossing``: instantaneous, at the first frame on the ``in_side`` of ``fence_line``
  after a frame on the other side, when the anchor's move crosses the line segment itself.
  Side convention (pixels, y down): walking from ``points[0]`` to ``points[1]`` on screen,
  ``"right"`` is the right-hand side (for a left-to-right line, below it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from campusguard.data.synth.classes import PERSON, VEHICLE_CLASS_IDS

__all__ = ["Incident", "RuleParams", "compute_incidents", "point_in_polygon", "side_of_line"]


@dataclass(frozen=True)
class Incident:
    """One incident: ``kind``, ``zone`` (zone or line name), times in seconds, involved tracks."""

    kind: str
    zone: str
    start_s: float
    end_s: float
    track_ids: tuple[int, ...]
    direction: str | None = None

    def to_dict(self) -> dict:
        d: dict = {
            "kind": self.kind,
            "zone": self.zone,
            "start_s": round(self.start_s, 3),
            "end_s": round(self.end_s, 3),
            "track_ids": list(self.track_ids),
        }
        if self.direction is not None:
            d["direction"] = self.direction
        return d


@dataclass(frozen=True)
class RuleParams:
    """Rule thresholds (seconds, counts, fractions of the frame width)."""

    crowd_min_count: int = 3
    crowd_min_seconds: float = 3.0
    fire_lane_min_seconds: float = 4.0
    loitering_min_seconds: float = 8.0
    intrusion_min_seconds: float = 0.5
    stationary_frac: float = 0.02
    stationary_window_s: float = 1.0
    fall_min_seconds: float | None = None  # None: no fall incidents (videos without scripted falls)
    fall_down_aspect: float = 1.2
    fall_upright_aspect: float = 1.5

    def to_dict(self) -> dict:
        """The ``params`` block of the ground-truth JSON."""
        fall = (
            {}
            if self.fall_min_seconds is None
            else {
                "fall": {
                    "min_seconds": self.fall_min_seconds,
                    "down_aspect": self.fall_down_aspect,
                    "upright_aspect": self.fall_upright_aspect,
                    "stationary_frac": self.stationary_frac,
                    "stationary_window_s": self.stationary_window_s,
                }
            }
        )
        return fall | {
            "crowd": {"min_count": self.crowd_min_count, "min_seconds": self.crowd_min_seconds},
            "fire_lane": {
                "min_seconds": self.fire_lane_min_seconds,
                "stationary_frac": self.stationary_frac,
                "stationary_window_s": self.stationary_window_s,
            },
            "loitering": {"min_seconds": self.loitering_min_seconds},
            "intrusion": {"min_seconds": self.intrusion_min_seconds},
        }


def point_in_polygon(point_xy: Sequence[float], polygon_xy: np.ndarray) -> bool:
    """Whether a point lies inside (or on the boundary of) a polygon given as ``(N, 2)`` pixels."""
    x, y = float(point_xy[0]), float(point_xy[1])
    poly = np.asarray(polygon_xy, np.float64)
    n = len(poly)
    inside = False
    for i in range(n):
        x1, y1 = poly[i]
        x2, y2 = poly[(i + 1) % n]
        cross = (x2 - x1) * (y - y1) - (y2 - y1) * (x - x1)
        if (
            abs(cross) < 1e-9
            and min(x1, x2) - 1e-9 <= x <= max(x1, x2) + 1e-9
            and min(y1, y2) - 1e-9 <= y <= max(y1, y2) + 1e-9
        ):
            return True
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return inside


def side_of_line(
    point_xy: Sequence[float] | np.ndarray, start_xy: Sequence[float] | np.ndarray, end_xy: Sequence[float] | np.ndarray
) -> float:
    """Signed cross product: positive on the right-hand side (on screen) of ``start -> end``."""
    (x, y), (x1, y1), (x2, y2) = point_xy, start_xy, end_xy
    return float((x2 - x1) * (y - y1) - (y2 - y1) * (x - x1))


def _segments_cross(p: np.ndarray, q: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    def orient(o: np.ndarray, s: np.ndarray, t: np.ndarray) -> float:
        return float((s[0] - o[0]) * (t[1] - o[1]) - (s[1] - o[1]) * (t[0] - o[0]))

    d1, d2, d3, d4 = orient(a, b, p), orient(a, b, q), orient(p, q, a), orient(p, q, b)
    return (d1 * d2 <= 0) and (d3 * d4 <= 0)


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """Maximal ``[start, end]`` index runs of True."""
    out, start = [], None
    for i, f in enumerate(flags):
        if f and start is None:
            start = i
        if not f and start is not None:
            out.append((start, i - 1))
            start = None
    if start is not None:
        out.append((start, len(flags) - 1))
    return out


def _held(times: list[float], flags: list[bool], min_s: float) -> list[tuple[int, int]]:
    """``(first index where the run has held min_s, last index)`` per qualifying run."""
    out = []
    for a, b in _runs(flags):
        for k in range(a, b + 1):
            if times[k] - times[a] >= min_s - 1e-9:
                out.append((k, b))
                break
    return out


def _falls(
    tid: int, shapes: dict[int, tuple[float, float]], still: list[bool], times: list[float], params: RuleParams
) -> list[Incident]:
    """Fall incidents of one person track (see the module docstring)."""
    assert params.fall_min_seconds is not None
    flags, was_upright = [], False
    for i in range(len(times)):
        wh = shapes.get(i)
        down = wh is not None and wh[0] >= params.fall_down_aspect * max(wh[1], 1e-6)
        flags.append(down and was_upright and still[i])
        was_upright = was_upright or (wh is not None and not down and wh[1] >= params.fall_upright_aspect * wh[0])
    return [
        Incident("fall", "frame", times[k], times[b], (tid,)) for k, b in _held(times, flags, params.fall_min_seconds)
    ]


def compute_incidents(
    frames: list[dict],
    zones: dict[str, np.ndarray],
    fence_line: tuple[np.ndarray, np.ndarray, str],
    width: int,
    fps: float,
    params: RuleParams,
) -> list[Incident]:
    """Incidents in ``frames`` (``[{"frame", "t", "objects": [{"track_id", "class_id", "xyxy"}]}]``).

    Args:
        frames: per-frame objects, one entry per frame in order.
        zones: zone name -> ``(N, 2)`` polygon in pixels (``restricted``, ``fire_lane``,
            ``danger_area``, ``loiter_area``).
        fence_line: ``(start_xy, end_xy, in_side)``.
        width: frame width in pixels (the stationary threshold is a fraction of it).
        fps: frame rate (the stationary window is ``round(stationary_window_s * fps)`` frames).
        params: rule thresholds.
    Returns:
        incidents sorted by start time, then kind.
    """
    times = [float(f["t"]) for f in frames]
    n = len(frames)
    anchors: dict[int, dict[int, tuple[float, float, int]]] = {}
    shapes: dict[int, dict[int, tuple[float, float]]] = {}  # track -> frame -> (width, height)
    for i, f in enumerate(frames):
        for o in f["objects"]:
            x1, y1, x2, y2 = o["xyxy"]
            anchors.setdefault(int(o["track_id"]), {})[i] = ((x1 + x2) / 2.0, y2, int(o["class_id"]))
            shapes.setdefault(int(o["track_id"]), {})[i] = (x2 - x1, y2 - y1)

    def inside(tid: int, i: int, zone: str) -> bool:
        a = anchors[tid].get(i)
        return a is not None and point_in_polygon(a[:2], zones[zone])

    incidents: list[Incident] = []
    # crowd
    members = [
        [tid for tid in anchors if anchors[tid].get(i, (0, 0, -1))[2] == PERSON and inside(tid, i, "danger_area")]
        for i in range(n)
    ]
    for k, b in _held(times, [len(m) >= params.crowd_min_count for m in members], params.crowd_min_seconds):
        ids = sorted({t for i in range(k, b + 1) for t in members[i]})
        incidents.append(Incident("crowd", "danger_area", times[k], times[b], tuple(ids)))
    lag = max(1, round(params.stationary_window_s * fps))
    def still(seen: dict[int, tuple[float, float, int]], i: int) -> bool:
        a, prev = seen.get(i), seen.get(i - lag)
        return (
            a is not None and prev is not None and np.hypot(a[0] - prev[0], a[1] - prev[1]) < params.stationary_frac * width
        )

    for tid, seen in anchors.items():
        cls = next(iter(seen.values()))[2]
        if cls == PERSON and params.fall_min_seconds is not None:
            incidents += _falls(tid, shapes[tid], [still(seen, i) for i in range(n)], times, params)
        if cls in VEHICLE_CLASS_IDS:
            flags = [still(seen, i) and inside(tid, i, "fire_lane") for i in range(n)]
            for k, b in _held(times, flags, params.fire_lane_min_seconds):
                incidents.append(Incident("fire_lane", "fire_lane", times[k], times[b], (tid,)))
        if cls == PERSON:
            for k, b in _held(times, [inside(tid, i, "restricted") for i in range(n)], params.intrusion_min_seconds):
                incidents.append(Incident("intrusion", "restricted", times[k], times[b], (tid,)))
        for k, b in _held(times, [inside(tid, i, "loiter_area") for i in range(n)], params.loitering_min_seconds):
            incidents.append(Incident("loitering", "loiter_area", times[k], times[b], (tid,)))
        start, end, in_side = fence_line
        sign_in = 1.0 if in_side == "right" else -1.0
        for i in range(1, n):
            a, prev = seen.get(i), seen.get(i - 1)
            if a is None or prev is None:
                continue
            s_prev, s_now = side_of_line(prev[:2], start, end) * sign_in, side_of_line(a[:2], start, end) * sign_in
            if s_prev <= 0 < s_now and _segments_cross(
                np.array(prev[:2]), np.array(a[:2]), np.asarray(start), np.asarray(end)
            ):
                incidents.append(Incident("line_crossing", "fence_line", times[i], times[i], (tid,), "in"))
    return sorted(incidents, key=lambda x: (x.start_s, x.kind, x.track_ids))
