"""The operators' review rules, the same on every store: which actions apply, what a review returns or
raises, and what a bulk review reports.

A review action moves an incident's ``state`` only from the states it may start from
(`campusguard.app.events.sql.REVIEW_FROM`); the check and the change are one statement, so two
operators never both resolve one incident. A refused action is a `ReviewConflictError` (a bulk
review reports it per incident instead, `BulkReview`). Resolving may record an outcome (`OUTCOMES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from campusguard.app.events.protocols import ReviewableEventStore
from campusguard.app.events.records import EventRecord, ReviewAction, check_outcome
from campusguard.app.events.sql import REVIEW_FROM, REVIEW_TO
from campusguard.errors import InvalidInputError

__all__ = ["ReviewConflictError", "MAX_BULK_REVIEW", "BulkReview", "check_review_action", "review_outcome"]


class ReviewConflictError(InvalidInputError):
    """A review action does not apply to the incident's current state (e.g. acknowledging a resolved one)."""


MAX_BULK_REVIEW = 500
"""The most incidents one `UpsertingEventStore.review_many` call reviews (one transaction)."""


@dataclass(frozen=True)
class BulkReview:
    """What `UpsertingEventStore.review_many` did, per incident.

    Attributes:
        updated: the incidents the action changed, as they are now (in the order asked).
        missing: ids of no incident.
        conflicts: id -> current state, for incidents the action does not apply to (already resolved...).
    """

    updated: list[EventRecord] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    conflicts: dict[str, str] = field(default_factory=dict)


def check_review_action(action: str, outcome: str | None = None) -> None:
    """A review action is one of `REVIEW_FROM`'s; an outcome is one of `OUTCOMES` and goes with ``resolve``."""
    if action not in REVIEW_FROM:
        raise InvalidInputError(f"review action must be one of {sorted(REVIEW_FROM)}, got {action!r}")
    check_outcome(outcome)
    if outcome is not None and action != "resolve":
        raise InvalidInputError(f"an outcome is recorded when resolving, not with {action!r}")


def review_outcome(
    store: ReviewableEventStore, event_id: str, action: ReviewAction, changed: int, current: str | None
) -> EventRecord:
    """What `ReviewableEventStore.review` returns or raises once its update ran (``changed`` rows;
    ``current``: the state after it, ``None`` when there is no such incident)."""
    if current is None:
        raise KeyError(event_id)
    if not changed:
        raise ReviewConflictError(f"event {event_id} is {current}; it cannot be {REVIEW_TO[action]} now")
    record = store.get_record(event_id)
    if record is None:  # deleted by retention between the review and this read
        raise KeyError(event_id)
    return record
