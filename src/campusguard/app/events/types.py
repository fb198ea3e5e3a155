"""The `Event` type: one lifecycle update (start / update / end) of an incident; the phases and their filter.

A leaf the config may import (`campusguard.app.config.alerts` takes its phases from here).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, cast, get_args

__all__ = ["ESCALATION", "Event", "EventPhase", "EVENT_PHASES", "LifecyclePhase", "INTERRUPTED_SEQUENCE", "PhaseFilter", "RuleKind", "event_id_for"]

INTERRUPTED_SEQUENCE = 1_000_000_000
"""The ``sequence`` of the end given to an incident a dead run left open: the store keeps no
sequence, so it is one above any update's, and still the last of its incident."""

LifecyclePhase = Literal["start", "update", "end"]
EVENT_PHASES: tuple[LifecyclePhase, ...] = get_args(LifecyclePhase)
"""Every lifecycle phase, in order: ``start``, ``update``, ``end`` (what a sink's ``phases`` chooses from)."""

EventPhase = Literal["start", "update", "end", "escalation"]
"""An update's phase: a lifecycle phase, or ``escalation``: the one alert sent, to the sinks a
rule's ``escalate.to`` names, about an incident nobody acknowledged in time (never stored)."""

ESCALATION: Literal["escalation"] = "escalation"


class _HasPhase(Protocol):
    @property
    def phase(self) -> str: ...


class PhaseFilter:
    """The lifecycle phases a consumer takes (an alert sink's ``phases``).

    Args:
        phases: some of `EVENT_PHASES` (default all).

    Raises:
        ValueError: a name that is not a phase (a typo would otherwise silence the consumer).
    """

    __slots__ = ("phases",)

    def __init__(self, phases: Iterable[str] = EVENT_PHASES) -> None:
        if isinstance(phases, str):
            phases = (phases,)
        chosen = frozenset(phases)
        unknown = chosen.difference(EVENT_PHASES)
        if unknown:
            raise ValueError(f"unknown event phase(s) {sorted(unknown)}; expected some of {list(EVENT_PHASES)}")
        self.phases = cast(frozenset[LifecyclePhase], chosen)

    def accepts(self, event: _HasPhase) -> bool:
        """True when the event's phase is one of the chosen ones, or an escalation (those go only
        to the sinks a rule names, whatever phases they report)."""
        return event.phase in self.phases or event.phase == ESCALATION

    def __repr__(self) -> str:
        return f"PhaseFilter({[p for p in EVENT_PHASES if p in self.phases]})"


RuleKind = str
"""A rule kind (``"intrusion"``, ``"fall"``, ...): one of the rule registry's kinds,
`campusguard.app.rules.registry.RULES`. A plain string here so this module stays a leaf that
the rules and the config can import; the registry is the one list of kinds."""


def event_id_for(
    *,
    camera_id: str,
    rule_name: str,
    zone: str,
    start_frame: int,
    start_s: float,
    tracker_ids: tuple[int, ...] = (),
    direction: str | None = None,
    count: int | None = None,
    stream_key: str = "",
) -> str:
    """The deterministic id of the incident that starts with these values (32 hex digits).

    Derived from what identifies an incident (camera, rule, zone, the frame and stream time it
    was raised at, the objects and, for line crossings, direction and count), so a retried
    write, a restarted worker or a resumed scan that raises the same incident again writes the
    same row once (the stores upsert on ``event_id``). File sources' stream time is
    ``index / fps``, so re-running a file reproduces its ids; live sources' stream time is
    ``time.monotonic()`` with microseconds, so two live incidents never share one.

    ``stream_key`` names the recording when one camera's incidents come from several streams
    (`campusguard scan`: the file's resolved path), so two files of a camera with an incident at
    the same frame and time get two ids; empty (a live camera, `watch`) leaves the id as it was.
    """
    parts = [
        camera_id,
        rule_name,
        zone,
        str(int(start_frame)),
        repr(float(start_s)),
        ",".join(str(int(t)) for t in tracker_ids),
        direction or "",
        "" if count is None else str(int(count)),
    ]
    if stream_key:
        parts.append(stream_key)
    key = "\x1f".join(parts)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Event:
    """One lifecycle update of an incident; every update of an incident shares ``event_id``.

    Attributes:
        event_id: 32 hex digits, unique per incident and deterministic (`event_id_for`).
        phase: ``"start"``, ``"update"`` or ``"end"`` (or ``"escalation"``, see `EventPhase`).
        camera_id: camera that saw it.
        rule_name: the configured rule's name.
        rule_kind: a kind of the rule registry (`campusguard.app.rules.registry.RULES`).
        zone: zone (or line, for ``line_crossing``) name.
        start_s: stream time in seconds at which the incident was raised, i.e. the moment its
            condition had held for the rule's ``min_seconds`` (frame timestamps, not wall clock).
        end_s: stream time of the end (last moment the condition held), or ``None`` while open.
        onset_s: stream time the condition first became true (``start_s - onset_s`` is the
            dwell the rule waited for).
        start_frame: frame index at ``start_s``.
        end_frame: frame index at ``end_s`` or ``None``.
        tracker_ids: tracker ids involved so far (sorted).
        class_ids: class ids of those objects (sorted, unique).
        class_names: names of ``class_ids`` where known.
        count: objects counted (crowd size, line crossings in this direction so far), if any.
        direction: ``"in"`` / ``"out"`` for line crossings, else ``None``.
        started_at: wall-clock time at ``start_s`` when the caller passed one (timezone-aware).
        ended_at: wall-clock time at ``end_s`` when known.
        snapshot_path: path of a snapshot image, attached by the pipeline.
        details: small JSON-serialisable extras (e.g. dwell seconds).
        media_blur: the camera's ``privacy.blur`` (``none``, ``persons``, ``faces``) when the
            incident's snapshot and clip were made, fixed at its start: what a viewer may be given
            of them (`media_policy`); ``None``: unknown (recorded before it was kept), taken as the
            strictest.
        sequence: the update's number within its incident: ``start`` 0, each later update one
            more, the ``end`` last (`INTERRUPTED_SEQUENCE` for the end of an incident a dead run
            left open). With ``event_id`` and ``phase`` it names one delivery: the alert sinks
            ledger it and every payload carries it, so a restart repeats nothing and a consumer
            can drop a duplicate.
    """

    event_id: str
    phase: EventPhase
    camera_id: str
    rule_name: str
    rule_kind: RuleKind
    zone: str
    start_s: float
    end_s: float | None = None
    onset_s: float | None = None
    start_frame: int | None = None
    end_frame: int | None = None
    tracker_ids: tuple[int, ...] = ()
    class_ids: tuple[int, ...] = ()
    class_names: tuple[str, ...] = ()
    count: int | None = None
    direction: Literal["in", "out"] | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    snapshot_path: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    sequence: int = 0
    media_blur: str | None = None

    @property
    def is_open(self) -> bool:
        """True while the incident has not ended."""
        return self.end_s is None

    def with_snapshot(self, path: str) -> Event:
        """Return a copy with ``snapshot_path`` set."""
        return dataclasses.replace(self, snapshot_path=str(path))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (datetimes as ISO 8601 strings, tuples as lists)."""
        out = dataclasses.asdict(self)
        for key in ("tracker_ids", "class_ids", "class_names"):
            out[key] = list(out[key])
        for key in ("started_at", "ended_at"):
            value = getattr(self, key)
            out[key] = None if value is None else value.isoformat()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Event:
        """Inverse of `to_dict`; unknown keys are ignored, missing optional keys default."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in data.items() if k in names}
        for key in ("tracker_ids", "class_ids", "class_names"):
            if key in kw and kw[key] is not None:
                kw[key] = tuple(kw[key])
        for key in ("started_at", "ended_at"):
            if isinstance(kw.get(key), str):
                kw[key] = datetime.fromisoformat(kw[key])
        if kw.get("details") is None:
            kw["details"] = {}
        return cls(**kw)
