"""Incident records: `EventRecord` (an `Event` with its review state), `EventFilter`, review names.

A leaf of the event store: `campusguard.app.events.sql` (the SQL both stores share) builds
records from rows and the stores (`campusguard.app.events.store`) return them, so both import this module and
neither imports the other's types back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from campusguard.app.events.types import Event

__all__ = [
    "EventFilter",
    "EventRecord",
    "OUTCOMES",
    "Outcome",
    "OutcomeFilter",
    "REVIEW_STATES",
    "ReviewAction",
    "ReviewState",
    "check_outcome",
    "utc_iso",
]

ReviewState = Literal["open", "acknowledged", "resolved"]
REVIEW_STATES: tuple[str, ...] = get_args(ReviewState)
ReviewAction = Literal["acknowledge", "resolve"]
Outcome = Literal["confirmed", "false_alarm", "nuisance"]
"""What an operator found when resolving an incident: ``confirmed`` (a real incident),
``false_alarm`` (nothing there: the detector or the rule was wrong) or ``nuisance`` (real but
harmless: staff on duty, an animal, a delivery)."""
OUTCOMES: tuple[str, ...] = get_args(Outcome)
OutcomeFilter = Literal["confirmed", "false_alarm", "nuisance", "none"]
"""An outcome to filter on, or ``none``: incidents without one."""


def check_outcome(outcome: str | None) -> None:
    """An outcome is one of `OUTCOMES` (or None).

    Raises:
        InvalidInputError: it is not.
    """
    if outcome is not None and outcome not in OUTCOMES:
        from campusguard.errors import InvalidInputError

        raise InvalidInputError(f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")


def utc_iso(value: datetime) -> str:
    """ISO 8601 in UTC with microseconds; a naive datetime is taken as local time."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class EventFilter:
    """Filters of `ReviewableEventStore.query_records`; ``None`` means any.

    ``since`` / ``until`` bound the wall-clock sort time (``started_at``, or the time it was
    recorded when the event has none): ``since <= time < until``.
    """

    camera_id: str | None = None
    rule: str | None = None
    kind: str | None = None
    state: ReviewState | None = None
    since: datetime | None = None
    until: datetime | None = None
    status: Literal["open", "closed"] | None = None
    """``open``: incidents not ended yet (the pipeline's lifecycle, not the review ``state``)."""
    outcome: OutcomeFilter | None = None
    """An outcome (`OUTCOMES`), or ``none``: incidents without one."""


@dataclass(frozen=True)
class EventRecord:
    """One incident: its latest lifecycle state (`Event`) and its review state.

    Times are ISO 8601 UTC strings as stored (``time_utc`` is the wall-clock sort time).
    """

    event: Event
    time_utc: str
    recorded_at: str
    updated_at: str
    state: ReviewState = "open"
    acknowledged_by: str | None = None
    acknowledged_at: str | None = None
    resolved_by: str | None = None
    resolved_at: str | None = None
    note: str | None = None
    kept: bool = False
    kept_by: str | None = None
    kept_at: str | None = None
    outcome: str | None = None
    outcome_by: str | None = None
    outcome_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event JSON of the console API (the API adds ``snapshot_url`` and ``clip_url``)."""
        ev = self.event
        return {
            "id": ev.event_id,
            "camera": ev.camera_id,
            "rule": ev.rule_name,
            "kind": ev.rule_kind,
            "zone": ev.zone,
            "state": self.state,
            "open": ev.is_open,
            "started_at": self.time_utc if ev.started_at is None else utc_iso(ev.started_at),
            "ended_at": None if ev.ended_at is None else utc_iso(ev.ended_at),
            "start_s": ev.start_s,
            "end_s": ev.end_s,
            "track_id": ev.tracker_ids[0] if ev.tracker_ids else None,
            "tracker_ids": list(ev.tracker_ids),
            "class_names": list(ev.class_names),
            "count": ev.count,
            "direction": ev.direction,
            "details": ev.details,
            "has_snapshot": ev.snapshot_path is not None,
            "media_blur": ev.media_blur,
            "acknowledged_by": self.acknowledged_by,
            "acknowledged_at": self.acknowledged_at,
            "resolved_by": self.resolved_by,
            "resolved_at": self.resolved_at,
            "note": self.note,
            "kept": self.kept,
            "kept_by": self.kept_by,
            "kept_at": self.kept_at,
            "outcome": self.outcome,
            "outcome_by": self.outcome_by,
            "outcome_at": self.outcome_at,
            "recorded_at": self.recorded_at,
            "updated_at": self.updated_at,
        }
