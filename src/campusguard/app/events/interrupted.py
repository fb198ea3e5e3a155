"""`InterruptedIncidents`: incidents a dead run left open, ended at the next start unless resumed.

A run killed (SIGKILL, a power cut, an OOM kill) leaves the incidents it had open with status
``open`` in the store: nothing will ever end them. At the next start, once the spool is
replayed (a spooled ``end`` may close some), the event writer (`EventWorker`) asks the store
for the open incidents of this config's cameras and ends each with phase ``end``, ``end_s`` its
last update's (``end_s``, or ``start_s`` when it had none), ``details["interrupted"] = True`` and
`INTERRUPTED_SEQUENCE`, committed and then alerted like any end (each sink's ledger makes it
once).

Unless the camera resumes it. Event ids are deterministic (camera, rule, zone, frame, stream
time, tracks): a live camera's new run has new tracks and a new clock, so it never raises an
old id again and its incidents are ended at once. A file camera re-read from the start raises
the same ids again: its incidents are held until that camera's stream ends, and the ones the
new run raised again (resumed: the rule ends them itself) are dropped from the list; the rest
are ended then.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, cast

from campusguard.app.events.protocols import RecordQuery
from campusguard.app.events.records import EventFilter
from campusguard.app.events.types import INTERRUPTED_SEQUENCE, Event

if TYPE_CHECKING:
    from campusguard.app.events.recorder import EventRecorder

__all__ = ["InterruptedIncidents", "interrupted_end"]

log = logging.getLogger(__name__)


def interrupted_end(event: Event) -> Event:
    """The end of an incident a dead run left open, from its latest stored state."""
    end_s = event.end_s if event.end_s is not None else event.start_s
    return dataclasses.replace(
        event,
        phase="end",
        end_s=float(end_s),
        end_frame=event.end_frame if event.end_frame is not None else event.start_frame,
        ended_at=event.ended_at or event.started_at,
        details={**event.details, "interrupted": True},
        sequence=INTERRUPTED_SEQUENCE,
    )


class InterruptedIncidents:
    """The open incidents of an earlier run, per camera, until they are ended or resumed (thread-safe).

    Args:
        cameras: camera id to whether it is live (live: ended at start; a file: at its end).
    """

    def __init__(self, cameras: Mapping[str, bool]) -> None:
        self.cameras = dict(cameras)
        self.pending: dict[str, dict[str, Event]] = {}  # camera -> event id -> latest stored state
        self.loaded = False
        self._lock = threading.Lock()
        self._resumed: set[str] = set()  # ids the new run raised (before or after `load`)
        self._ended: set[str] = set()  # cameras whose stream has ended

    def load(self, store: EventRecorder) -> list[Event] | None:
        """Read the open incidents of the cameras from ``store``; return the ends due now (live
        cameras, and cameras whose stream already ended), or None when the store cannot be read
        (a store without queries, or unavailable: the next start tries again)."""
        if not hasattr(store, "query_records"):
            return None
        reader = cast(RecordQuery, store)
        try:
            found: list[Event] = []
            for camera in self.cameras:
                records, _ = reader.query_records(
                    EventFilter(camera_id=camera, status="open"), limit=None, newest_first=False
                )
                found.extend(r.event for r in records if r.event.is_open)
        except Exception as exc:  # the store is down: the incidents stay open until a start that can read them
            log.warning("open incidents of an earlier run not checked (%s); the next start does", exc)
            return None
        with self._lock:
            for event in found:
                if event.event_id not in self._resumed:
                    self.pending.setdefault(event.camera_id, {})[event.event_id] = event
            self.loaded = True
            due = [c for c, live in self.cameras.items() if live or c in self._ended]
        if found:
            log.warning(
                "%d incident(s) left open by an earlier run that did not stop cleanly (%s): live cameras' "
                "are ended as interrupted now, files' at their end unless the re-read raises them again",
                len(found),
                ", ".join(
                    f"{cam}: {sum(e.camera_id == cam for e in found)}" for cam in sorted({e.camera_id for e in found})
                ),
            )
        return [end for camera in due for end in self._take(camera)]

    def seen(self, event: Event) -> None:
        """The new run raised ``event``: an incident of that id is resumed, not interrupted."""
        with self._lock:
            self._resumed.add(event.event_id)
            pending = self.pending.get(event.camera_id)
            if pending:
                pending.pop(event.event_id, None)

    def at_end_of_stream(self, camera: str) -> list[Event]:
        """The ends of ``camera``'s open incidents the new run did not resume (none before `load`)."""
        with self._lock:
            self._ended.add(camera)
        return self._take(camera)

    def _take(self, camera: str) -> list[Event]:
        with self._lock:
            return [interrupted_end(e) for e in self.pending.pop(camera, {}).values()]
