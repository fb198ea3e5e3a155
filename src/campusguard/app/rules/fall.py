"""`FallRule`: a person who is down for ``min_seconds`` in a zone (or anywhere) raises a medical incident.

Two signals say that a tracked person is down on a frame:

- ``detector-class``: the detector has a fallen class and says so on the detection
  (``Detections.data["fallen"]``, as the ``fall-yolov8s`` alias gives);
- ``track-shape``: for detectors without one, from the track's box over time: the track was
  seen upright (height >= ``upright_aspect`` x width) earlier, its box is now much wider than
  tall (width >= ``down_aspect`` x height), and it is not moving (its anchor stayed within
  ``max_movement`` x frame width over ``stationary_window_s``, as `FireLaneRule` measures it).

``signal="auto"`` (the default) uses the detector's class on frames whose detections carry
``data["fallen"]`` and the track's shape otherwise. Every event says which one fired in
``details["signal"]``.

Semantics match `campusguard.data.synth.incidents` (``fall``): ``start_s`` is the first frame
time at which the person has been down for ``min_seconds``, ``end_s`` the last frame time at
which they were down. One event per person; inertia, gap tolerance, id-switch stitching, end
grace and cooldown as the other zone rules (`campusguard.app.rules.base`).

One person, one incident: a detector sometimes gives a lying person two boxes (the whole body
and a part of it) that the tracker follows as two tracks. A track whose box lies mostly (at
least ``duplicate_overlap`` of the smaller box's area) on the box of a person already down
for longer, or already in an open fall incident, is that same person and raises nothing of its own.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from campusguard.app.events.types import Event, RuleKind
from campusguard.app.infra.configmodel import NameText
from campusguard.app.rules.base import TrackRows
from campusguard.app.rules.spec import RuleContext, RuleEntry, ZoneRuleConfigBase
from campusguard.app.rules.zone_rules import FireLaneRule
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

__all__ = ["FallRule", "FallSignal", "FALLEN_KEY", "SIGNALS", "whole_frame_zone", "FALL"]

FallSignal = Literal["auto", "detector-class", "track-shape"]
SIGNALS: tuple[str, ...] = ("auto", "detector-class", "track-shape")
FALLEN_KEY = "fallen"  # the per-detection bool array a detector with a fallen class puts in ``data``


def _overlap_of_smaller(a: np.ndarray, b: np.ndarray) -> float:
    """Intersection of two xyxy boxes over the smaller one's area (1.0: one lies wholly on the other)."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return float(iw * ih / max(smaller, 1e-6))


def whole_frame_zone(resolution_wh: tuple[int, int], name: str = "frame") -> PolygonZone:
    """A zone covering the whole frame, for a fall rule that watches anywhere."""
    w, h = resolution_wh
    return PolygonZone([(0, 0), (w, 0), (w, h), (0, h)], name, resolution_wh=resolution_wh)


class FallRuleConfig(ZoneRuleConfigBase):
    """A person down (fallen) for at least T seconds, in a zone or anywhere: a medical incident."""

    kind: Literal["fall"] = Field("fall", title="Kind", description="Rule kind.")
    zone_optional: ClassVar[bool] = True
    zone: NameText | None = Field(
        None, title="Zone", description="Name of the zone the rule watches; none watches the whole frame."
    )
    min_duration_s: float = Field(
        3.0, ge=0, le=3600, title="Minimum duration", description="Seconds a person must be down before the event starts."
    )
    signal: Literal["auto", "detector-class", "track-shape"] = Field(
        "auto",
        title="Signal",
        description="What says a person is down: the detector's fallen class (`detector-class`, e.g. model "
        "fall-yolov8s), the track's shape over time (`track-shape`: upright before, then a box much wider "
        "than tall, not moving), or `auto`: the detector's class where the model has one, else the shape.",
    )
    down_aspect: float = Field(
        1.2, gt=0, le=20, title="Down aspect", description="track-shape: box width / height at or above which a person is down."
    )
    upright_aspect: float = Field(
        1.5,
        gt=0,
        le=20,
        title="Upright aspect",
        description="track-shape: box height / width at or above which a person is upright (needed before a fall).",
    )
    max_movement: float = Field(
        0.02,
        ge=0,
        le=1,
        title="Stationary movement",
        description="track-shape: not moving means the anchor moved less than this fraction of the frame width over `stationary_window_s`.",
    )
    stationary_window_s: float = Field(
        1.0, gt=0, le=600, title="Stationary window", description="track-shape: seconds over which movement is measured."
    )
    duplicate_overlap: float = Field(
        0.5,
        gt=0,
        le=1,
        title="Duplicate overlap",
        description="A down person's track whose box lies at least this share of its area on the box of a person "
        "down for longer is that same person (two boxes on one body): it raises no incident of its own.",
    )


class FallRule(FireLaneRule):
    """A person down (fallen) for ``min_seconds`` inside the zone; one medical incident per person.

    Args:
        signal: ``auto``, ``detector-class`` or ``track-shape`` (see the module docstring).
        down_aspect: track-shape: box width / height at or above which a person is down (> 0).
        upright_aspect: track-shape: box height / width at or above which a person is upright,
            which the track must have been before it counts as fallen (> 0).
        class_ids: defaults to ``(0,)`` (COCO person).
        duplicate_overlap: share (0..1] of the smaller box's area lying on another down person's
            box at or above which a track counts as that person (see the module docstring).
        max_movement, max_movement_px, stationary_window_s: track-shape's "not moving" test, as
            `FireLaneRule`.
        **kwargs: as `campusguard.app.rules.zone_rules._ZoneRule` (``min_seconds`` is the
            configured ``min_duration_s``).
    """

    kind: RuleKind = "fall"

    def __init__(
        self,
        *,
        signal: FallSignal = "auto",
        down_aspect: float = 1.2,
        upright_aspect: float = 1.5,
        class_ids: Collection[int] | None = (0,),
        duplicate_overlap: float = 0.5,
        **kwargs: Any,
    ) -> None:
        super().__init__(class_ids=class_ids, per_track=True, **kwargs)
        what = f"rule {self.name!r}"
        if signal not in SIGNALS:
            raise InvalidInputError(f"{what}: signal must be one of {', '.join(SIGNALS)}, got {signal!r}")
        for key, value in (("down_aspect", down_aspect), ("upright_aspect", upright_aspect)):
            if not (np.isfinite(value) and value > 0):
                raise InvalidInputError(f"{what}: {key} must be a finite number > 0, got {value}")
        if not (np.isfinite(duplicate_overlap) and 0 < duplicate_overlap <= 1):
            raise InvalidInputError(f"{what}: duplicate_overlap must be in (0, 1], got {duplicate_overlap}")
        self.duplicate_overlap = float(duplicate_overlap)
        self._box: dict[int, np.ndarray] = {}  # tracker id -> its box on the latest frame it was seen
        self.signal: FallSignal = signal
        self.down_aspect = float(down_aspect)
        self.upright_aspect = float(upright_aspect)
        self._was_upright: set[int] = set()
        self._down_onset: dict[int, float] = {}
        self._down_last: dict[int, float] = {}
        self._fired_by: dict[int, str] = {}

    def rows_of_interest(self, detections: Detections) -> np.ndarray | None:
        """None: every row (a track seen upright anywhere counts later; see `FireLaneRule.rows_of_interest`)."""
        return None

    def is_idle(self) -> bool:
        return False  # it remembers every track's shape

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Not for this rule: it reads whole frames (`rows_of_interest` is None); use `update`."""
        raise InvalidInputError(f"rule {self.name!r} reads whole frames: feed it with update(), not update_rows()")

    def _signal_for(self, detections: Detections) -> str:
        if self.signal != "auto":
            return self.signal
        return "detector-class" if FALLEN_KEY in detections.data else "track-shape"

    def _down_rows(self, detections: Detections, signal: str) -> dict[int, bool]:
        """``{tracker_id: down on this frame}`` for the tracked rows; records upright tracks."""
        if detections.tracker_id is None or not len(detections):
            return {}
        wh = np.clip(detections.xyxy[:, 2:] - detections.xyxy[:, :2], 1e-6, None)
        if signal == "detector-class":
            if FALLEN_KEY not in detections.data:
                raise InvalidInputError(
                    f"rule {self.name!r}: signal 'detector-class' needs a detector with a fallen class "
                    f"(Detections.data[{FALLEN_KEY!r}], e.g. model fall-yolov8s); use signal 'auto' or 'track-shape'"
                )
            down = np.asarray(detections.data[FALLEN_KEY], bool)
        else:
            down = wh[:, 0] >= self.down_aspect * wh[:, 1]
        upright = wh[:, 1] >= self.upright_aspect * wh[:, 0]
        out: dict[int, bool] = {}
        for row, (tid, is_down, is_up) in enumerate(
            zip(detections.tracker_id.tolist(), down.tolist(), upright.tolist(), strict=True)
        ):
            if tid < 0:
                continue
            self._box[tid] = detections.xyxy[row]
            if is_up and not is_down:
                self._was_upright.add(tid)
            out[tid] = out.get(tid, False) or is_down
        return out

    def _carry_renames(self) -> None:
        """An id switch (stitched by the presence tracker) keeps the track's fall state."""
        for new, old in self.presence.renamed.items():
            if old in self._was_upright:
                self._was_upright.add(new)
            for state in (self._down_onset, self._down_last, self._fired_by, self._box):
                if old in state:
                    state[new] = state.pop(old)  # type: ignore[assignment]

    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Advance one frame; see `campusguard.app.rules.base.Rule.update`."""
        armed = self._check_time(timestamp_s, wall_time)
        signal = self._signal_for(detections)
        present = self.presence.update(timestamp_s, detections)
        self._carry_renames()
        down_now = self._down_rows(detections, signal)
        for tid, p in present.items():
            fallen = down_now.get(tid, False)
            if signal == "track-shape":
                fallen = fallen and tid in self._was_upright and self._is_stationary(p, timestamp_s)
            if not fallen:
                continue
            last = self._down_last.get(tid)
            if last is None or timestamp_s - last > self.max_gap_s:
                self._down_onset[tid] = timestamp_s
                self._fired_by[tid] = signal
            self._down_last[tid] = timestamp_s
        for tid in [t for t, last in self._down_last.items() if timestamp_s - last > self.max_gap_s]:
            del self._down_last[tid], self._down_onset[tid]
            self._fired_by.pop(tid, None)
        if len(self._was_upright) > 4096:  # bounded memory on long streams: keep the tracks still around
            self._was_upright &= set(self.presence.tracks) | set(down_now)
        for tid in [t for t in self._box if t not in self.presence.tracks and t not in down_now]:
            del self._box[tid]
        qualifying = {
            t: (p.class_id, self._down_onset[t])
            for t, p in present.items()
            if self._down_last.get(t) == timestamp_s and timestamp_s - self._down_onset[t] >= self.min_seconds
        }
        for tid in [t for t in qualifying if self._duplicate_of(t) is not None]:
            del qualifying[tid]
        return self._step(timestamp_s, frame_index, wall_time, armed, qualifying)

    def _duplicate_of(self, tid: int) -> int | None:
        """Another track, down for longer or already in an open fall incident, whose box ``tid``'s
        box lies mostly on: the same person (``tid`` has no open incident of its own)."""
        own = self.track_episodes.get(tid)
        if own is not None and own.is_open:
            return None
        box = self._box.get(tid)
        if box is None:
            return None
        onset = self._down_onset[tid]
        for other, other_box in self._box.items():
            if other == tid or other not in self._down_onset:
                continue
            episode = self.track_episodes.get(other)
            firing = episode is not None and episode.is_open
            if not firing and (self._down_onset[other], other) >= (onset, tid):
                continue  # the other one is the later (or the same age): it defers to this one
            if _overlap_of_smaller(box, other_box) >= self.duplicate_overlap:
                return other
        return None

    def _event_details(self, tracker_id: int) -> dict[str, object]:
        return {"signal": self._fired_by.get(tracker_id, self.signal), "medical": True}


def _build_fall(cfg: FallRuleConfig, ctx: RuleContext) -> FallRule:
    whole_frame = whole_frame_zone(ctx.resolution_wh) if cfg.zone is None else None  # no zone: anywhere
    return FallRule(
        min_seconds=cfg.min_duration_s,
        signal=cfg.signal,
        down_aspect=cfg.down_aspect,
        upright_aspect=cfg.upright_aspect,
        max_movement=cfg.max_movement,
        stationary_window_s=cfg.stationary_window_s,
        duplicate_overlap=cfg.duplicate_overlap,
        **ctx.zone_rule_kwargs(cfg, whole_frame),
    )


FALL = RuleEntry(FallRuleConfig, FallRule, _build_fall, "Fall", example={"min_duration_s": 3}, order=60)
