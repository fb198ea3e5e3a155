"""Shared machinery of the rules: the `Rule` protocol, time windows, per-track zone presence
with inertia, and the debounced event lifecycle (`_Episode`).

Debouncing and hysteresis, all in stream seconds from frame timestamps:

- *inertia*: a track counts as in the zone only after its bottom-centre has been inside for
  ``inertia`` frames (Frigate's ``inertia``). Its dwell is measured from the first of those
  frames (the *onset*), so inertia delays confirmation, not the start time.
- *gap tolerance* (``max_gap_s``): a track missing or outside for at most this long keeps its
  onset, so a 1-2 frame dropout neither ends nor restarts anything.
- *id-switch stitching* (``stitch_radius``): a new tracker id appearing where a track of the
  same class was lost within ``max_gap_s`` continues that track (see `PresenceTracker`), so a
  tracker id switch does not restart a per-track event.
- *end grace* (``end_grace_s``): an open event ends only once its condition has been false for
  longer than this; ``end_s`` is then the last moment it held.
- *cooldown* (``cooldown_s``): a new event of the same rule (and, for per-track rules, the same
  track) does not start until this long after the previous one ended.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time
from typing import Any, Protocol, runtime_checkable

import numpy as np

from campusguard.app.events.types import Event, EventPhase, RuleKind, event_id_for
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

__all__ = [
    "Rule",
    "RowsRule",
    "PictureRule",
    "TimeWindow",
    "TrackRows",
    "parse_time_windows",
    "in_time_windows",
    "ClassNames",
]

ClassNames = Mapping[int, str] | Sequence[str] | None

_WINDOW = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@runtime_checkable
class Rule(Protocol):
    """A stateful incident rule of one camera.

    ``update`` is called once per processed frame, in time order, with that frame's tracked
    detections; it returns the lifecycle updates (`Event`) that frame caused, possibly none.
    """

    name: str
    kind: RuleKind
    camera_id: str

    def update(
        self,
        timestamp_s: float,
        detections: Detections,
        frame_index: int,
        wall_time: datetime | None = None,
    ) -> list[Event]:
        """Advance the rule by one frame.

        Args:
            timestamp_s: frame capture time in seconds (stream clock, non-decreasing).
            detections: the frame's detections with ``tracker_id`` (rows with id < 0 ignored).
            frame_index: index of the frame in its stream.
            wall_time: wall-clock time of the frame; needed by rules with time windows.
        """
        ...

    def open_events(self) -> list[Event]:
        """Open events in their latest state (for overlays)."""
        ...

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End every open event (at shutdown or end of stream); returns the ``end`` updates."""
        ...


@runtime_checkable
class PictureRule(Rule, Protocol):
    """A rule that watches the camera's picture and its silence, not the objects (camera health).

    Its incidents are about the camera itself, so an outage does not end them as interrupted.
    """

    def observe(
        self, timestamp_s: float, frame_index: int, image: np.ndarray, wall_time: datetime | None = None
    ) -> list[Event]:
        """One frame's picture (``(H, W, 3)`` BGR or ``(H, W)`` grey ``uint8``): the updates it caused."""
        ...

    def tick(self, now_s: float, wall_time: datetime | None = None) -> list[Event]:
        """Time passing without frames (stream clock of a live camera): the updates it caused."""
        ...

    def snapshot_image(self, event: Event, image: np.ndarray | None) -> np.ndarray:
        """What the incident's snapshot shows, from the current frame (None: no frame)."""
        ...

    def status(self) -> Any:
        """What the console shows of the camera's state (camera health: a `HealthStatus`)."""
        ...

    def accept_view(self, by: str, zones: Sequence[str] = ()) -> bool:
        """Make the current view the camera's reference (``zones``: drawn on the old one); False
        when there is nothing to accept yet."""
        ...

    def clear_old_view_zones(self) -> bool:
        """Forget the zones `accept_view` recorded (they were saved again); whether there were any."""
        ...


class TrackRows:
    """Tracked rows as Python scalars, one list per field: what a rule's per-row work reads (on a
    frame's handful of rows NumPy's cost per call outweighs the work). Taken once per frame by the
    rules' `update`, or once for a whole recorded segment and sliced per frame by `campusguard
    replay` (`slice`: a view, the lists are shared): either way the same values. Read-only.

    Attributes:
        tracker_id: track ids (>= 0).
        class_id: class ids.
        x, y: the rule's anchor point (bottom-centre by default), pixels (float32 values).
        height: box heights, pixels (float32 values).
        distance: signed distance of the anchor from a line rule's line (`LineZone.distances`);
            None for zone rules.
        start, stop: the rows are positions ``start:stop`` of the lists (`positions`).
    """

    __slots__ = ("tracker_id", "class_id", "x", "y", "height", "distance", "start", "stop")

    def __init__(
        self,
        tracker_id: list[int],
        class_id: list[int],
        x: list[float],
        y: list[float],
        height: list[float],
        distance: list[float] | None = None,
        start: int = 0,
        stop: int | None = None,
    ) -> None:
        self.tracker_id = tracker_id
        self.class_id = class_id
        self.x = x
        self.y = y
        self.height = height
        self.distance = distance
        self.start = start
        self.stop = len(tracker_id) if stop is None else stop

    def __len__(self) -> int:
        return self.stop - self.start

    def positions(self) -> range:
        """The rows' positions in the lists, in order."""
        return range(self.start, self.stop)

    def slice(self, start: int, stop: int) -> TrackRows:
        """Rows ``start:stop`` of these (a frame's of a segment's), sharing the lists."""
        return TrackRows(
            self.tracker_id, self.class_id, self.x, self.y, self.height, self.distance,
            self.start + start, self.start + stop,
        )

    @classmethod
    def take(
        cls,
        detections: Detections,
        rows: np.ndarray,
        anchor: str = "bottom_center",
        *,
        anchors: np.ndarray | None = None,
        distance: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> TrackRows:
        """The tracked rows ``rows`` (indices, in order) of ``detections`` (any number of frames'):
        ``anchors``: every row's ``anchor`` point if computed already; ``distance``: the line's
        signed distance of anchor points (line rules)."""
        if detections.tracker_id is None:
            raise InvalidInputError("rules need tracked detections (tracker_id)")
        points = (detections.anchor(anchor) if anchors is None else anchors)[rows]
        xyxy = detections.xyxy[rows]
        return cls(
            detections.tracker_id[rows].tolist(),
            detections.class_id[rows].tolist(),
            points[:, 0].tolist(),
            points[:, 1].tolist(),
            (xyxy[:, 3] - xyxy[:, 1]).tolist(),
            None if distance is None else distance(points).tolist(),
        )


NO_ROWS = TrackRows([], [], [], [], [], [])
"""A frame without rows of interest (for any rule: its `distance` is the empty list)."""


@runtime_checkable
class RowsRule(Rule, Protocol):
    """A rule that looks only at some tracked rows of a frame (its classes, in its zone or any for a
    line), taken as `TrackRows`: its `update` is `update_rows` of `take_rows` of `rows_of_interest`,
    so `campusguard replay` takes a whole segment's rows of interest at once (NumPy over every row)
    and feeds the rule each frame's slice, skipping the frames without any while it `is_idle`."""

    def rows_of_interest(self, detections: Detections) -> np.ndarray | None:
        """``(N,) bool`` over any number of frames' rows: the rows `update` looks at; None: it looks
        at whole frames (`update` only: the fall rule)."""
        ...

    def take_rows(self, detections: Detections, rows: np.ndarray) -> TrackRows:
        """The rows ``rows`` (indices of rows of interest, any number of frames') as `TrackRows`."""
        ...

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`Rule.update` given the frame's rows of interest."""
        ...

    def is_idle(self) -> bool:
        """True when `update_rows` without rows would do nothing but note the time (a replay may skip it)."""
        ...


@dataclass(frozen=True)
class TimeWindow:
    """A daily wall-clock window ``[start, end)``; wraps midnight when ``end <= start``."""

    start: time
    end: time

    def contains(self, moment: datetime) -> bool:
        """True if the time of day of ``moment`` falls in the window."""
        t = moment.time().replace(tzinfo=None)
        if self.start < self.end:
            return self.start <= t < self.end
        return t >= self.start or t < self.end


def parse_time_windows(windows: Sequence[str | tuple[str, str]] | None, what: str) -> tuple[TimeWindow, ...]:
    """Parse ``["22:00-06:00", ("08:00", "09:30"), ...]`` into `TimeWindow` objects.

    ``24:00`` is accepted as an end (midnight at the end of the day).

    Raises:
        InvalidInputError: a window is not ``HH:MM-HH:MM`` with valid times, naming ``what``.
    """
    out = []
    for window in windows or ():
        text = window if isinstance(window, str) else "-".join(window)
        m = _WINDOW.match(str(text))
        if m is None:
            raise InvalidInputError(f"{what}: time window {text!r} is not HH:MM-HH:MM")
        h1, m1, h2, m2 = (int(g) for g in m.groups())
        if not (h1 < 24 and h2 <= 24 and m1 < 60 and m2 < 60) or (h2 == 24 and m2 != 0):
            raise InvalidInputError(f"{what}: time window {text!r} has an invalid time")
        end = time(0, 0) if h2 == 24 else time(h2, m2)
        if time(h1, m1) == end:
            raise InvalidInputError(f"{what}: time window {text!r} is empty")
        out.append(TimeWindow(time(h1, m1), end))
    return tuple(out)


def in_time_windows(windows: Sequence[TimeWindow], moment: datetime) -> bool:
    """True if there are no windows or ``moment`` is in any of them."""
    return not windows or any(w.contains(moment) for w in windows)


def of_classes(class_id: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``(N,) bool``: which of ``class_id`` are in ``wanted`` (a few ids; what `np.isin` answers, without
    its set-up cost, which dominates on a frame's handful of rows)."""
    if len(wanted) == 0:
        return np.zeros(len(class_id), dtype=bool)
    return (np.asarray(class_id)[:, None] == wanted[None, :]).any(axis=1)


def class_name(class_names: ClassNames, class_id: int) -> str | None:
    """Name of ``class_id`` from a mapping or sequence, or ``None`` when unknown."""
    if class_names is None:
        return None
    if isinstance(class_names, Mapping):
        return class_names.get(class_id)
    return class_names[class_id] if 0 <= class_id < len(class_names) else None


def check_non_negative(what: str, **values: float) -> None:
    """Raise `InvalidInputError` naming ``what`` and the argument if any value is < 0 or not finite."""
    for key, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise InvalidInputError(f"{what}: {key} must be a finite number >= 0, got {value}")


# per-track presence -------------------------------------------------------------------------
@dataclass(slots=True)
class TrackPresence:
    """Zone presence of one track (see module docstring for the semantics)."""

    onset_s: float  # first frame of the current in-zone run
    last_in_s: float  # last frame seen inside
    frames_in: int  # frames seen inside during the run
    class_id: int
    seen_now: bool = False  # inside on the latest frame
    confirmed: bool = False  # frames_in >= inertia
    last_xy: tuple[float, float] = (0.0, 0.0)  # anchor on the last frame seen, pixels
    history: list[tuple[float, float, float]] = field(default_factory=list)  # (t, x, y) anchors

    def dwell_s(self, now_s: float) -> float:
        """Seconds since onset."""
        return now_s - self.onset_s


class PresenceTracker:
    """Per-track zone presence with inertia, gap tolerance and id-switch stitching, for one zone.

    Id-switch stitching: trackers lose an object now and then (a missed frame while it changes
    speed) and give it a new id. A track id new to this zone inherits the presence (onset, dwell,
    history) of a track of the same class lost within ``max_gap_s`` whose last anchor lies within
    ``stitch_radius`` x the new box height; `renamed` reports it so rules can carry their own
    per-track state over.

    Args:
        zone: the polygon.
        class_ids: classes that count, or ``None`` for every class.
        inertia: frames inside before a track is confirmed (>= 1).
        max_gap_s: seconds a track may be missing or outside without losing its onset.
        anchor: box anchor tested against the zone.
        history_s: seconds of anchor history kept per track (0 to keep none).
        stitch_radius: id-switch stitching distance in box heights (0 disables).

    Attributes:
        tracks: ``{tracker_id: TrackPresence}`` of tracks inside or lost within ``max_gap_s``.
        renamed: ``{new_id: old_id}`` stitched on the latest update.
    """

    def __init__(
        self,
        zone: PolygonZone,
        class_ids: Collection[int] | None,
        inertia: int,
        max_gap_s: float,
        anchor: str = "bottom_center",
        history_s: float = 0.0,
        stitch_radius: float = 0.5,
    ) -> None:
        self.zone = zone
        self.class_ids = None if class_ids is None else frozenset(int(c) for c in class_ids)
        self._class_ids = None if self.class_ids is None else np.asarray(sorted(self.class_ids), dtype=np.int64)
        self.inertia = inertia
        self.max_gap_s = max_gap_s
        self.anchor = anchor
        self.history_s = history_s
        self.stitch_radius = stitch_radius
        self.tracks: dict[int, TrackPresence] = {}
        self.renamed: dict[int, int] = {}
        self._seen: list[TrackPresence] = []  # the tracks seen on the latest frame (``seen_now``)

    def _stitch(self, timestamp_s: float, class_id: int, x: float, y: float, height: float) -> int | None:
        """Id of the nearest lost track this new detection continues, or ``None``."""
        best, best_d = None, self.stitch_radius * max(height, 1.0)
        for tid, p in self.tracks.items():
            if p.seen_now or p.class_id != class_id or timestamp_s - p.last_in_s > self.max_gap_s:
                continue
            if p.last_in_s >= timestamp_s:
                continue  # seen on this very frame: not lost
            d = math.hypot(x - p.last_xy[0], y - p.last_xy[1])
            if d <= best_d:
                best, best_d = tid, d
        return best

    def rows_inside(self, detections: Detections, anchors: np.ndarray | None = None) -> np.ndarray:
        """``(N,) bool``: the tracked rows of the watched classes whose anchor is in the zone: the only
        rows `update` looks at (any number of frames' rows at once); ``anchors``: the rows' anchor
        points if computed already."""
        if not len(detections):
            return np.zeros(0, dtype=bool)
        if detections.tracker_id is None:
            raise InvalidInputError(f"zone {self.zone.name!r}: rules need tracked detections (tracker_id)")
        if anchors is None:
            anchors = detections.anchor(self.anchor)
        inside = self.zone.contains(anchors)
        if self._class_ids is not None:
            inside &= of_classes(detections.class_id, self._class_ids)
        return inside & (detections.tracker_id >= 0)

    def rows_of(self, detections: Detections) -> TrackRows:
        """The rows of one frame `update_rows` looks at (`rows_inside`), as `TrackRows`."""
        if not len(detections):
            return NO_ROWS
        anchors = detections.anchor(self.anchor)
        inside = np.flatnonzero(self.rows_inside(detections, anchors))
        return TrackRows.take(detections, inside, self.anchor, anchors=anchors)

    def update(self, timestamp_s: float, detections: Detections) -> dict[int, TrackPresence]:
        """Update with one frame; return the tracks confirmed and inside on this frame."""
        return self.update_rows(timestamp_s, self.rows_of(detections))

    def update_rows(self, timestamp_s: float, rows: TrackRows) -> dict[int, TrackPresence]:
        """`update` given the frame's rows inside (`rows_of`, or a replay's slice of a segment's)."""
        if self.renamed:
            self.renamed = {}
        tracks = self.tracks
        for p in self._seen:
            p.seen_now = False
        seen: list[TrackPresence] = []
        max_gap_s = self.max_gap_s
        if rows.stop > rows.start:
            ids, xs, ys = rows.tracker_id, rows.x, rows.y
            # known ids first, so a new id never takes over a track that is still detected
            order: Sequence[int] = rows.positions()
            fresh = [i for i in order if ids[i] not in tracks]
            if fresh:
                order = [i for i in order if ids[i] in tracks] + fresh
            for i in order:
                tid = ids[i]
                cid = rows.class_id[i]
                known = tracks.get(tid)
                if known is None and self.stitch_radius > 0:
                    old = self._stitch(timestamp_s, cid, xs[i], ys[i], rows.height[i])
                    if old is not None:
                        known = tracks.pop(old)
                        tracks[tid] = known
                        self.renamed[tid] = old
                if known is None or timestamp_s - known.last_in_s > max_gap_s:
                    known = TrackPresence(timestamp_s, timestamp_s, 0, cid)
                    tracks[tid] = known
                p = known
                if p.seen_now:
                    continue  # the same id twice in one frame: count it once
                p.frames_in += 1
                p.last_in_s = timestamp_s
                p.seen_now = True
                seen.append(p)
                p.class_id = cid
                p.last_xy = (xs[i], ys[i])
                p.confirmed = p.confirmed or p.frames_in >= self.inertia
                if self.history_s > 0:
                    p.history.append((timestamp_s, xs[i], ys[i]))
                    cutoff = timestamp_s - self.history_s
                    while len(p.history) > 1 and p.history[1][0] <= cutoff:
                        p.history.pop(0)
        self._seen = seen
        present: dict[int, TrackPresence] = {}
        gone: list[int] = []
        for tid, p in tracks.items():
            if timestamp_s - p.last_in_s > max_gap_s:
                gone.append(tid)
            elif p.seen_now and p.confirmed:
                present[tid] = p
        for tid in gone:
            del tracks[tid]
        return present


# event lifecycle ----------------------------------------------------------------------------
class Episode:
    """Debounced lifecycle of one incident stream (one per rule, or per track for per-track rules).

    Feed `step` once per frame with whether the condition holds; it returns the `Event`
    updates to emit. ``update`` events (new objects joined, a higher count) are emitted at most
    once per ``update_interval_s``, so a long busy incident does not flood the store and the
    sinks; events list at most ``max_ids`` tracker ids (the end event then gives the total
    in ``details["n_objects"]``). Each update's ``sequence`` is one more than the previous one's
    (``start`` 0, ``end`` last), so a re-run of the same frames numbers them the same. ``stream_key`` goes into the event ids (`event_id_for`): the
    recording a scanned file's events come from; empty for a live camera.
    """

    def __init__(
        self,
        *,
        camera_id: str,
        rule_name: str,
        rule_kind: RuleKind,
        zone: str,
        end_grace_s: float,
        cooldown_s: float,
        class_names: ClassNames = None,
        update_interval_s: float = 2.0,
        max_ids: int = 100,
        stream_key: str = "",
    ) -> None:
        self.camera_id = camera_id
        self.stream_key = stream_key
        self.rule_name = rule_name
        self.rule_kind = rule_kind
        self.zone = zone
        self.end_grace_s = end_grace_s
        self.cooldown_s = cooldown_s
        self.class_names = class_names
        self.update_interval_s = update_interval_s
        self.max_ids = max_ids
        self.current: Event | None = None
        self.last_emit_s: float | None = None
        self.max_count: int | None = None
        self.last_active_s: float | None = None
        self.last_active_frame: int | None = None
        self.last_active_wall: datetime | None = None
        self.last_end_s: float | None = None
        self.active_now = False  # the condition held on the latest frame
        self.seen: dict[int, int] = {}  # tracker_id -> class_id of every object in the open event
        self._settled = False  # `_pending_changes` found none, and nothing it reads has changed since

    @property
    def is_open(self) -> bool:
        return self.current is not None

    def _emit(self, phase: EventPhase, **changes: object) -> Event:
        assert self.current is not None
        fields = {**self.current.__dict__, **changes, "phase": phase, "sequence": self.current.sequence + 1}
        self.current = Event(**fields)
        return self.current

    def _objects(self, objects: Mapping[int, int]) -> dict[str, tuple]:
        tids = tuple(sorted(objects)[: self.max_ids])
        cids = tuple(sorted(set(objects.values())))
        names = tuple(n for n in (class_name(self.class_names, c) for c in cids) if n is not None)
        return {"tracker_ids": tids, "class_ids": cids, "class_names": names}

    def step(
        self,
        timestamp_s: float,
        frame_index: int,
        wall_time: datetime | None,
        active: bool,
        objects: Mapping[int, int] | None = None,
        onset_s: float | None = None,
        count: int | None = None,
        details: dict | None = None,
    ) -> list[Event]:
        """Advance one frame.

        Args:
            timestamp_s: frame time, seconds.
            frame_index: frame index.
            wall_time: wall-clock time of the frame, if known.
            active: whether the rule's condition holds on this frame.
            objects: ``{tracker_id: class_id}`` of the objects making it hold.
            onset_s: when the condition first became true (for a new event).
            count: object count to report.
            details: extras merged into the event's ``details``.
        """
        out: list[Event] = []
        objects = objects or {}
        self.active_now = active
        if active:
            self.last_active_s, self.last_active_frame, self.last_active_wall = timestamp_s, frame_index, wall_time
            if self.current is None:
                if self.last_end_s is not None and timestamp_s - self.last_end_s < self.cooldown_s:
                    return out
                objs = self._objects(objects)
                self.current = Event(
                    event_id=event_id_for(
                        camera_id=self.camera_id,
                        rule_name=self.rule_name,
                        zone=self.zone,
                        start_frame=frame_index,
                        start_s=timestamp_s,
                        tracker_ids=objs["tracker_ids"],
                        count=count,
                        stream_key=self.stream_key,
                    ),
                    phase="start",
                    camera_id=self.camera_id,
                    rule_name=self.rule_name,
                    rule_kind=self.rule_kind,
                    zone=self.zone,
                    start_s=float(timestamp_s),
                    onset_s=float(onset_s if onset_s is not None else timestamp_s),
                    start_frame=int(frame_index),
                    count=count,
                    started_at=wall_time,
                    details=dict(details or {}),
                    **objs,  # type: ignore[arg-type]
                )
                self.seen = dict(objects)
                self.max_count = count
                self._settled = False
                self.last_emit_s = timestamp_s
                out.append(self.current)
                return out
            seen = self.seen
            for tid, cid in objects.items():
                if tid not in seen or seen[tid] != cid:
                    seen[tid] = cid
                    self._settled = False
            if count is not None:
                most = max(self.max_count or 0, count)
                if most != self.max_count:
                    self.max_count = most
                    self._settled = False
            if not self._settled and (self.last_emit_s is None or timestamp_s - self.last_emit_s >= self.update_interval_s):
                changes = self._pending_changes()
                if changes:
                    if details:
                        changes["details"] = {**self.current.details, **details}
                    out.append(self._emit("update", **changes))
                    self.last_emit_s = timestamp_s
                else:
                    self._settled = True  # the same answer until the objects or the count change
            return out
        if (
            self.current is not None
            and self.last_active_s is not None
            and timestamp_s - self.last_active_s > self.end_grace_s
        ):
            out.append(self._end())
        return out

    def _pending_changes(self) -> dict[str, object]:
        """Fields of the open event that the objects and counts seen since differ from."""
        assert self.current is not None
        changes: dict[str, object] = {
            k: v for k, v in self._objects(self.seen).items() if getattr(self.current, k) != v
        }
        if self.max_count is not None and (self.current.count is None or self.max_count > self.current.count):
            changes["count"] = self.max_count
        return changes

    def _end(self, end_s: float | None = None, end_frame: int | None = None, ended_at: datetime | None = None) -> Event:
        assert self.current is not None
        final: dict[str, object] = self._pending_changes()
        if len(self.seen) > self.max_ids:
            final["details"] = {**self.current.details, "n_objects": len(self.seen)}
        ev = self._emit(
            "end",
            **final,
            end_s=float(end_s if end_s is not None else self.last_active_s),  # type: ignore[arg-type]
            end_frame=end_frame if end_s is not None else self.last_active_frame,
            ended_at=ended_at if end_s is not None else self.last_active_wall,
        )
        self.current = None
        self.last_end_s = ev.end_s
        return ev

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End the open event, if any: at ``timestamp_s`` if the condition held on the latest
        frame (still ongoing), else at the last moment it held."""
        if self.current is None:
            return []
        if self.active_now:
            assert self.last_active_s is not None
            return [self._end(max(timestamp_s, self.last_active_s), self.last_active_frame, wall_time)]
        return [self._end()]
