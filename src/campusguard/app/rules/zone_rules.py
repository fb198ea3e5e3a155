"""Zone rules: `IntrusionRule`, `CrowdRule`, `FireLaneRule`, `LoiteringRule`.

Each is one stateful object per camera and zone. They test the bottom-centre of each box,
debounce with inertia, gap tolerance, end grace and cooldown (see `campusguard.app.rules.base`),
and measure every duration on the frame timestamps passed in.

Semantics (matching `campusguard.data.synth`'s ground truth, `campusguard.data.synth.incidents`):
``start_s`` is the first frame time at which the condition has held for ``min_seconds``,
``end_s`` the last frame time at which it held.

- intrusion: a track of the chosen classes has been in the zone for ``min_seconds`` (inside
  the time windows, if any). One event per track (``per_track=True``, the default, as the
  ground truth counts them) or one per zone episode that later intruders join.
- crowd: at least ``min_count`` tracks in the zone continuously for ``min_seconds``. One event
  per zone episode.
- fire_lane: a track of the chosen classes (vehicles by default) in the zone and stationary
  (its anchor moved less than ``max_movement`` x frame width over the last
  ``stationary_window_s``) for ``min_seconds``, counted from the first frame it is stationary.
  One event per track by default, or per zone episode.
- loitering: one track in the zone for ``min_seconds``. One event per track.

Per-track rules apply the cooldown per track.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import Field

from campusguard.app.events.types import Event, RuleKind
from campusguard.app.rules.base import (
    ClassNames,
    Episode,
    PresenceTracker,
    TrackPresence,
    TrackRows,
    check_non_negative,
    in_time_windows,
    parse_time_windows,
)
from campusguard.app.rules.spec import ClassRef, RuleContext, RuleEntry, ZoneRuleConfigBase
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

__all__ = [
    "IntrusionRule",
    "CrowdRule",
    "FireLaneRule",
    "LoiteringRule",
    "VEHICLE_CLASS_IDS",
    "INTRUSION",
    "CROWD",
    "FIRE_LANE",
    "LOITERING",
]

VEHICLE_CLASS_IDS: tuple[int, ...] = (2, 3, 5, 7)  # COCO car, motorcycle, bus, truck


def _vehicles() -> list[ClassRef]:
    return ["car", "truck", "bus", "motorcycle"]


class IntrusionRuleConfig(ZoneRuleConfigBase):
    """An object of the given classes inside a restricted zone."""

    kind: Literal["intrusion"] = Field("intrusion", title="Kind", description="Rule kind.")
    min_seconds: float = Field(
        0.0,
        ge=0,
        le=86400,
        title="Minimum seconds",
        description="Seconds an object must stay inside before the event starts.",
    )
    per_track: bool = Field(
        True, title="Per track", description="One event per intruding object (true) or one per zone episode (false)."
    )


class CrowdRuleConfig(ZoneRuleConfigBase):
    """At least N objects inside a zone for at least T seconds."""

    kind: Literal["crowd"] = Field("crowd", title="Kind", description="Rule kind.")
    min_count: int = Field(5, ge=1, le=10000, title="Minimum count", description="Objects needed in the zone at once.")
    min_seconds: float = Field(
        5.0, ge=0, le=86400, title="Minimum seconds", description="Seconds the count must hold before the event starts."
    )


class FireLaneRuleConfig(ZoneRuleConfigBase):
    """An object stationary inside the fire lane for at least T seconds."""

    kind: Literal["fire_lane"] = Field("fire_lane", title="Kind", description="Rule kind.")
    classes: list[ClassRef] = Field(
        default_factory=_vehicles,
        title="Classes",
        description="Classes the rule applies to, by name or id.",
        min_length=1,
        max_length=100,
    )
    min_seconds: float = Field(
        10.0, ge=0, le=86400, title="Minimum seconds", description="Seconds an object must stand still in the lane."
    )
    max_movement: float = Field(
        0.02,
        ge=0,
        le=1,
        title="Stationary movement",
        description="Stationary means the anchor moved less than this fraction of the frame width over `stationary_window_s`.",
    )
    max_movement_px: float | None = Field(
        None,
        ge=0,
        le=10000,
        title="Stationary movement (pixels)",
        description="The same threshold in pixels; overrides `max_movement`.",
    )
    stationary_window_s: float = Field(
        1.0, gt=0, le=600, title="Stationary window", description="Seconds over which movement is measured."
    )
    per_track: bool = Field(
        True, title="Per track", description="One event per stopped vehicle (true) or one per zone episode (false)."
    )


class LoiteringRuleConfig(ZoneRuleConfigBase):
    """One tracked object inside a zone for at least T seconds."""

    kind: Literal["loitering"] = Field("loitering", title="Kind", description="Rule kind.")
    min_seconds: float = Field(
        20.0, ge=0, le=86400, title="Minimum seconds", description="Seconds one tracked object must stay in the zone."
    )


class _ZoneRule:
    """Common arguments and bookkeeping of the zone rules.

    Args:
        name: rule name (unique per camera), put on every event.
        camera_id: camera id, put on every event.
        zone: the `PolygonZone`.
        class_ids: classes that count, or ``None`` for all.
        min_seconds: seconds the condition must hold before the event starts (>= 0).
        inertia: frames a track's anchor must be inside before it counts (>= 1).
        max_gap_s: seconds a track may vanish or step out without losing its dwell time.
        end_grace_s: seconds the condition may lapse before the open event ends.
        cooldown_s: seconds after an event of this rule ends before the next can start.
        time_windows: daily wall-clock windows (``"22:00-06:00"`` or ``("22:00", "06:00")``) in
            which the rule is armed, in the time zone of the ``wall_time`` passed to `update`;
            empty or ``None`` means always. Needs ``wall_time`` in `update`.
        class_names: names of class ids, copied onto events.
        anchor: box anchor tested (``"bottom_center"``).
        stitch_radius: a new track id continues a same-class track lost within ``max_gap_s``
            whose last anchor is within this many box heights (id-switch stitching; 0 disables).
        update_interval_s: minimum seconds between two ``update`` events of one incident.
        max_ids_per_event: most tracker ids listed on an event (the end gives the total).
        stream_key: put into the event ids: the recording (a scanned file); empty for a live camera.
    """

    kind: RuleKind

    def __init__(
        self,
        *,
        name: str,
        camera_id: str,
        zone: PolygonZone,
        class_ids: Collection[int] | None = None,
        min_seconds: float = 0.0,
        inertia: int = 3,
        max_gap_s: float = 1.0,
        end_grace_s: float = 2.0,
        cooldown_s: float = 0.0,
        time_windows: Sequence[str | tuple[str, str]] | None = None,
        class_names: ClassNames = None,
        anchor: str = "bottom_center",
        stitch_radius: float = 0.5,
        update_interval_s: float = 2.0,
        max_ids_per_event: int = 100,
        stream_key: str = "",
    ) -> None:
        what = f"rule {name!r}"
        check_non_negative(
            what,
            min_seconds=min_seconds,
            max_gap_s=max_gap_s,
            end_grace_s=end_grace_s,
            cooldown_s=cooldown_s,
            stitch_radius=stitch_radius,
            update_interval_s=update_interval_s,
        )
        if int(max_ids_per_event) < 1:
            raise InvalidInputError(f"{what}: max_ids_per_event must be >= 1, got {max_ids_per_event}")
        if int(inertia) < 1:
            raise InvalidInputError(f"{what}: inertia must be >= 1 frame, got {inertia}")
        if class_ids is not None and len(class_ids) == 0:
            raise InvalidInputError(f"{what}: class_ids is empty; use None for every class")
        self.name = name
        self.camera_id = camera_id
        self.zone = zone
        self.class_ids = None if class_ids is None else tuple(sorted(int(c) for c in class_ids))
        self.min_seconds = float(min_seconds)
        self.inertia = int(inertia)
        self.max_gap_s = float(max_gap_s)
        self.end_grace_s = float(end_grace_s)
        self.cooldown_s = float(cooldown_s)
        self.time_windows = parse_time_windows(time_windows, what)
        self.class_names = class_names
        self.update_interval_s = float(update_interval_s)
        self.max_ids_per_event = int(max_ids_per_event)
        self.stream_key = stream_key
        self.presence = PresenceTracker(
            zone, self.class_ids, self.inertia, self.max_gap_s, anchor, self._history_s(), stitch_radius
        )
        self._last_t: float | None = None
        self.track_episodes: dict[int, Episode] = {}

    def _history_s(self) -> float:
        return 0.0

    # its rows (`campusguard.app.rules.base.RowsRule`; `campusguard replay` takes a segment's at once) ----
    def rows_of_interest(self, detections: Detections) -> np.ndarray | None:
        """``(N,) bool`` over any number of frames' rows: the rows this rule looks at (its classes,
        tracked, anchor in its zone)."""
        return self.presence.rows_inside(detections)

    def take_rows(self, detections: Detections, rows: np.ndarray) -> TrackRows:
        """The rows ``rows`` (of interest) of ``detections`` as `TrackRows` (its anchor)."""
        return TrackRows.take(detections, rows, self.presence.anchor)

    def update(
        self, timestamp_s: float, detections: Detections, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """Advance one frame; see `campusguard.app.rules.base.Rule.update`."""
        return self.update_rows(timestamp_s, self.presence.rows_of(detections), frame_index, wall_time)

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's rows in the zone (`rows_of_interest`)."""
        raise NotImplementedError

    def is_idle(self) -> bool:
        """True when the rule holds nothing that time alone changes: no track in or lately in its
        zone, no open incident. An idle rule's `update` on a frame without rows of interest does
        nothing but note the time, so a replay may skip it until such a row comes."""
        return not self.presence.tracks and all(e.current is None for e in self.track_episodes.values())

    def _dwelling(
        self, timestamp_s: float, rows: TrackRows, wall_time: datetime | None
    ) -> dict[int, tuple[int, float]]:
        """Advance presence by one frame; the tracks in the zone for ``min_seconds`` while the rule
        is armed, as tracker id -> (class id, onset s). Intrusion and loitering differ only after."""
        armed = self._check_time(timestamp_s, wall_time)
        present = self.presence.update_rows(timestamp_s, rows)
        if not armed:
            return {}
        least = self.min_seconds
        return {t: (p.class_id, p.onset_s) for t, p in present.items() if timestamp_s - p.onset_s >= least}  # dwell_s

    def _event_details(self, tracker_id: int) -> dict[str, object]:
        """Extras a rule puts on the start of a per-track event (none by default)."""
        return {}

    def _step_per_track(
        self,
        timestamp_s: float,
        frame_index: int,
        wall_time: datetime | None,
        qualifying: dict[int, tuple[int, float]],
    ) -> list[Event]:
        """Advance one `Episode` per track; ``qualifying`` maps tracker id -> (class id, onset s)."""
        out: list[Event] = []
        for new, old in self.presence.renamed.items():
            if old in self.track_episodes and new not in self.track_episodes:
                self.track_episodes[new] = self.track_episodes.pop(old)  # an id switch continues the event
        for tid in qualifying:
            if tid not in self.track_episodes:
                self.track_episodes[tid] = self._episode()
        tracks = self.presence.tracks
        for tid, episode in list(self.track_episodes.items()):
            q = qualifying.get(tid)
            if q is None:
                out += episode.step(timestamp_s, frame_index, wall_time, False)
            else:
                details = None if episode.is_open else {"dwell_s": round(timestamp_s - q[1], 3), **self._event_details(tid)}
                out += episode.step(timestamp_s, frame_index, wall_time, True, {tid: q[0]}, q[1], 1, details)
            if episode.current is None and tid not in tracks:
                last_end = episode.last_end_s
                if last_end is None or timestamp_s - last_end >= self.cooldown_s:
                    del self.track_episodes[tid]  # bounded memory: forget finished tracks, cooled down
        return out

    def open_events(self) -> list[Event]:
        """Open events in their latest state."""
        return [e.current for e in self.track_episodes.values() if e.current is not None]

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End every open event."""
        out: list[Event] = []
        for episode in self.track_episodes.values():
            out += episode.close(timestamp_s, wall_time)
        self.track_episodes.clear()
        return out

    def _episode(self) -> Episode:
        return Episode(
            camera_id=self.camera_id,
            rule_name=self.name,
            rule_kind=self.kind,
            zone=self.zone.name,
            end_grace_s=self.end_grace_s,
            cooldown_s=self.cooldown_s,
            class_names=self.class_names,
            update_interval_s=self.update_interval_s,
            max_ids=self.max_ids_per_event,
            stream_key=self.stream_key,
        )

    def _check_time(self, timestamp_s: float, wall_time: datetime | None) -> bool:
        """Validate the frame time; return whether the rule is armed (inside its time windows)."""
        if not math.isfinite(timestamp_s):
            raise InvalidInputError(f"rule {self.name!r}: timestamp {timestamp_s} is not finite")
        if self._last_t is not None and timestamp_s < self._last_t:
            raise InvalidInputError(
                f"rule {self.name!r}: timestamp {timestamp_s} s is earlier than the previous {self._last_t} s"
            )
        self._last_t = timestamp_s
        if not self.time_windows:
            return True
        if wall_time is None:
            raise InvalidInputError(f"rule {self.name!r} has time windows but update() got no wall_time")
        return in_time_windows(self.time_windows, wall_time)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, camera={self.camera_id!r}, zone={self.zone.name!r})"


class _EpisodeRule(_ZoneRule):
    """A zone rule raising one event per track (``per_track=True``) or one at a time for the zone."""

    def __init__(self, *, per_track: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.per_track = bool(per_track)
        self.episode = self._episode()

    def _step(
        self,
        timestamp_s: float,
        frame_index: int,
        wall_time: datetime | None,
        armed: bool,
        qualifying: dict[int, tuple[int, float]],
    ) -> list[Event]:
        """Advance per track or per zone; ``qualifying`` maps tracker id -> (class id, onset s)."""
        if not armed:
            qualifying = {}
        if self.per_track:
            return self._step_per_track(timestamp_s, frame_index, wall_time, qualifying)
        if not qualifying:
            return self.episode.step(timestamp_s, frame_index, wall_time, False)
        objects = {t: c for t, (c, _) in qualifying.items()}
        onset_s = min(o for _, o in qualifying.values())
        return self.episode.step(timestamp_s, frame_index, wall_time, True, objects, onset_s, len(qualifying))

    def open_events(self) -> list[Event]:
        """Open events in their latest state."""
        zone_event = [] if self.episode.current is None else [self.episode.current]
        return zone_event + super().open_events()

    def is_idle(self) -> bool:
        return self.episode.current is None and super().is_idle()

    def close(self, timestamp_s: float, wall_time: datetime | None = None) -> list[Event]:
        """End every open event."""
        return self.episode.close(timestamp_s, wall_time) + super().close(timestamp_s, wall_time)


class IntrusionRule(_EpisodeRule):
    """Objects of ``class_ids`` in a restricted zone for ``min_seconds``, optionally only in time windows.

    Args:
        class_ids: defaults to ``(0,)`` (COCO person).
        per_track: one event per intruding track (default) or one per zone episode.
        **kwargs: as `_ZoneRule`.
    """

    kind: RuleKind = "intrusion"

    def __init__(self, *, class_ids: Collection[int] | None = (0,), per_track: bool = True, **kwargs: Any) -> None:
        super().__init__(class_ids=class_ids, per_track=per_track, **kwargs)

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's rows in the zone."""
        dwelling = self._dwelling(timestamp_s, rows, wall_time)
        return self._step(timestamp_s, frame_index, wall_time, True, dwelling)


class CrowdRule(_EpisodeRule):
    """At least ``min_count`` objects in the zone continuously for ``min_seconds``.

    Args:
        min_count: objects needed (>= 1).
        class_ids: defaults to ``(0,)`` (COCO person).
        **kwargs: as `_ZoneRule`. Short dips below ``min_count`` (<= ``max_gap_s``) keep the run.
    """

    kind: RuleKind = "crowd"

    def __init__(self, *, min_count: int, class_ids: Collection[int] | None = (0,), **kwargs: Any) -> None:
        super().__init__(class_ids=class_ids, **kwargs)
        if int(min_count) < 1:
            raise InvalidInputError(f"rule {self.name!r}: min_count must be >= 1, got {min_count}")
        self.min_count = int(min_count)
        self._run_onset_s: float | None = None
        self._run_last_s: float | None = None

    def is_idle(self) -> bool:
        return self._run_last_s is None and super().is_idle()

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's rows in the zone."""
        armed = self._check_time(timestamp_s, wall_time)
        present = self.presence.update_rows(timestamp_s, rows)
        holds = armed and len(present) >= self.min_count
        if holds:
            if self._run_onset_s is None or self._run_last_s is None or timestamp_s - self._run_last_s > self.max_gap_s:
                # the crowd formed when the min_count-th of the present objects arrived
                onsets = sorted(p.onset_s for p in present.values())
                self._run_onset_s = onsets[self.min_count - 1]
            self._run_last_s = timestamp_s
        elif self._run_last_s is not None and timestamp_s - self._run_last_s > self.max_gap_s:
            self._run_onset_s = self._run_last_s = None
        active = holds and self._run_onset_s is not None and timestamp_s - self._run_onset_s >= self.min_seconds
        if not active:  # the episode reads the objects and the count only while the condition holds
            return self.episode.step(timestamp_s, frame_index, wall_time, False, None, self._run_onset_s)
        objects = {t: p.class_id for t, p in present.items()}
        return self.episode.step(timestamp_s, frame_index, wall_time, True, objects, self._run_onset_s, len(present))


class FireLaneRule(_EpisodeRule):
    """An object of ``class_ids`` stationary in the zone for ``min_seconds``.

    Args:
        class_ids: defaults to `VEHICLE_CLASS_IDS` (COCO car, motorcycle, bus, truck).
        max_movement: stationary means the anchor moved less than this fraction of the frame
            width over ``stationary_window_s`` (needs the zone's ``resolution_wh``).
        max_movement_px: the same threshold in pixels; overrides ``max_movement``.
        stationary_window_s: the window over which movement is measured (> 0).
        per_track: one event per stationary vehicle (default) or one per zone episode.
        **kwargs: as `_ZoneRule`.
    """

    kind: RuleKind = "fire_lane"

    def __init__(
        self,
        *,
        class_ids: Collection[int] | None = VEHICLE_CLASS_IDS,
        max_movement: float = 0.02,
        max_movement_px: float | None = None,
        stationary_window_s: float = 1.0,
        per_track: bool = True,
        **kwargs: Any,
    ) -> None:
        self.stationary_window_s = float(stationary_window_s)
        super().__init__(class_ids=class_ids, per_track=per_track, **kwargs)
        what = f"rule {self.name!r}"
        if not self.stationary_window_s > 0:
            raise InvalidInputError(f"{what}: stationary_window_s must be > 0, got {stationary_window_s}")
        if max_movement_px is None:
            if self.zone.resolution_wh is None:
                raise InvalidInputError(
                    f"{what}: max_movement is a fraction of the frame width but zone {self.zone.name!r} has no resolution; "
                    "give max_movement_px"
                )
            max_movement_px = float(max_movement) * self.zone.resolution_wh[0]
        check_non_negative(what, max_movement_px=max_movement_px)
        self.max_movement_px = float(max_movement_px)
        self._still_onset: dict[int, float] = {}
        self._still_last: dict[int, float] = {}

    def _history_s(self) -> float:
        return self.stationary_window_s

    def is_idle(self) -> bool:
        return not self._still_last and super().is_idle()

    def _is_stationary(self, p: TrackPresence, now_s: float) -> bool:
        """True if the track's anchor history covers the window and stayed within the threshold."""
        if not p.history or p.history[0][0] > now_s - self.stationary_window_s + 1e-9:
            return False
        _, lx, ly = p.history[-1]
        limit = self.max_movement_px
        return all(math.hypot(x - lx, y - ly) < limit for _, x, y in p.history)

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's rows in the zone."""
        armed = self._check_time(timestamp_s, wall_time)
        present = self.presence.update_rows(timestamp_s, rows)
        for new, old in self.presence.renamed.items():
            if old in self._still_last:
                self._still_last[new] = self._still_last.pop(old)
                self._still_onset[new] = self._still_onset.pop(old)
        for tid, p in present.items():
            if self._is_stationary(p, timestamp_s):
                last = self._still_last.get(tid)
                if last is None or timestamp_s - last > self.max_gap_s:
                    # the first frame at which it has been still over the whole window
                    self._still_onset[tid] = timestamp_s
                self._still_last[tid] = timestamp_s
        for tid in [t for t, last in self._still_last.items() if timestamp_s - last > self.max_gap_s]:
            del self._still_last[tid]
            del self._still_onset[tid]
        qualifying = {
            t: (p.class_id, self._still_onset[t])
            for t, p in present.items()
            if self._still_last.get(t) == timestamp_s and timestamp_s - self._still_onset[t] >= self.min_seconds
        }
        return self._step(timestamp_s, frame_index, wall_time, armed, qualifying)


class LoiteringRule(_ZoneRule):
    """One track in the zone for ``min_seconds``; one event per track.

    Arguments as `_ZoneRule` (``class_ids`` defaults to ``(0,)``, COCO person); the cooldown
    applies per track.
    """

    kind: RuleKind = "loitering"

    def __init__(self, *, class_ids: Collection[int] | None = (0,), **kwargs: Any) -> None:
        super().__init__(class_ids=class_ids, **kwargs)

    def update_rows(
        self, timestamp_s: float, rows: TrackRows, frame_index: int, wall_time: datetime | None = None
    ) -> list[Event]:
        """`update` given the frame's rows in the zone."""
        return self._step_per_track(timestamp_s, frame_index, wall_time, self._dwelling(timestamp_s, rows, wall_time))


def _build_intrusion(cfg: IntrusionRuleConfig, ctx: RuleContext) -> IntrusionRule:
    return IntrusionRule(min_seconds=cfg.min_seconds, per_track=cfg.per_track, **ctx.zone_rule_kwargs(cfg))


def _build_crowd(cfg: CrowdRuleConfig, ctx: RuleContext) -> CrowdRule:
    return CrowdRule(min_count=cfg.min_count, min_seconds=cfg.min_seconds, **ctx.zone_rule_kwargs(cfg))


def _build_fire_lane(cfg: FireLaneRuleConfig, ctx: RuleContext) -> FireLaneRule:
    return FireLaneRule(
        min_seconds=cfg.min_seconds,
        max_movement=cfg.max_movement,
        max_movement_px=cfg.max_movement_px,
        stationary_window_s=cfg.stationary_window_s,
        per_track=cfg.per_track,
        **ctx.zone_rule_kwargs(cfg),
    )


def _build_loitering(cfg: LoiteringRuleConfig, ctx: RuleContext) -> LoiteringRule:
    return LoiteringRule(min_seconds=cfg.min_seconds, **ctx.zone_rule_kwargs(cfg))


INTRUSION = RuleEntry(
    IntrusionRuleConfig, IntrusionRule, _build_intrusion, "Intrusion", example={"zone": "zone", "min_seconds": 1}, order=10
)
CROWD = RuleEntry(
    CrowdRuleConfig, CrowdRule, _build_crowd, "Crowd", example={"zone": "zone", "min_count": 3, "min_seconds": 2}, order=20
)
FIRE_LANE = RuleEntry(
    FireLaneRuleConfig, FireLaneRule, _build_fire_lane, "Fire lane", example={"zone": "zone", "min_seconds": 30}, order=30
)
LOITERING = RuleEntry(
    LoiteringRuleConfig, LoiteringRule, _build_loitering, "Loitering", example={"zone": "zone", "min_seconds": 60}, order=40
)
