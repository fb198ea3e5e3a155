"""Cameras: status, latest snapshot, live MJPEG view, and their zones, lines, rules and privacy masks."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from campusguard.app.config.editor import CameraNotInFileError, ConfigSaveError
from campusguard.app.config.revisions import RevisionConflictError
from campusguard.app.console.api.health import health_out
from campusguard.app.console.identity.auth import MEDIA_HEADERS, audit, console_state, require_role
from campusguard.app.console.identity.streams import stream_guard
from campusguard.app.console.identity.users import role_at_least
from campusguard.app.console.node_proxy import proxy_get, was_proxied
from campusguard.app.console.runtime import GroupUnavailableError
from campusguard.app.console.schemas import CameraStatusOut, Responses, ZonesBody
from campusguard.errors import ConfigError

router = APIRouter(tags=["cameras"])
log = logging.getLogger("campusguard.app.console")
MJPEG_BOUNDARY = "frame"
_NOT_FOUND: Responses = {404: {"description": "No such camera."}}
_JPEG: Responses = {200: {"content": {"image/jpeg": {}}, "description": "A JPEG image."}}
_UNAVAILABLE: Responses = {
    503: {"description": "With the cameras on Ray actors (serve --ray): the camera's group did not answer in time."}
}


def _redacted(request: Request) -> bool:
    """Blur by role: viewers get the redacted frames (the same as sharp where the camera has no blur)."""
    return not role_at_least(request.state.user.role, "operator")


def _check_camera(request: Request, name: str) -> None:
    if name not in console_state(request).runtime.camera_names():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}")


@router.get("/cameras")
def list_cameras(request: Request) -> list[CameraStatusOut]:
    """Every camera's state, input and processed frame rates, drops, reconnects, last frame time, and
    whether it can see (``health``: null when its health is off, before its start, or on Ray)."""
    runtime = console_state(request).runtime
    return [
        CameraStatusOut(**dataclasses.asdict(s), health=health_out(runtime, s.name)) for s in runtime.camera_status()
    ]


async def _remote(request: Request, name: str) -> str | None:
    """With nodes: the URL of the other node that runs camera ``name`` (its media is fetched there).
    A request another node proxied here for a camera that does not run here either is not sent on
    (the nodes disagree for a moment about who runs it): 503, try again."""
    remote = await run_in_threadpool(console_state(request).runtime.remote_url, name)
    if remote is not None and was_proxied(request):
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, f"camera {name!r} is moving between nodes", headers={"Retry-After": "2"}
        )
    return remote


@router.get("/cameras/{name}/snapshot.jpg", response_class=Response, responses={**_JPEG, **_NOT_FOUND, **_UNAVAILABLE})
async def snapshot(name: str, request: Request) -> Response:
    """The latest annotated frame as JPEG (404 before the first frame); blurred for viewers where the camera has blur on.
    With nodes, a camera another node runs is fetched from that node with the caller's credentials."""
    await run_in_threadpool(_check_camera, request, name)
    remote = await _remote(request, name)
    if remote is not None:
        return await proxy_get(request, remote, stream=False)
    return await run_in_threadpool(_local_snapshot, name, request)


def _local_snapshot(name: str, request: Request) -> Response:
    try:
        jpeg = console_state(request).runtime.snapshot_jpeg(name, _redacted(request))
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc
    except GroupUnavailableError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc
    if jpeg is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"camera {name!r} has no frame yet")
    return Response(jpeg, media_type="image/jpeg", headers=MEDIA_HEADERS)


def mjpeg_part(jpeg: bytes) -> bytes:
    """One part of a ``multipart/x-mixed-replace`` MJPEG stream."""
    head = f"--{MJPEG_BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n".encode()
    return head + jpeg + b"\r\n"


@router.get(
    "/cameras/{name}/live.mjpeg",
    response_class=StreamingResponse,
    responses={
        200: {"content": {f"multipart/x-mixed-replace; boundary={MJPEG_BOUNDARY}": {}}},
        **_NOT_FOUND,
    },
)
async def live(name: str, request: Request) -> Response:
    """Live annotated view (MJPEG). Frames are encoded only while someone watches; a slow viewer drops frames.
    Blurred for viewers where the camera has blur on.

    With the cameras on Ray actors the frames are pulled from the camera's actor; while it restarts no frame is sent.
    The stream ends within about 2 s when the caller's session ends or their role drops below what it shows.
    With nodes, a camera another node runs is streamed from that node with the caller's credentials."""
    state = console_state(request)
    runtime = state.runtime
    await run_in_threadpool(_check_camera, request, name)
    remote = await _remote(request, name)
    if remote is not None:
        return await proxy_get(request, remote, stream=True)
    redacted = _redacted(request)
    viewer = await run_in_threadpool(runtime.open_viewer, name, 2, redacted)
    guard = stream_guard(request, state.users, "viewer" if redacted else "operator")

    async def parts() -> AsyncIterator[bytes]:
        try:
            # ends when the client leaves, the runtime closes the viewer (stop), or the caller's
            # session ends (logout, removed, demoted, password changed: re-read every second)
            while not viewer.closed and not await request.is_disconnected() and await guard.allowed():
                jpeg = await run_in_threadpool(viewer.get, 1.0)
                if jpeg is not None:
                    yield mjpeg_part(jpeg)
        finally:
            viewer.close()

    return StreamingResponse(
        parts(),
        media_type=f"multipart/x-mixed-replace; boundary={MJPEG_BOUNDARY}",
        headers={**MEDIA_HEADERS, "X-Accel-Buffering": "no"},
    )


def _etag(revision: str) -> str:
    return f'"{revision}"'


def _if_match_revisions(if_match: str) -> list[str] | None:
    """The revisions an ``If-Match`` header names (RFC 9110: a list of entity tags), ``None`` for ``*`` (any)."""
    tags = [t.strip() for t in if_match.split(",")]
    if "*" in tags:
        return None
    return [t.removeprefix("W/").strip('"') for t in tags if t]


_ZONES_500 = "the config file could not be saved; nothing changed (see the server log)"


@router.get(
    "/cameras/{name}/zones",
    response_model=ZonesBody,
    responses={
        **_NOT_FOUND,
        200: {"headers": {"ETag": {"description": "This camera's zones revision (send as If-Match)."}}},
    },
)
def get_zones(name: str, request: Request) -> JSONResponse:
    """The camera's zones, lines, rules (each with its name) and privacy section, as in the config
    file now; the ``ETag`` header is the revision of this camera's zones (``"cam-<16 hex>"``, a
    digest of exactly what this returns), for the ``If-Match`` of a ``PUT``. Edits to other cameras
    do not change it."""
    _check_camera(request, name)
    try:
        zones, revision = console_state(request).runtime.zones_revision(name)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc
    except ConfigSaveError as exc:
        log.error("zones of camera %s not read: %s", name, exc)
        raise HTTPException(500, "the config file could not be read (see the server log)") from exc
    # the config models' own dump: sent as it is (checking 95 shapes of 256 points again costs ~0.1 s)
    return JSONResponse(zones, headers={"ETag": _etag(revision), "Cache-Control": "no-store"})


def _rule_changes(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The names of the rules an edit added, changed and removed (rules are known by name)."""
    old = {r.get("name"): r for r in before}
    new = {r.get("name"): r for r in after}
    return {
        "rules_added": [str(n) for n in new if n not in old],
        "rules_changed": [str(n) for n in new if n in old and new[n] != old[n]],
        "rules_removed": [str(n) for n in old if n not in new],
    }


@router.post(
    "/cameras/{name}/zones/replay",
    dependencies=[Depends(require_role("operator"))],
    responses={**_NOT_FOUND, 422: {"description": "Invalid zones, lines or rules (the message names the field)."}},
)
def replay_zones(name: str, body: ZonesBody, request: Request, days: float = Query(7.0, gt=0, le=90)) -> JSONResponse:
    """Replay the last 7 days: what the edited zones, lines and rules (the body a save sends) would have
    raised over the camera's stored tracks, against its stored incidents and their outcomes
    (`campusguard replay`'s JSON); nothing is saved. Rules that read pixels are left out (``skipped_rules``)."""
    _check_camera(request, name)
    new: dict[str, Any] = body.model_dump(mode="json", exclude_unset=True)
    new.pop("privacy", None)
    try:
        result = console_state(request).runtime.replay_zones(name, new, days=days)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc
    except ConfigError as exc:
        raise HTTPException(422, str(exc)) from exc
    return JSONResponse(result.to_dict())


@router.put(
    "/cameras/{name}/zones",
    response_model=ZonesBody,
    dependencies=[Depends(require_role("admin"))],
    responses={
        **_NOT_FOUND,
        **_UNAVAILABLE,
        409: {
            "description": "This camera's zones, rules or masks changed since the If-Match revision (another admin "
            "saved them, or the config file was edited): nothing saved; `revision` is the camera's current one."
        },
        422: {"description": "Invalid zones, lines, rules or masks (the message names the field of the body)."},
        428: {"description": "No If-Match header: send the ETag of the GET the edit was made on."},
        500: {"description": "The config file could not be saved; nothing changed."},
    },
)
def put_zones(
    name: str,
    body: ZonesBody,
    request: Request,
    if_match: str | None = Header(None, description="The ETag of the GET this edit was made on (or `*`)."),
) -> JSONResponse:
    """Replace the camera's zones, lines, rules (and, when sent, its privacy masks and blur): validated
    like the config file, applied live (unchanged rules keep their ongoing incidents), saved with the
    previous versions kept. A conditional request: ``If-Match`` must name this camera's revision (the
    ``ETag`` of the GET), else 409 with the current one (this camera's section changed since), 428
    without it. Saves to other cameras meanwhile are no conflict: only this camera's section of the
    file is replaced, the rest is kept as it is on disk.

    Without ``rules`` or ``privacy`` in the body the camera keeps its own. A save that changes
    nothing writes nothing. Audited as ``zones.update`` with the rules added, changed and removed by
    name; privacy changes on their own as well (``privacy.update``)."""
    _check_camera(request, name)
    if if_match is None:
        raise HTTPException(
            status.HTTP_428_PRECONDITION_REQUIRED,
            "send If-Match with the ETag of GET /api/v1/cameras/{name}/zones (the revision the edit was made on)",
        )
    runtime = console_state(request).runtime
    new: dict[str, Any] = body.model_dump(mode="json", exclude_unset=True)
    new.setdefault("zones", [])
    new.setdefault("lines", [])
    try:
        saved = runtime.save_zones(name, new, _if_match_revisions(if_match))
    except RevisionConflictError as exc:
        return JSONResponse(
            {
                "detail": f"camera {name!r} was changed since you loaded its zones (another admin saved it, "
                "or its section of the config file was edited): nothing saved; reload to see the changes",
                "revision": exc.current,
            },
            status_code=status.HTTP_409_CONFLICT,
            headers={"ETag": _etag(exc.current)},
        )
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc
    except GroupUnavailableError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc
    except CameraNotInFileError as exc:
        log.warning("zones of camera %s not saved: %s", name, exc)
        raise HTTPException(
            status.HTTP_409_CONFLICT,
            f"camera {name!r} is no longer in the config file (renamed or removed by hand): nothing saved; "
            "restart the service to take the file as it is",
        ) from exc
    except ConfigSaveError as exc:
        log.error("zones of camera %s not saved: %s", name, exc)
        raise HTTPException(500, _ZONES_500) from exc
    except ConfigError as exc:  # the runtime names the body's field, never the server's path
        raise HTTPException(422, str(exc)) from exc
    before, after = saved.before, saved.zones
    if saved.changed:
        audit(
            request, "zones.update", name, before=before, after=after, **_rule_changes(before["rules"], after["rules"])
        )
        if after["privacy"] != before["privacy"]:
            audit(request, "privacy.update", name, before=before["privacy"], after=after["privacy"])
    return JSONResponse(after, headers={"ETag": _etag(saved.revision)})  # the models' dump, not checked again
