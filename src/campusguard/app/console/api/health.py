"""Camera health: every camera's state and recent health incidents, and accepting a moved camera's new view.

A camera's health (`campusguard.app.rules.camera_health`) says whether it can see: ``ok``, ``learning``
its usual view, or the problem of its open incident (``offline``, ``covered``, ``frozen``, ``blurred``,
``moved``). ``GET /api/v1/cameras`` carries it per camera too (`health_out`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status

from campusguard.app.console.identity.auth import audit, console_state, require_role
from campusguard.app.console.runtime import ConsoleRuntime
from campusguard.app.console.schemas import (
    CameraHealthOut,
    CameraHealthRow,
    HealthPage,
    HealthProblemOut,
    Responses,
)
from campusguard.app.events.records import EventFilter, EventRecord
from campusguard.app.rules.camera_health import CAMERA_HEALTH

__all__ = ["health_out", "router"]

router = APIRouter(tags=["cameras"])
KIND = CAMERA_HEALTH.kind
PROBLEMS_SHOWN = 20
"""The most health incidents listed per camera (the total is given as well)."""


def _utc_iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def health_out(runtime: ConsoleRuntime, camera: str) -> CameraHealthOut | None:
    """The camera's health as the API shows it, or ``None`` (health off, not running, on Ray)."""
    state = runtime.camera_health(camera)
    if state is None:
        return None
    since = runtime.problem_since(state)
    return CameraHealthOut.model_validate(
        {
            "state": state.state,  # checked by the model: one of its HealthState
            "since_s": state.since_s,
            "since": None if since is None else _utc_iso(since),
            "event_id": state.event_id,
            "measures": state.measures,
            "reference_made_at": state.reference_made_at or None,
            "reference_accepted_by": state.reference_accepted_by or None,
            "zones_on_old_view": list(state.zones_on_old_view),
        }
    )


def _problem(record: EventRecord) -> HealthProblemOut:
    data = record.to_dict()
    ev = record.event
    details = ev.details or {}
    measures = details.get("measures")
    return HealthProblemOut(
        id=ev.event_id,
        problem=str(details.get("problem", ev.zone)),
        started_at=data["started_at"],
        ended_at=data["ended_at"],
        duration_s=None if ev.end_s is None else max(0.0, ev.end_s - (ev.start_s if ev.onset_s is None else ev.onset_s)),
        open=ev.is_open,
        state=record.state,
        measures=measures if isinstance(measures, dict) else {},
    )


@router.get("/health")
def camera_health_page(
    request: Request,
    days: int = Query(7, ge=1, le=366, description="How many days back the health incidents are listed."),
) -> HealthPage:
    """Every camera's health now and its health incidents of the last ``days`` days (the latest
    20 per camera, newest first, with their number)."""
    runtime = console_state(request).runtime
    since = datetime.now(UTC) - timedelta(days=days)
    states = {c.name: c.state for c in runtime.camera_status()}
    rows = []
    for name in runtime.camera_names():
        where = EventFilter(camera_id=name, kind=KIND, since=since)
        records, total = runtime.store.query_records(where, limit=PROBLEMS_SHOWN)
        rows.append(
            CameraHealthRow(
                name=name,
                camera_state=states.get(name, "starting"),
                health=health_out(runtime, name),
                problems=[_problem(r) for r in records],
                problems_total=total,
            )
        )
    return HealthPage(days=days, cameras=rows)


_ACCEPT_RESPONSES: Responses = {
    404: {"description": "No such camera."},
    409: {
        "description": "Nothing to accept: the camera's health is off, it is not running yet, no frame was "
        "measured yet, or the cameras run on Ray (where views are not accepted from the console)."
    },
}


@router.post(
    "/cameras/{name}/health/accept-view",
    dependencies=[Depends(require_role("admin"))],
    responses=_ACCEPT_RESPONSES,
)
def accept_view(name: str, request: Request) -> CameraHealthOut:
    """Make the camera's current view its reference view (admin): a camera turned on purpose, or a
    ``moved`` incident that is the new normal. The ``moved`` incident ends with the next sample. The
    camera's zones at that moment are recorded as drawn on the old view (``zones_on_old_view``) until
    its zones are saved again. Audited as ``camera.accept_view``."""
    runtime = console_state(request).runtime
    if name not in runtime.camera_names():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}")
    before = runtime.camera_health(name)
    user = request.state.user.name
    try:
        accepted = runtime.accept_view(name, user)
    except KeyError:
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"camera {name!r} has no health check running here (health off, not running yet, or on Ray)",
        ) from None
    if not accepted:
        raise HTTPException(status.HTTP_409_CONFLICT, f"camera {name!r} has not measured a frame yet: nothing to accept")
    after = health_out(runtime, name)
    audit(
        request,
        "camera.accept_view",
        name,
        state=None if before is None else before.state,
        zones_on_old_view=[] if after is None else after.zones_on_old_view,
    )
    if after is None:  # stopped meanwhile
        raise HTTPException(status.HTTP_409_CONFLICT, f"camera {name!r} stopped while its view was accepted")
    return after
