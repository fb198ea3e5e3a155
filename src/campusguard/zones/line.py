"""`LineZone`: a counting line; crossings per tracker id with direction (in / out).

Side convention (frame pixels, x right, y down): walking along the line from ``start`` to
``end`` as seen on screen, ``"right"`` is the right-hand side. For a line drawn left to right,
``"right"`` is below it. A crossing is counted when a track's anchor point moves from one side
to the other and the movement segment passes through the line segment itself (not its
extension). A hysteresis band of ``hysteresis_px`` around the line ignores jitter on the line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones.polygon import Units, frame_problem, to_pixels, units_problem

__all__ = ["LineZone", "LineCrossings", "line_problem", "side_of_line"]

Side = Literal["left", "right"]


def line_problem(points_xy: np.ndarray | Sequence[Sequence[float]]) -> str | None:
    """Say what is wrong with a line's end points ``[[x1, y1], [x2, y2]]``, in any units, or None."""
    pts = np.asarray(points_xy, dtype=np.float64)
    problem = units_problem(pts, "auto")
    if problem:
        return problem
    if len(pts) != 2:
        return f"a line needs 2 end points, got {len(pts)}"
    with np.errstate(over="ignore", invalid="ignore"):  # ends near the float64 limit: inf apart, no warning
        length = float(np.hypot(*(pts[1] - pts[0])))
    if length < 1e-9 * max(1.0, float(np.abs(pts).max())):
        return "start and end are the same point"
    return None


def side_of_line(points_xy: np.ndarray, start_xy: np.ndarray, end_xy: np.ndarray) -> np.ndarray:
    """``(N,) float64`` signed distance in pixels of ``(N, 2)`` points from the directed line.

    Positive on the right-hand side (on screen) of ``start -> end``, negative on the left.
    """
    pts = np.asarray(points_xy, dtype=np.float64).reshape(-1, 2)
    s = np.asarray(start_xy, dtype=np.float64)
    e = np.asarray(end_xy, dtype=np.float64)
    d = e - s
    cross = d[0] * (pts[:, 1] - s[1]) - d[1] * (pts[:, 0] - s[0])
    return cross / max(float(np.hypot(d[0], d[1])), 1e-12)


@dataclass(frozen=True)
class LineCrossings:
    """Result of one `LineZone.update`.

    Attributes:
        crossed_in: ``(N,) bool``, rows whose track crossed into ``in_side`` on this frame.
        crossed_out: ``(N,) bool``, rows whose track crossed out of ``in_side`` on this frame.
        in_count: total crossings in so far.
        out_count: total crossings out so far.
    """

    crossed_in: np.ndarray
    crossed_out: np.ndarray
    in_count: int
    out_count: int


@dataclass(slots=True)
class _TrackSide:
    side: int  # +1 right, -1 left, 0 not yet clear of the hysteresis band
    point_xy: tuple[float, float]  # last anchor seen clearly on ``side``
    point_d: float  # its signed distance from the line
    last_update: int
    last_xy: tuple[float, float]  # last anchor seen
    class_id: int


class LineZone:
    """A named counting line with per-track crossing state.

    Args:
        start_xy: line start ``(x, y)``, pixels or fractions of the frame.
        end_xy: line end ``(x, y)``.
        name: line name, used in errors and events.
        in_side: which side is "in": ``"right"`` or ``"left"`` of ``start -> end`` on screen.
        resolution_wh: frame ``(width, height)``; needed for fractions; ends must lie in the frame.
        units: ``"pixels"``, ``"fraction"`` or ``"auto"``.
        hysteresis_px: anchors closer than this to the line keep their previous side (>= 0).
        anchor: box anchor tested (``"bottom_center"`` by default).
        forget_after_updates: a track not seen for this many updates is forgotten (bounds memory).
        stitch_radius: id-switch stitching: a track id seen for the first time continues the
            nearest track of the same class lost within ``stitch_max_updates`` updates whose last
            anchor lies within this many box heights (0 disables), so a tracker id switch next
            to the line neither loses nor doubles a crossing.
        stitch_max_updates: how recently a track must have been seen to be continued.

    Raises:
        InvalidInputError: any `line_problem`, end points outside the frame, bad ``in_side``.
    """

    def __init__(
        self,
        start_xy: Sequence[float],
        end_xy: Sequence[float],
        name: str,
        *,
        in_side: Side = "right",
        resolution_wh: tuple[int, int] | None = None,
        units: Units = "auto",
        hysteresis_px: float = 0.0,
        anchor: str = "bottom_center",
        forget_after_updates: int = 300,
        stitch_radius: float = 0.5,
        stitch_max_updates: int = 10,
    ) -> None:
        what = f"line {name!r}"
        problem = line_problem([start_xy, end_xy])
        if problem:
            raise InvalidInputError(f"{what}: {problem}")
        pts = to_pixels(np.asarray([start_xy, end_xy], dtype=np.float64), resolution_wh, units, what)
        if resolution_wh is not None:
            problem = frame_problem(pts, resolution_wh, "line")
            if problem:
                raise InvalidInputError(f"{what}: {problem}")
        if in_side not in ("left", "right"):
            raise InvalidInputError(f"{what}: in_side must be 'left' or 'right', got {in_side!r}")
        if hysteresis_px < 0:
            raise InvalidInputError(f"{what}: hysteresis_px must be >= 0, got {hysteresis_px}")
        if stitch_radius < 0:
            raise InvalidInputError(f"{what}: stitch_radius must be >= 0, got {stitch_radius}")
        self.name = name
        self.start_xy = pts[0]
        self.end_xy = pts[1]
        self.in_side: Side = in_side
        self.hysteresis_px = float(hysteresis_px)
        self.anchor = anchor
        self.forget_after_updates = int(forget_after_updates)
        self.stitch_radius = float(stitch_radius)
        self.stitch_max_updates = int(stitch_max_updates)
        self.in_count = 0
        self.out_count = 0
        self._tracks: dict[int, _TrackSide] = {}
        self._n_updates = 0
        self._oldest = 0  # no track was last seen before this update (none is stale until it is forgotten)

    @property
    def _in_sign(self) -> int:
        return 1 if self.in_side == "right" else -1

    def _passes_through_segment(self, p: tuple[float, float], dp: float, q: tuple[float, float], dq: float) -> bool:
        """True if the movement p -> q (on opposite sides, signed distances ``dp`` and ``dq`` from the
        line) meets the line between its ends."""
        if dp == dq:
            return False
        (sx, sy), (ex, ey) = self.start_xy.tolist(), self.end_xy.tolist()
        k = dp / (dp - dq)
        hx, hy = p[0] + (q[0] - p[0]) * k, p[1] + (q[1] - p[1]) * k
        dx, dy = ex - sx, ey - sy
        t = ((hx - sx) * dx + (hy - sy) * dy) / (dx * dx + dy * dy)
        return 0.0 <= t <= 1.0

    def _stitch(self, xy: tuple[float, float], height: float, class_id: int) -> _TrackSide | None:
        """Take over the state of the nearest recently lost same-class track, or ``None``."""
        best, best_d = None, self.stitch_radius * max(height, 1.0)
        for tid, state in self._tracks.items():
            age = self._n_updates - state.last_update
            if age < 1 or age > self.stitch_max_updates or state.class_id != class_id:
                continue  # seen on this update (not lost), lost too long ago, or another class
            d = math.hypot(xy[0] - state.last_xy[0], xy[1] - state.last_xy[1])
            if d <= best_d:
                best, best_d = tid, d
        return None if best is None else self._tracks.pop(best)

    def distances(self, points_xy: np.ndarray) -> np.ndarray:
        """``(N,) float64`` signed distances of ``(N, 2)`` anchor points from this line (`side_of_line`)."""
        return side_of_line(points_xy, self.start_xy, self.end_xy)

    def update(self, detections: Detections) -> LineCrossings:
        """Update per-track sides with one frame and report crossings.

        Args:
            detections: tracked detections (``tracker_id`` set; rows with id < 0 are ignored).

        Returns:
            `LineCrossings` with ``(N,) bool`` masks aligned with ``detections``.

        Raises:
            InvalidInputError: ``detections.tracker_id`` is ``None``.
        """
        n = len(detections)
        crossed_in = np.zeros(n, dtype=bool)
        crossed_out = np.zeros(n, dtype=bool)
        if n and detections.tracker_id is None:
            raise InvalidInputError(f"line {self.name!r}: crossing detection needs tracked detections")
        if not n:
            self.update_rows([], [], [], [], [], [])
            return LineCrossings(crossed_in, crossed_out, self.in_count, self.out_count)
        assert detections.tracker_id is not None
        points = detections.anchor(self.anchor)
        rows_in, rows_out = self.update_rows(
            detections.tracker_id.tolist(),
            detections.class_id.tolist(),
            points[:, 0].tolist(),
            points[:, 1].tolist(),
            (detections.xyxy[:, 3] - detections.xyxy[:, 1]).tolist(),
            self.distances(points).tolist(),
        )
        crossed_in[rows_in] = True
        crossed_out[rows_out] = True
        return LineCrossings(crossed_in, crossed_out, self.in_count, self.out_count)

    def update_rows(
        self,
        tracker_id: Sequence[int],
        class_id: Sequence[int],
        x: Sequence[float],
        y: Sequence[float],
        height: Sequence[float],
        distance: Sequence[float],
        rows: range | None = None,
    ) -> tuple[list[int], list[int]]:
        """`update` given one frame's rows as Python scalars: track ids (rows with id < 0 ignored),
        class ids, anchor points, box heights and the anchors' `distances` from the line, at the
        positions ``rows`` (default: all); the positions whose track crossed in, and those that
        crossed out, in order."""
        self._n_updates += 1
        now = self._n_updates
        tracks = self._tracks
        crossed_in: list[int] = []
        crossed_out: list[int] = []
        band, in_sign = self.hysteresis_px, self._in_sign
        # known ids first, so a new id never takes over a track that is still detected
        order: Sequence[int] = range(len(tracker_id)) if rows is None else rows
        fresh = [i for i in order if tracker_id[i] not in tracks]
        if fresh:
            order = [i for i in order if tracker_id[i] in tracks] + fresh
        for i in order:
            tid = tracker_id[i]
            if tid < 0:
                continue
            xy = (x[i], y[i])
            state = tracks.get(tid)
            if state is None and self.stitch_radius > 0:
                state = self._stitch(xy, height[i], class_id[i])
                if state is not None:
                    tracks[tid] = state
            d = distance[i]
            side = 0 if abs(d) <= band or d == 0 else (1 if d > 0 else -1)
            if state is None:
                tracks[tid] = _TrackSide(side, xy, d, now, xy, class_id[i])
                continue
            state.last_update = now
            state.last_xy = xy
            if side == 0:
                continue  # inside the hysteresis band: keep the previous side
            if state.side not in (0, side) and self._passes_through_segment(state.point_xy, state.point_d, xy, d):
                if side == in_sign:
                    crossed_in.append(i)
                    self.in_count += 1
                else:
                    crossed_out.append(i)
                    self.out_count += 1
            state.side = side
            state.point_xy = xy
            state.point_d = d
        if now - self._oldest > self.forget_after_updates:  # some track may be stale: forget those
            for tid in [t for t, s in tracks.items() if now - s.last_update > self.forget_after_updates]:
                del tracks[tid]
            self._oldest = min((s.last_update for s in tracks.values()), default=now)
        return crossed_in, crossed_out

    def reset(self) -> None:
        """Forget every track and zero the counts."""
        self._tracks.clear()
        self.in_count = 0
        self.out_count = 0
        self._n_updates = 0
        self._oldest = 0

    def __repr__(self) -> str:
        return f"LineZone(name={self.name!r}, in={self.in_count}, out={self.out_count})"
