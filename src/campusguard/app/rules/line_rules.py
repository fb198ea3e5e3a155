"""`LineCrossingRule`: an instantaneous event each time a track crosses a line in a direction."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import ClassVar, Literal

import numpy as np
from pydantic import Field

from campusguard.app.events.types import Event, RuleKind, event_id_for
from campusguard.app.infra.configmodel import NameText
from campusguard.app.rules.base import (
    ClassNames,
    TrackRows,
    check_non_negative,
    class_name,
    in_time_windows,
    of_classes,
    parse_time_windows,
)
from campusguard.app.rules.spec import RuleConfigBase, RuleContext, RuleEntry
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones import LineZone

__all__ = ["LineCrossingRule", "LINE_CROSSING"]

Direction = Literal["in", "out", "both"]


class LineCrossingRuleConfig(RuleConfigBase):
    """A tracked object crossing a line in a given direction; counts kept per direction."""

    kind: Literal["line_crossing"] = Field("line_crossing", title="Kind", description="Rule kind.")
    watches_line: ClassVar[bool] = True
    line: NameText = Field("line", title="Line", description="Name of the line (a line of the same camera).")
    direction: Literal["in", "out", "both"] = Field(
        "in", title="Direction", description="Crossing direction that raises an event."
    )
    hysteresis_px: float = Field(
        0.0,
        ge=0,
        le=1000,
        title="Hysteresis",
        description="Anchors closer than this many pixels to the line keep their previous side (debounces jitter).",
    )

    def target(self) -> str | None:
        return self.line


class LineCrossingRule:
    """Events for crossings of a `LineZone` by tracks of ``class_ids``.

    A crossing is when the bottom-centre passes from one side of the line segment to the other
    (into the line's ``in_side`` for ``"in"``); the line's ``hysteresis_px`` debounces jitter.
    Each crossing is one instantaneous event: ``phase="start"`` with ``end_s == start_s``,
    ``direction``, and ``count`` = crossings in that direction so far (of the chosen classes).

    Args:
        name: rule name.
        camera_id: camera id.
        line: the `LineZone` (its state belongs to this rule: do not share it).
        direction: ``"in"``, ``"out"`` or ``"both"``.
        class_ids: classes counted, or ``None`` for all (default ``(0,)``, person).
        cooldown_s: minimum seconds between two events of this rule; crossings inside the
            cooldown are still counted.
        time_windows: daily wall-clock windows in which the rule raises events.
        class_names: names of class ids, copied onto events.
        stream_key: put into the event ids: the recording (a scanned file); empty for a live camera.
    """

    kind: RuleKind = "line_crossing"

    def __init__(
        self,
        *,
        name: str,
        camera_id: str,
        line: LineZone,
        direction: Direction = "in",
        class_ids: Collection[int] | None = (0,),
        cooldown_s: float = 0.0,
        time_windows: Sequence[str | tuple[str, str]] | None = None,
        class_names: ClassNames = None,
        stream_key: str = "",
    ) -> None:
        what = f"rule {name!r}"
        if direction not in ("in", "out", "both"):
            raise InvalidInputError(f"{what}: direction must be 'in', 'out' or 'both', got {direction!r}")
        check_non_negative(what, cooldown_s=cooldown_s)
        if class_ids is not None and len(class_ids) == 0:
            raise InvalidInputError(f"{what}: class_ids is empty; use None for every class")
        self.name = name
        self.camera_id = camera_id
        self.line = line
        self.direction: Direction = direction
        self.class_ids = None if class_ids is None else tuple(sorted(int(c) for c in class_ids))
        self._class_ids = None if self.class_ids is None else np.asarray(self.class_ids, dtype=np.int64)
        self.cooldown_s = float(cooldown_s)
        self.time_windows = parse_time_windows(time_windows, what)
        self.class_names = class_names
        self.stream_key = stream_key
        self._last_event_s: float | None = None
        self._last_t: float | None = None

    @property
    def in_count(self) -> int:
        """Crossings into ``in_side`` so far."""
        return self.line.in_count

    @property
    def out_count(self) -> int:
        """Crossings out of ``in_side`` so far."""
        return self.line.out_count

    # its rows (`campusguard.app.rules.base.RowsRule`; `campusguard replay` takes a segment's at once) ----
    def rows_of_interest(self, detections: Detections) -> np.ndarray:
        """``(N,) bool`` over any number of frames' rows: the tracked rows of its classes, anywhere
        (a track's side of the line is followed everywhere)."""
        if len(detections) and detections.tracker_id is None:
            raise InvalidInputError(f"line {self.line.name!r}: crossing detection needs tracked detections")
        if not len(detections):
            return np.zeros(0, dtype=bool)
        assert detections.tracker_id is not None
        tracked = detections.tracker_id >= 0
        return tracked if self._class_ids is None else tracked & of_classes(detections.class_id, self._class_ids)

    def take_rows(self, detections: Detections, rows: np.ndarray) -> TrackRows:
        """The rows ``rows`` (of interest) of ``detections`` as `TrackRows`, with their distance from the line."""
        return TrackRows.take(detections, rows, self.line.anchor, distance=self.line.distances)

    def is_idle(self) -> bool:
        """Never: the line counts every frame (how long a lost track is remembered)."""
        return False

    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Advance one frame; returns one event per counted crossing (outside the cooldown)."""
        rows = self.rows_of_interest(detections)
        return self.update_rows(timestamp_s, self.take_rows(detections, np.flatnonzero(rows)), frame_index, wall_time)

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's tracked rows of its classes (`rows_of_interest`)."""
        if self._last_t is not None and timestamp_s < self._last_t:
            raise InvalidInputError(
                f"rule {self.name!r}: timestamp {timestamp_s} s is earlier than the previous {self._last_t} s"
            )
        self._last_t = timestamp_s
        if self.time_windows and wall_time is None:
            raise InvalidInputError(f"rule {self.name!r} has time windows but update() got no wall_time")
        if rows.distance is None:
            raise InvalidInputError(f"rule {self.name!r}: its rows need their distance from the line (take_rows)")
        crossed_in, crossed_out = self.line.update_rows(
            rows.tracker_id, rows.class_id, rows.x, rows.y, rows.height, rows.distance, rows.positions()
        )
        if not crossed_in and not crossed_out:
            return []
        if wall_time is not None and not in_time_windows(self.time_windows, wall_time):
            return []
        counts = {"in_count": self.line.in_count, "out_count": self.line.out_count}
        crossings: list[tuple[Literal["in", "out"], list[int], int]] = []
        if self.direction in ("in", "both"):
            crossings.append(("in", crossed_in, self.line.in_count))
        if self.direction in ("out", "both"):
            crossings.append(("out", crossed_out, self.line.out_count))
        out: list[Event] = []
        for direction, crossed, total in crossings:
            for k, i in enumerate(crossed):
                count = total - len(crossed) + k + 1  # several crossings on one frame are numbered in row order
                if self._last_event_s is not None and timestamp_s - self._last_event_s < self.cooldown_s:
                    continue
                tid, cid = rows.tracker_id[i], rows.class_id[i]
                name = class_name(self.class_names, cid)
                out.append(
                    Event(
                        event_id=event_id_for(
                            camera_id=self.camera_id,
                            rule_name=self.name,
                            zone=self.line.name,
                            start_frame=frame_index,
                            start_s=timestamp_s,
                            tracker_ids=(tid,),
                            direction=direction,
                            count=int(count),
                            stream_key=self.stream_key,
                        ),
                        phase="start",
                        camera_id=self.camera_id,
                        rule_name=self.name,
                        rule_kind=self.kind,
                        zone=self.line.name,
                        start_s=float(timestamp_s),
                        end_s=float(timestamp_s),
                        onset_s=float(timestamp_s),
                        start_frame=int(frame_index),
                        end_frame=int(frame_index),
                        tracker_ids=(tid,),
                        class_ids=(cid,),
                        class_names=() if name is None else (name,),
                        count=int(count),
                        direction=direction,
                        started_at=wall_time,
                        ended_at=wall_time,
                        details=dict(counts),
                    )
                )
                self._last_event_s = timestamp_s
        return out

    def open_events(self) -> list[Event]:
        """Always empty: crossings are instantaneous."""
        return []

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """Nothing to end: crossings are instantaneous."""
        return []


def _build_line_crossing(cfg: LineCrossingRuleConfig, ctx: RuleContext) -> LineCrossingRule:
    line = ctx.lines[cfg.line].build(ctx.resolution_wh, hysteresis_px=cfg.hysteresis_px)
    return LineCrossingRule(line=line, direction=cfg.direction, **ctx.rule_kwargs(cfg))


LINE_CROSSING = RuleEntry(
    LineCrossingRuleConfig,
    LineCrossingRule,
    _build_line_crossing,
    "Line crossing",
    has_end=False,
    example={"line": "line", "direction": "in"},
    order=50,
)
