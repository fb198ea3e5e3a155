"""Events: filtered pages, detail, snapshot and clip, acknowledge/resolve, keep, CSV export, live push (SSE)."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path as PathType
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, StreamingResponse

from campusguard.app.console.identity.auth import MEDIA_HEADERS, ConsoleState, audit, console_state, require_role
from campusguard.app.console.identity.streams import stream_guard
from campusguard.app.console.identity.users import role_at_least
from campusguard.app.console.schemas import (
    EVENT_ID_PATTERN,
    BulkReviewOut,
    BulkReviewRequest,
    EventOut,
    EventPage,
    EvidenceRequest,
    KeepRequest,
    NoteRequest,
    OpenIncidents,
    ResolveRequest,
    Responses,
    StepRequest,
)
from campusguard.app.events.checklist import Checklist, sop_of
from campusguard.app.events.export import csv_lines
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction
from campusguard.app.events.review import ReviewConflictError
from campusguard.app.events.store import UpsertingEventStore
from campusguard.errors import InvalidInputError

router = APIRouter(tags=["events"])
EventId = Annotated[str, Path(pattern=EVENT_ID_PATTERN, description="Event id (letters, digits, _ and -).")]
MAX_CSV_ROWS = 100_000
SSE_KEEPALIVE_S = 15.0
_NOT_FOUND: Responses = {404: {"description": "No such event (or it has no such file)."}}
_MEDIA_TYPES = {"snapshot": "image/jpeg", "clip": "video/mp4"}
THUMB_WIDTH = 160


def sees_sharp(request: Request) -> bool:
    """Whether the request's user sees media sharp (operators, admins); viewers get redacted variants."""
    return role_at_least(request.state.user.role, "operator")


def event_json(state: ConsoleState, data: dict[str, Any], request: Request) -> dict[str, Any]:
    """An event dict of the store with the snapshot and clip URLs this user can open (``None`` while
    there is no such file, or, for a viewer of a camera with blur on, no redacted variant of it), and
    whether a file exists but is withheld from this user (``snapshot_withheld``, ``clip_withheld``)."""
    eid = data["id"]
    runtime = state.runtime
    viewer_of = None if sees_sharp(request) else data["camera"]
    recorded = data.get("media_blur")  # the policy its media were made under (None: unknown, the strictest)
    out = {**data}
    media: tuple[tuple[Literal["snapshot", "clip"], str], ...] = (("snapshot", "snapshot.jpg"), ("clip", "clip.mp4"))
    for kind, suffix in media:
        shown = runtime.event_media(eid, kind, viewer_of=viewer_of, recorded_blur=recorded)
        out[f"{kind}_url"] = f"/api/v1/events/{eid}/{suffix}" if shown else None
        out[f"{kind}_withheld"] = shown is None and viewer_of is not None and runtime.event_media(eid, kind) is not None
    return out


def _filter(
    camera: str | None = Query(None, max_length=200, description="Camera id."),
    rule: str | None = Query(None, max_length=200, description="Rule name."),
    kind: str | None = Query(None, max_length=64, description="Rule kind (intrusion, crowd, ...)."),
    state: Literal["open", "acknowledged", "resolved"] | None = Query(None, description="Review state."),
    since: datetime | None = Query(None, description="Started at or after (ISO 8601; naive = UTC)."),
    until: datetime | None = Query(None, description="Started before (ISO 8601; naive = UTC)."),
    outcome: Literal["confirmed", "false_alarm", "nuisance", "none"] | None = Query(
        None, description="What the operator found (none: incidents without an outcome)."
    ),
) -> EventFilter:
    return EventFilter(
        camera_id=camera,
        rule=rule,
        kind=kind,
        state=state,
        since=_aware(since),
        until=_aware(until),
        outcome=outcome,
    )


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


@router.get("/events")
def list_events(
    request: Request,
    where: EventFilter = Depends(_filter),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=10**9),
) -> EventPage:
    """A page of events, newest first, matching every given filter, and the number of all matching."""
    state = console_state(request)
    records, total = state.runtime.store.query_records(where, limit=limit, offset=offset)
    lists = checklists(state, records)
    return EventPage(
        items=[EventOut(**event_json(state, r.to_dict(), request), checklist=lists[r.event.event_id]) for r in records],
        total=total,
    )


def checklists(state: ConsoleState, records: list[EventRecord]) -> dict[str, dict[str, Any] | None]:
    """Each incident's checklist (`Checklist.to_dict`), or ``None`` where its rule has none and nothing is ticked."""
    store = state.runtime.store
    ids = [r.event.event_id for r in records]
    marks = store.checklists(ids) if isinstance(store, UpsertingEventStore) and ids else {}
    config = state.runtime.loaded.config
    out: dict[str, dict[str, Any] | None] = {}
    for r in records:
        cl = Checklist(sop_of(config, r.event.camera_id, r.event.rule_name), marks.get(r.event.event_id, {}))
        out[r.event.event_id] = cl.to_dict() if cl.total or cl.marks else None
    return out


def _with_checklist(state: ConsoleState, record: EventRecord, request: Request) -> EventOut:
    return EventOut(
        **event_json(state, record.to_dict(), request), checklist=checklists(state, [record])[record.event.event_id]
    )


def _chunks(lines: Iterator[str], rows: int = 1000) -> Iterator[str]:
    """Lines joined a thousand at a time (each chunk of a sync iterator costs a thread-pool hop)."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= rows:
            yield "".join(batch)
            batch.clear()
    if batch:
        yield "".join(batch)


@router.get("/events.csv", response_class=StreamingResponse, responses={200: {"content": {"text/csv": {}}}})
def export_csv(request: Request, where: EventFilter = Depends(_filter)) -> StreamingResponse:
    """Every matching event as CSV (newest first, at most 100,000 rows)."""
    records, _ = console_state(request).runtime.store.query_records(where, limit=MAX_CSV_ROWS)
    return StreamingResponse(
        _chunks(csv_lines(records)),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": 'attachment; filename="campusguard-events.csv"'},
    )


@router.get("/events/stream", response_class=StreamingResponse, responses={200: {"content": {"text/event-stream": {}}}})
async def stream(request: Request) -> StreamingResponse:
    """Server-sent events: ``event: event`` with the event JSON, once per new or updated event (after commit).

    The stream ends within about 2 s when the caller's session ends or their role drops below what it shows."""
    state = console_state(request)
    subscription = await run_in_threadpool(state.runtime.subscribe_events)
    guard = stream_guard(request, state.users, "operator" if sees_sharp(request) else "viewer")

    async def messages() -> AsyncIterator[str]:
        try:
            yield "retry: 2000\n\n"
            idle_s = 0.0
            # ends when the client leaves, the runtime closes the subscription (stop), or the caller's
            # session ends (logout, removed, demoted, password changed: re-read every second)
            while not subscription.closed and not await request.is_disconnected() and await guard.allowed():
                item = await run_in_threadpool(subscription.get, 1.0)
                if item is None:
                    idle_s += 1.0
                    if idle_s >= SSE_KEEPALIVE_S:
                        idle_s = 0.0
                        yield ": keepalive\n\n"
                    continue
                idle_s = 0.0
                data = await run_in_threadpool(event_json, state, item, request)
                yield f"event: event\nid: {data['id']}\ndata: {json.dumps(data, default=str)}\n\n"
        finally:
            subscription.close()

    return StreamingResponse(
        messages(), media_type="text/event-stream", headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    )


def _stored(state: ConsoleState, event_id: str) -> dict[str, Any]:
    """The stored event's dict (without media URLs); 404 when there is none."""
    record = state.runtime.store.get_record(event_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}")
    return dict(record.to_dict())


@router.get("/events/{event_id}", responses=_NOT_FOUND)
def get_event(event_id: EventId, request: Request) -> EventOut:
    """One event with its review state and media URLs."""
    state = console_state(request)
    record = state.runtime.store.get_record(event_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}")
    return _with_checklist(state, record, request)


def _media(request: Request, event_id: str, kind: Literal["snapshot", "clip"]) -> FileResponse:
    """Blur by role: a viewer gets the redacted variant where the incident's media policy blurs (the
    stricter of the blur its media were made under and the camera's now; unknown, or a camera the
    config no longer names, is the strictest); an operator's or admin's download of the sharp file
    of such an incident is audited once per download (`DownloadLog`: a request without ``Range`` is
    a download; the first byte range of a file by a user opens one, that user's later ranges of it
    within 10 minutes belong to it)."""
    state = console_state(request)
    stored = _stored(state, event_id)
    camera, recorded = stored["camera"], stored.get("media_blur")
    sharp = sees_sharp(request)
    # resolved under its media folder; a viewer gets the redacted variant where the policy blurs
    path = state.runtime.event_media(event_id, kind, viewer_of=None if sharp else camera, recorded_blur=recorded)
    if path is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"event {event_id!r} has no {kind}")
    blur = state.runtime.media_blur(camera, recorded)
    if sharp and blur != "none":
        ranged = "range" in request.headers
        if state.downloads.opens_download(request.state.user.name, f"{kind}:{event_id}", ranged=ranged):
            audit(request, f"media.{kind}.sharp", event_id, camera=camera, blur=blur, ranged=ranged)
    return FileResponse(path, media_type=_MEDIA_TYPES[kind], headers=MEDIA_HEADERS)


@router.get(
    "/events/{event_id}/thumb.jpg",
    response_class=Response,
    responses={200: {"content": {"image/jpeg": {}}}, **_NOT_FOUND},
)
def event_thumbnail(event_id: EventId, request: Request) -> Response:
    """A small snapshot for lists (at most 160 px wide), for every role the redacted one where the
    camera blurs: the incident list never hands out sharp images, so it writes no audit entry."""
    state = console_state(request)
    stored = _stored(state, event_id)
    path = state.runtime.event_media(
        event_id, "snapshot", viewer_of=stored["camera"], recorded_blur=stored.get("media_blur")
    )
    try:
        jpeg = None if path is None else _thumbnail(str(path), path.stat().st_mtime_ns)
    except OSError:  # deleted meanwhile (retention)
        jpeg = None
    if jpeg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"event {event_id!r} has no thumbnail")
    return Response(jpeg, media_type="image/jpeg", headers=MEDIA_HEADERS)


@functools.lru_cache(maxsize=512)
def _thumbnail(path: str, mtime_ns: int) -> bytes | None:
    """The JPEG at ``path`` scaled to at most `THUMB_WIDTH` px wide (cached by path and modification time)."""
    import cv2

    image = cv2.imread(path, cv2.IMREAD_COLOR)
    if image is None:
        return None
    height, width = image.shape[:2]
    if width > THUMB_WIDTH:
        image = cv2.resize(
            image, (THUMB_WIDTH, max(1, round(height * THUMB_WIDTH / width))), interpolation=cv2.INTER_AREA
        )
    ok, buf = cv2.imencode(".jpg", image, [cv2.IMWRITE_JPEG_QUALITY, 80])
    return bytes(buf) if ok else None


@router.get(
    "/events/{event_id}/snapshot.jpg",
    response_class=FileResponse,
    responses={200: {"content": {"image/jpeg": {}}}, **_NOT_FOUND},
)
def event_snapshot(event_id: EventId, request: Request) -> FileResponse:
    """The event's snapshot (JPEG)."""
    return _media(request, event_id, "snapshot")


@router.get(
    "/events/{event_id}/clip.mp4",
    response_class=FileResponse,
    responses={200: {"content": {"video/mp4": {}}}, **_NOT_FOUND},
)
def event_clip(event_id: EventId, request: Request) -> FileResponse:
    """The event's clip (H.264 MP4, a few seconds before and after the start)."""
    return _media(request, event_id, "clip")


def _unticked(state: ConsoleState, records: list[EventRecord]) -> dict[str, int]:
    """Incidents whose rule's checklist has steps left unticked: id -> how many."""
    out = {}
    for eid, cl in checklists(state, records).items():
        if cl and cl["done"] < cl["total"]:
            out[eid] = cl["total"] - cl["done"]
    return out


def _review(
    request: Request, event_id: str, action: ReviewAction, note: str, outcome: str | None = None
) -> EventOut:
    state = console_state(request)
    if action == "resolve" and not note.strip():
        record = state.runtime.store.get_record(event_id)
        if record is not None and (left := _unticked(state, [record])):
            raise HTTPException(
                422,
                f"{left[event_id]} checklist step(s) are not ticked: resolving needs a note saying why",
            )
    try:
        if outcome is None:
            record = state.runtime.store.review(event_id, action, user=request.state.user.name, note=note)
        else:
            record = state.runtime.store.review(
                event_id, action, user=request.state.user.name, note=note, outcome=outcome
            )
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}") from exc
    except ReviewConflictError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from exc
    if outcome is None:
        audit(request, f"event.{action}", event_id, note=note)
    else:
        audit(request, f"event.{action}", event_id, note=note, outcome=outcome)
        state.runtime.count_outcome(record.event.rule_name, outcome)
    data = event_json(state, record.to_dict(), request)
    state.runtime.publish_event_update(data)
    return _with_checklist(state, record, request)


@router.post(
    "/events/{event_id}/checklist",
    dependencies=[Depends(require_role("operator"))],
    responses={**_NOT_FOUND, 422: {"description": "The rule has no such step."}},
)
def check_step(event_id: EventId, body: StepRequest, request: Request) -> EventOut:
    """Tick or untick one step of the incident's checklist (operator or admin); audited with the step."""
    state = console_state(request)
    store = state.runtime.store
    record = store.get_record(event_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}")
    if not isinstance(store, UpsertingEventStore):
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, "this event store keeps no checklists")
    steps = sop_of(state.runtime.loaded.config, record.event.camera_id, record.event.rule_name)
    if body.index >= len(steps):
        raise HTTPException(
            422,
            f"the rule {record.event.rule_name!r} has {len(steps)} checklist step(s)",
        )
    try:
        store.set_step(event_id, steps[body.index], body.checked, user=request.state.user.name)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}") from exc
    audit(request, "event.checklist", event_id, step=steps[body.index], index=body.index, checked=body.checked)
    out = _with_checklist(state, record, request)
    state.runtime.publish_event_update(out.model_dump())
    return out


def _case_source(state: ConsoleState) -> Any:
    """The console's site as an evidence export or a report reads it (`CaseSource`): its store, media and audit log."""
    from campusguard.app.evidence.case import CaseSource

    runtime = state.runtime
    store = runtime.store
    if not isinstance(store, UpsertingEventStore):
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, "this event store cannot export evidence")
    recordings = runtime.loaded.config.outputs.annotated_video_dir
    return CaseSource(
        loaded=runtime.loaded,
        config_text=runtime.config_path.read_text(encoding="utf-8"),
        store=store,
        snapshot_roots=(runtime.snapshots_dir, runtime.media_dir),
        clips_dir=runtime.clips_dir,
        recordings_dir=None if recordings is None else PathType(recordings),
        audit=state.users.audit_about,
    )


@router.get(
    "/events/{event_id}/report.{fmt}",
    dependencies=[Depends(require_role("operator"))],
    response_class=FileResponse,
    responses={200: {"content": {"text/html": {}, "application/pdf": {}}}, **_NOT_FOUND},
)
def incident_report(event_id: EventId, fmt: Literal["html", "pdf"], request: Request) -> Any:
    """The incident report (operator or admin: the snapshot is sharp): facts, the snapshot with the
    rule's zone drawn, timeline, notes, checklist and media hashes; PDF needs the ``reports`` extra."""
    import tempfile

    from starlette.background import BackgroundTask
    from starlette.responses import HTMLResponse

    from campusguard.app.evidence.report import incident_report_html, incident_report_pdf
    from campusguard.errors import MissingDependencyError

    source = _case_source(console_state(request))
    record = source.store.get_record(event_id)
    if record is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}")
    cases = source.incidents([record])
    if fmt == "html":
        return HTMLResponse(incident_report_html(source, cases), headers=MEDIA_HEADERS)
    folder = PathType(tempfile.mkdtemp(prefix="campusguard-report-"))
    out = folder / f"incident-{event_id}.pdf"
    try:
        incident_report_pdf(source, cases, out)
    except MissingDependencyError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, str(exc)) from exc
    return FileResponse(
        out,
        media_type="application/pdf",
        filename=out.name,
        headers=MEDIA_HEADERS,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


@router.get(
    "/reports/shift",
    dependencies=[Depends(require_role("operator"))],
    response_class=Response,
    responses={200: {"content": {"application/pdf": {}, "text/html": {}}}},
)
def shift_report_download(
    request: Request,
    since: datetime = Query(..., description="Shift start (ISO 8601; naive = UTC)."),
    until: datetime | None = Query(None, description="Shift end (ISO 8601; naive = UTC); default now."),
    fmt: Literal["auto", "pdf", "html"] = Query(
        "auto", alias="format", description="auto: PDF where the `reports` extra is installed, else HTML."
    ),
) -> Any:
    """The shift handover report of the incidents started in the period (operator or admin): counts by
    kind, camera, hour and outcome, open and kept incidents, who acknowledged and resolved what."""
    import tempfile

    from starlette.background import BackgroundTask
    from starlette.responses import HTMLResponse

    from campusguard.app.evidence.report import shift_report
    from campusguard.errors import MissingDependencyError

    lo = _aware(since)
    hi = _aware(until) or datetime.now(UTC)
    assert lo is not None
    if hi <= lo:
        raise HTTPException(422, "until must be after since")
    report = shift_report(_case_source(console_state(request)), lo, hi)
    name = f"campusguard-shift-{lo:%Y%m%dT%H%M}"
    html_headers = {**MEDIA_HEADERS, "Content-Disposition": f'attachment; filename="{name}.html"'}
    if fmt == "html":
        return HTMLResponse(report.html(), headers=html_headers)
    folder = PathType(tempfile.mkdtemp(prefix="campusguard-report-"))
    out = folder / f"{name}.pdf"
    try:
        report.pdf(out)
    except MissingDependencyError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        if fmt == "pdf":
            raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, str(exc)) from exc
        return HTMLResponse(report.html(), headers=html_headers)
    return FileResponse(
        out,
        media_type="application/pdf",
        filename=out.name,
        headers=MEDIA_HEADERS,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


@router.get("/noise")
def noise(
    request: Request,
    since: datetime = Query(..., description="Period start (ISO 8601; naive = UTC)."),
    until: datetime | None = Query(None, description="Period end (ISO 8601; naive = UTC); default now."),
    limit: int = Query(100, ge=1, le=1000),
) -> dict[str, Any]:
    """Per rule, zone, camera and hour of day (local): incidents per day and the share of false and
    nuisance alarms, worst first, each with the timeline link of its incidents."""
    from urllib.parse import urlencode

    from campusguard.app.events.noise import noise_rows

    lo = _aware(since)
    hi = _aware(until) or datetime.now(UTC)
    assert lo is not None
    if hi <= lo:
        raise HTTPException(422, "until must be after since")
    records, _ = console_state(request).runtime.store.query_records(
        EventFilter(since=lo, until=hi), limit=MAX_CSV_ROWS, newest_first=False
    )
    rows = noise_rows(records, (hi - lo).total_seconds() / 86400)
    out = []
    for row in rows[:limit]:
        query = urlencode({"camera": row.camera, "rule": row.rule, "since": lo.isoformat(), "until": hi.isoformat()})
        out.append({**row.to_dict(), "incidents_url": f"/events?{query}"})
    return {"since": lo.isoformat(), "until": hi.isoformat(), "rows": out, "groups": len(rows)}


@router.post(
    "/evidence",
    dependencies=[Depends(require_role("operator"))],
    response_class=FileResponse,
    responses={200: {"content": {"application/zip": {}}}, **_NOT_FOUND},
)
def export_evidence(body: EvidenceRequest, request: Request) -> FileResponse:
    """Export incidents as one signed evidence bundle (ZIP; operator or admin): sharp media, history,
    checklist, audit entries, config and camera facts, signed by the site's key. Each incident is
    kept (legal hold) and audited (``evidence.export`` with the reason)."""
    import tempfile

    from starlette.background import BackgroundTask

    from campusguard.app.evidence.export import export_case
    from campusguard.app.evidence.keys import key_path, load_or_create_key

    state = console_state(request)
    source = _case_source(state)
    config = state.runtime.loaded.config
    try:
        records = source.select(body.ids)
    except InvalidInputError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    user = request.state.user.name
    folder = PathType(tempfile.mkdtemp(prefix="campusguard-evidence-"))
    name = f"campusguard-evidence-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.zip"
    try:
        result = export_case(
            source,
            records,
            folder / name,
            key=load_or_create_key(key_path(config)),
            user=user,
            reason=body.reason,
            selection={"events": body.ids},
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    state.users.audit_many(
        user,
        [
            ("evidence.export", eid, {"reason": body.reason, "case": name, "manifest_sha256": result.manifest_sha256})
            for eid in result.incidents
        ],
    )
    return FileResponse(
        result.path,
        media_type="application/zip",
        filename=name,
        headers=MEDIA_HEADERS,
        background=BackgroundTask(shutil.rmtree, folder, ignore_errors=True),
    )


_REVIEW_RESPONSES: Responses = {**_NOT_FOUND, 409: {"description": "Not possible in the event's state."}}


@router.post("/events/{event_id}/ack", dependencies=[Depends(require_role("operator"))], responses=_REVIEW_RESPONSES)
def acknowledge(event_id: EventId, body: NoteRequest, request: Request) -> EventOut:
    """Acknowledge an open event (operator or admin), with a note."""
    return _review(request, event_id, "acknowledge", body.note)


@router.post(
    "/events/{event_id}/resolve", dependencies=[Depends(require_role("operator"))], responses=_REVIEW_RESPONSES
)
def resolve(event_id: EventId, body: ResolveRequest, request: Request) -> EventOut:
    """Resolve an open or acknowledged event (operator or admin), with a note and what was found
    (``outcome``: confirmed, false_alarm or nuisance; audited with it)."""
    return _review(request, event_id, "resolve", body.note, body.outcome)


@router.post("/events/{event_id}/keep", dependencies=[Depends(require_role("operator"))], responses=_NOT_FOUND)
def keep(event_id: EventId, body: KeepRequest, request: Request) -> EventOut:
    """Mark an incident kept, so retention never deletes it nor its media, or undo it (operator or admin)."""
    state = console_state(request)
    store = state.runtime.store
    if not isinstance(store, UpsertingEventStore):
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, "this event store cannot keep incidents")
    try:
        record = store.keep(event_id, body.kept, user=request.state.user.name)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no event {event_id!r}") from exc
    audit(request, "event.keep" if body.kept else "event.unkeep", event_id)
    data = event_json(state, record.to_dict(), request)
    state.runtime.publish_event_update(data)
    return EventOut(**data)


# review at scale: bulk acknowledge / resolve, open incidents per camera (the wall's markers) ------
@router.post(
    "/events/bulk",
    dependencies=[Depends(require_role("operator"))],
    responses={501: {"description": "This event store cannot review in bulk."}},
)
def bulk_review(body: BulkReviewRequest, request: Request) -> BulkReviewOut:
    """Acknowledge or resolve up to 500 incidents with one note (operator or admin), in one transaction.

    Incidents the action does not apply to (``conflicts``: id -> current state) and unknown ids
    (``missing``) are reported and left alone; the others change. Each changed incident gets its own
    audit entry (``event.acknowledge`` / ``event.resolve``, with the note and ``bulk``: how many were
    asked) and is pushed to the live event stream like a single review.
    """
    state = console_state(request)
    store = state.runtime.store
    if not isinstance(store, UpsertingEventStore):
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, "this event store cannot review in bulk")
    user = request.state.user.name
    if body.action == "resolve" and not body.note.strip():
        found = [r for r in (store.get_record(eid) for eid in dict.fromkeys(body.ids)) if r is not None]
        if left := _unticked(state, found):
            raise HTTPException(
                422,
                f"{len(left)} incident(s) have checklist steps not ticked ({', '.join(sorted(left)[:5])}): "
                "resolving them needs a note saying why",
            )
    if body.outcome is not None and body.action != "resolve":
        raise HTTPException(422, "an outcome is recorded when resolving, not when acknowledging")
    result = store.review_many(body.ids, body.action, user=user, note=body.note, outcome=body.outcome)
    asked = len(set(body.ids))
    outcome: dict[str, Any] = {} if body.outcome is None else {"outcome": body.outcome}
    state.users.audit_many(
        user,
        [
            (f"event.{body.action}", r.event.event_id, {"note": body.note, "bulk": asked, **outcome})
            for r in result.updated
        ],
    )
    if body.outcome is not None:
        for r in result.updated:
            state.runtime.count_outcome(r.event.rule_name, body.outcome)
    updated = []
    for record in result.updated:
        data = event_json(state, record.to_dict(), request)
        state.runtime.publish_event_update(data)
        updated.append(EventOut(**data))
    return BulkReviewOut(updated=updated, missing=result.missing, conflicts=result.conflicts)


@router.get("/open-incidents")
def open_incidents(request: Request) -> OpenIncidents:
    """How many open (not yet acknowledged) incidents each camera has: the camera wall's markers."""
    store = console_state(request).runtime.store
    where = EventFilter(state="open")
    if isinstance(store, UpsertingEventStore):
        counts = store.count_by_camera(where)
    else:  # one count per camera
        names = console_state(request).runtime.camera_names()
        counts = {n: store.query_records(replace(where, camera_id=n), limit=0)[1] for n in names}
    counts = {name: n for name, n in sorted(counts.items()) if n}
    return OpenIncidents(cameras=counts, total=sum(counts.values()))
