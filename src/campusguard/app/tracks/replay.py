"""`replay`: a config's rules run over the stored tracks, matched against the stored incidents.

For each recorded segment (one run of a camera's analytics stage, `campusguard.app.tracks.segments`)
the camera's rules are built from the config as the service builds them (`build_rules`: the
segment's frame size, the model's class names, the stream key of its event ids) and fed the frames
in order through `feed_segment`, with the tracked rows, frame indices, stream clock and wall time
the analytics stage gave them; the segment's end closes them as the end of the stream does. The
incidents they raise are then matched against the stored incidents of the same period
(`compare`): a stored incident is *kept* when the replay raises one of the same camera, kind and
zone, overlapping it in stream time and sharing a track; else it is *gone*. Counted by outcome.

A rule that reads pixels (`RuleEntry.needs_pixels`, such as ``camera_health``) cannot be replayed:
it is left out with one line on stderr, and its stored incidents are left out of the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from campusguard.app.config import LoadedConfig
from campusguard.app.engine.wiring import build_rules
from campusguard.app.events.protocols import ReviewableEventStore
from campusguard.app.events.records import OUTCOMES, EventFilter, EventRecord
from campusguard.app.events.types import Event
from campusguard.app.rules import RULES, RuleEngine
from campusguard.app.rules.base import NO_ROWS, RowsRule, Rule, TrackRows
from campusguard.app.tracks.files import FLAG_FALLEN, TrackBlock
from campusguard.app.tracks.segments import Segment
from campusguard.detections import Detections

__all__ = [
    "PIXEL_KINDS",
    "Comparison",
    "ReplayIncident",
    "ReplayResult",
    "compare",
    "feed_segment",
    "pixel_kinds",
    "replay_segments",
]

PIXEL_KINDS: frozenset[str] = frozenset({"camera_health"})
"""Kinds known to read pixels even where their registry entry does not say so (`pixel_kinds`)."""

COMPARISON_KEYS: tuple[str, ...] = (*OUTCOMES, "none")
"""The comparison's rows: each outcome, and ``none`` (no outcome set)."""


def pixel_kinds() -> frozenset[str]:
    """The rule kinds replay cannot run: those whose entry `needs_pixels`, and `PIXEL_KINDS`."""
    return frozenset({e.kind for e in RULES if e.needs_pixels}) | PIXEL_KINDS


@dataclass(frozen=True)
class ReplayIncident:
    """An incident the replayed rules raise (its final state)."""

    camera_id: str
    rule_kind: str
    rule_name: str
    zone: str
    start_s: float
    end_s: float | None
    tracker_ids: tuple[int, ...]
    event_id: str
    started_at: str | None = None
    ended_at: str | None = None
    count: int | None = None
    stored_id: str | None = None
    """The stored incident it matches (same camera, kind and zone, overlapping, sharing a track), if any."""

    @classmethod
    def of(cls, ev: Event) -> ReplayIncident:
        return cls(
            camera_id=ev.camera_id,
            rule_kind=ev.rule_kind,
            rule_name=ev.rule_name,
            zone=ev.zone,
            start_s=float(ev.start_s),
            end_s=None if ev.end_s is None else float(ev.end_s),
            tracker_ids=tuple(ev.tracker_ids),
            event_id=ev.event_id,
            started_at=None if ev.started_at is None else ev.started_at.isoformat(),
            ended_at=None if ev.ended_at is None else ev.ended_at.isoformat(),
            count=ev.count,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "camera_id": self.camera_id,
            "rule_kind": self.rule_kind,
            "rule_name": self.rule_name,
            "zone": self.zone,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "tracker_ids": list(self.tracker_ids),
            "event_id": self.event_id,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "count": self.count,
            "stored_id": self.stored_id,
        }


@dataclass
class Comparison:
    """Stored incidents by outcome, gone or kept, and the replay's new ones."""

    counts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {k: {"gone": 0, "kept": 0} for k in COMPARISON_KEYS}
    )
    gone: list[EventRecord] = field(default_factory=list)
    new: int = 0
    left_out: int = 0
    """Stored incidents of the period outside the recorded tracks (no tracks to replay) or of a
    rule kind replay cannot run: not compared."""

    def summary(self) -> str:
        """``"41 of 52 false alarms gone, 12 of 12 confirmed kept, 3 new"``."""
        c = self.counts
        parts = []
        fa, conf, nui, none = c["false_alarm"], c["confirmed"], c["nuisance"], c["none"]
        parts.append(f"{fa['gone']} of {fa['gone'] + fa['kept']} false alarms gone")
        parts.append(f"{conf['kept']} of {conf['gone'] + conf['kept']} confirmed kept")
        parts.append(f"{nui['gone']} of {nui['gone'] + nui['kept']} nuisance gone")
        parts.append(f"{none['gone']} of {none['gone'] + none['kept']} without outcome gone")
        parts.append(f"{self.new} new")
        return ", ".join(parts)


@dataclass
class ReplayResult:
    """What `campusguard replay` prints: the replayed incidents, the stored ones gone, the counts."""

    incidents: list[ReplayIncident]
    comparison: Comparison
    segments: int = 0
    frames: int = 0
    stream_seconds: float = 0.0
    skipped_rules: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "incidents": [i.to_dict() for i in self.incidents],
            "gone": [_stored_dict(r) for r in self.comparison.gone],
            "comparison": self.comparison.counts,
            "new": self.comparison.new,
            "summary": self.comparison.summary(),
            "segments": self.segments,
            "frames": self.frames,
            "stream_seconds": round(self.stream_seconds, 3),
            "left_out": self.comparison.left_out,
            "skipped_rules": self.skipped_rules,
        }


def _stored_dict(r: EventRecord) -> dict[str, Any]:
    ev = r.event
    return {
        "id": ev.event_id,
        "camera_id": ev.camera_id,
        "rule_kind": ev.rule_kind,
        "rule_name": ev.rule_name,
        "zone": ev.zone,
        "start_s": ev.start_s,
        "end_s": ev.end_s,
        "tracker_ids": list(ev.tracker_ids),
        "started_at": r.time_utc if ev.started_at is None else ev.started_at.isoformat(),
        "outcome": r.outcome,
        "state": r.state,
    }


# feeding ------------------------------------------------------------------------------------
def _wall(seconds: float) -> datetime:
    """A frame's wall time as the analytics stage gives it to the rules: local, with its offset."""
    return datetime.fromtimestamp(seconds).astimezone()


_SAME_OFFSET_S = 1800.0
"""Frames within this many seconds of a span's first are given one local offset when the span's
earliest and latest frames have it (clock changes are months apart: at most one in two hours)."""


def _moments(wall: Sequence[float]) -> list[datetime]:
    """`_wall` of every frame, as ``datetime.fromtimestamp(s, offset)`` with the offset of spans of
    frames that share it (the same datetimes, at a fraction of the cost of a local-time lookup each)."""
    out: list[datetime] = []
    i, n = 0, len(wall)
    while i < n:
        lo = hi = wall[i]
        j = i + 1
        while j < n and abs(wall[j] - wall[i]) <= _SAME_OFFSET_S:
            lo, hi = min(lo, wall[j]), max(hi, wall[j])
            j += 1
        first, last = _wall(lo), _wall(hi)
        if first.utcoffset() == last.utcoffset() and first.tzname() == last.tzname():
            tz = first.tzinfo
            out += [datetime.fromtimestamp(s, tz) for s in wall[i:j]]
        else:
            out += [_wall(s) for s in wall[i:j]]
        i = j
    return out


def _rows_detections(block: TrackBlock, rows: np.ndarray, fallen: bool) -> Detections:
    """The tracked rows ``rows`` of one frame (``fallen``: the frame carried ``data["fallen"]``)."""
    data = {"fallen": block.fallen[rows].astype(bool)} if fallen else {}
    return Detections(
        block.xyxy[rows],
        np.ones(len(rows), np.float32),
        block.class_id[rows].astype(np.int64),
        block.tracker_id[rows].astype(np.int64),
        data,
    )


@dataclass
class _RulePlan:
    """How one rule is fed a segment: a `RowsRule` (``by_rows``) gets each frame's slice of the
    segment's rows of interest, taken at once (``rows``: frame ``i``'s are ``bounds[i]:bounds[i + 1]``);
    another rule gets each frame's tracked rows whole."""

    rule: Rule
    by_rows: RowsRule | None = None
    rows: TrackRows = NO_ROWS
    bounds: list[int] = field(default_factory=list)


def _plan(rule: Rule, whole: Detections, offsets: np.ndarray) -> _RulePlan:
    if not isinstance(rule, RowsRule):
        return _RulePlan(rule)
    mask = rule.rows_of_interest(whole)
    if mask is None:
        return _RulePlan(rule)
    rows = np.flatnonzero(mask)
    bounds = np.searchsorted(rows, offsets).tolist()  # each frame's first row of interest, and the end
    return _RulePlan(rule, rule, rule.take_rows(whole, rows), bounds)


def feed_segment(
    engine: RuleEngine, segment: Segment, *, offline_end_s: float | None = None, skip_idle: bool = True
) -> list[Event]:
    """Every frame of ``segment`` through ``engine``'s rules in order, as the analytics stage fed them
    (`RuleEngine.update`: each rule in turn, the frame's tracked rows, index, stream time and wall
    time), then the end of the stream (`RuleEngine.close` at the last frame); every update emitted.

    A rule that looks only at some rows (`RowsRule`: the zone and line rules) has the whole segment's
    rows of interest taken at once (`RowsRule.take_rows`: zone membership and line distances by NumPy
    over every row) and gets each frame's slice (`RowsRule.update_rows`), which is what its `update`
    gives itself from the frame's rows. ``skip_idle``: such a rule is not called on a frame without
    rows of interest while it `is_idle`: what it would do there is nothing (checked by the tests
    against feeding every frame). ``offline_end_s`` (live cameras): a gap between two frames longer
    than this ends the open incidents at the frame before it, as the analytics stage does when a
    camera goes quiet.
    """
    block = segment.block
    offsets = block.offsets()
    t, index, wall = block.t.tolist(), block.index.tolist(), block.wall.tolist()
    flags = (block.flags & FLAG_FALLEN).astype(bool).tolist()
    gaps: set[int] = set()
    if offline_end_s is not None and block.frames > 1:
        gaps = {int(i) + 1 for i in np.flatnonzero(np.diff(block.wall) > offline_end_s)}
    moments = _moments(wall)
    whole = _rows_detections(block, np.arange(block.detections), False)
    plans = [_plan(rule, whole, offsets) for rule in engine.rules]
    # per rule, in engine order: the rule, as a `RowsRule` if fed by rows, its rows' slicer and their bounds
    steps: list[tuple[Rule, RowsRule | None, Callable[[int, int], TrackRows], list[int]]] = [
        (p.rule, p.by_rows, p.rows.slice, p.bounds) for p in plans
    ]
    bounds = offsets.tolist()
    out: list[Event] = []
    for i in range(block.frames):
        if i in gaps:
            out += engine.close(t[i - 1], moments[i - 1])
        frame: Detections | None = None
        for rule, by_rows, take, at in steps:
            if by_rows is not None:
                lo, hi = at[i], at[i + 1]
                if lo == hi and skip_idle and by_rows.is_idle():
                    continue
                out += by_rows.update_rows(t[i], take(lo, hi), index[i], moments[i])
                continue
            if frame is None:
                frame = _rows_detections(block, np.arange(bounds[i], bounds[i + 1]), flags[i])
            out += rule.update(t[i], frame, index[i], moments[i])
    if block.frames:
        out += engine.close(t[-1], moments[-1])
    return out


def final_states(events: Iterable[Event]) -> list[Event]:
    """The latest update of each incident, in order of first appearance."""
    latest: dict[str, Event] = {}
    for ev in events:
        latest[ev.event_id] = ev
    return list(latest.values())


def replay_segments(
    loaded: LoadedConfig,
    segments: Sequence[Segment],
    *,
    note: Callable[[str], None] = lambda _: None,
) -> tuple[list[ReplayIncident], list[str], list[str]]:
    """The incidents ``loaded``'s rules raise over ``segments``; ``(incidents, rules left out, notes)``.

    Rules that read pixels are left out (``note`` is told once per camera and rule); a segment of a
    camera the config no longer has, or has disabled, is skipped with a note.

    Raises:
        ConfigError: a zone leaves a segment's frame, or a rule names a class its model did not have.
    """
    cameras = {c.id: i for i, c in enumerate(loaded.config.cameras)}
    no_pixels = pixel_kinds()
    skipped: list[str] = []
    notes: list[str] = []
    incidents: list[ReplayIncident] = []
    told: set[tuple[str, str]] = set()
    for seg in segments:
        cam_id = seg.meta.camera_id
        index = cameras.get(cam_id)
        if index is None or not loaded.config.cameras[index].enabled:
            key = (cam_id, "")
            if key not in told:
                told.add(key)
                msg = f"camera {cam_id}: not in the config (or disabled); its tracks are not replayed"
                notes.append(msg)
                note(msg)
            continue
        cam = loaded.config.cameras[index]
        for section in cam.incident_rules():  # its rules and, unless off, its camera health
            name = section.display_name()
            if _needs_pixels(section.kind) and (cam_id, name) not in told:
                told.add((cam_id, name))
                skipped.append(f"{cam_id}:{name}")
                note(f"camera {cam_id}: rule {name} ({section.kind}) reads pixels the tracks do not hold: not replayed")
        engine, _ = build_rules(
            loaded, index, seg.meta.names, seg.meta.resolution_wh, seg.meta.stream_key, pictures=False
        )
        kept = [(r, k) for r, k in zip(engine.rules, engine.keys, strict=True) if r.kind not in no_pixels]
        engine = RuleEngine(cam_id, [r for r, _ in kept], [k or "" for _, k in kept])
        events = feed_segment(engine, seg, offline_end_s=cam.offline_end_s if cam.is_live() else None)
        incidents += [ReplayIncident.of(ev) for ev in final_states(events)]
    return incidents, skipped, notes


def _needs_pixels(kind: str) -> bool:
    return kind in pixel_kinds()


# comparing ----------------------------------------------------------------------------------
def _interval(start: float, end: float | None) -> tuple[float, float]:
    return start, (math.inf if end is None else end)


def _matches(stored: Event, inc: ReplayIncident) -> bool:
    if (stored.camera_id, stored.rule_kind, stored.zone) != (inc.camera_id, inc.rule_kind, inc.zone):
        return False
    a0, a1 = _interval(stored.start_s, stored.end_s)
    b0, b1 = _interval(inc.start_s, inc.end_s)
    return a0 <= b1 and b0 <= a1 and bool(set(stored.tracker_ids) & set(inc.tracker_ids))


def stored_in_scope(
    records: Iterable[EventRecord], segments: Sequence[Segment], skipped_kinds: frozenset[str], margin_s: float = 2.0
) -> tuple[list[EventRecord], int]:
    """The stored incidents that started while a replayed segment of their camera was recorded, and
    the number left out (outside every segment, or of a kind replay cannot run)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for seg in segments:
        spans.setdefault(seg.meta.camera_id, []).append((seg.first_wall - margin_s, seg.last_wall + margin_s))
    inside: list[EventRecord] = []
    left_out = 0
    for r in records:
        ev = r.event
        when = ev.started_at.timestamp() if ev.started_at is not None else datetime.fromisoformat(r.time_utc).timestamp()
        if ev.rule_kind not in skipped_kinds and any(a <= when <= b for a, b in spans.get(ev.camera_id, [])):
            inside.append(r)
        else:
            left_out += 1
    return inside, left_out


def compare(incidents: list[ReplayIncident], stored: Sequence[EventRecord], left_out: int = 0) -> tuple[list[ReplayIncident], Comparison]:
    """Match the replayed incidents with the stored ones; the incidents with their ``stored_id`` and the counts."""
    comparison = Comparison(left_out=left_out)
    by_key: dict[tuple[str, str, str], list[EventRecord]] = {}
    for r in stored:
        by_key.setdefault((r.event.camera_id, r.event.rule_kind, r.event.zone), []).append(r)
    matched: dict[str, str] = {}  # replayed event id -> stored id
    kept_ids: set[str] = set()
    for inc in incidents:
        for r in by_key.get((inc.camera_id, inc.rule_kind, inc.zone), []):
            if _matches(r.event, inc):
                kept_ids.add(r.event.event_id)
                matched.setdefault(inc.event_id, r.event.event_id)
    for r in stored:
        key = r.outcome if r.outcome in OUTCOMES else "none"
        kept = r.event.event_id in kept_ids
        comparison.counts[key]["kept" if kept else "gone"] += 1
        if not kept:
            comparison.gone.append(r)
    out = [
        inc if inc.event_id not in matched else _with_stored(inc, matched[inc.event_id]) for inc in incidents
    ]
    comparison.new = sum(1 for inc in incidents if inc.event_id not in matched)
    return out, comparison


def _with_stored(inc: ReplayIncident, stored_id: str) -> ReplayIncident:
    from dataclasses import replace

    return replace(inc, stored_id=stored_id)


def stored_records(
    store: ReviewableEventStore, since: datetime | None, until: datetime | None, cameras: set[str] | None
) -> list[EventRecord]:
    """The stored incidents of ``[since, until)``, of ``cameras`` (all when None), oldest first."""
    out: list[EventRecord] = []
    for cam in sorted(cameras) if cameras is not None else [None]:
        records, _ = store.query_records(
            EventFilter(camera_id=cam, since=since, until=until), limit=None, newest_first=False
        )
        out += records
    return out


def run_replay(
    loaded: LoadedConfig,
    *,
    since: datetime | None,
    until: datetime | None = None,
    cameras: set[str] | None = None,
    store: ReviewableEventStore | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> ReplayResult:
    """Replay ``loaded``'s rules over the tracks of ``[since, until)`` in its storage's tracks folder
    and compare with the stored incidents of that period (``store``: the config's, opened here read-only
    when None).

    Raises:
        ConfigError: a rule cannot be built for a recorded camera (a zone outside its frame...).
        InvalidInputError, StoreUnavailableError: the event store cannot be read.
    """
    from campusguard.app.tracks.segments import load_segments

    folder = loaded.config.storage.tracks_path()
    segments = load_segments(folder, since=since, until=until, cameras=cameras)
    incidents, skipped, notes = replay_segments(loaded, segments, note=note)
    replayed_cams = {s.meta.camera_id for s in segments}
    storage = loaded.config.storage
    records: list[EventRecord] = []
    if store is not None:
        records = stored_records(store, since, until, cameras) if segments else []
    elif segments and (storage.postgresql or Path(storage.sqlite).exists()):
        from campusguard.app.events import open_event_store

        own = open_event_store(storage, read_only=True)
        try:
            records = stored_records(own, since, until, cameras)
        finally:
            own.close()
    elif segments:
        note(f"no event store at {storage.sqlite}: nothing to compare with")
    scope, left_out = stored_in_scope(
        [r for r in records if r.event.camera_id in replayed_cams], segments, pixel_kinds()
    )
    incidents, comparison = compare(incidents, scope, left_out)
    result = ReplayResult(
        incidents=incidents,
        comparison=comparison,
        segments=len(segments),
        frames=sum(s.block.frames for s in segments),
        stream_seconds=sum(s.stream_seconds for s in segments),
        skipped_rules=skipped,
        notes=notes,
    )
    if not segments:
        msg = f"no tracks recorded in the period under {folder}"
        result.notes.append(msg)
        note(msg)
    return result
