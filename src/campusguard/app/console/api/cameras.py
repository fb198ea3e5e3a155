"""Cameras: status, latest snapshot, live MJPEG view, and their zones, lines, rules and privacy masks."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from campusguard.app.console.auth import MEDIA_HEADERS, audit, console_state, require_role
from campusguard.app.console.runtime import ConfigSaveError, GroupUnavailableError
from campusguard.app.console.schemas import CameraStatusOut, Responses, ZonesBody
from campusguard.app.console.sessions import stream_guard
from campusguard.app.console.users import role_at_least
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
    """Every camera's state, input and processed frame rates, drops, reconnects and last frame time."""
    return [CameraStatusOut(**dataclasses.asdict(s)) for s in console_state(request).runtime.camera_status()]


@router.get("/cameras/{name}/snapshot.jpg", response_class=Response, responses={**_JPEG, **_NOT_FOUND, **_UNAVAILABLE})
def snapshot(name: str, request: Request) -> Response:
    """The latest annotated frame as JPEG (404 before the first frame); blurred for viewers where the camera has blur on."""
    _check_camera(request, name)
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
async def live(name: str, request: Request) -> StreamingResponse:
    """Live annotated view (MJPEG). Frames are encoded only while someone watches; a slow viewer drops frames.
    Blurred for viewers where the camera has blur on.

    With the cameras on Ray actors the frames are pulled from the camera's actor; while it restarts no frame is sent.
    The stream ends within about 2 s when the caller's session ends or their role drops below what it shows."""
    state = console_state(request)
    runtime = state.runtime
    await run_in_threadpool(_check_camera, request, name)
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


@router.get("/cameras/{name}/zones", responses=_NOT_FOUND)
def get_zones(name: str, request: Request) -> ZonesBody:
    """The camera's zones, lines, rules and privacy section, as in the config file."""
    _check_camera(request, name)
    try:
        return ZonesBody.model_validate(console_state(request).runtime.get_zones(name))
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc


@router.put(
    "/cameras/{name}/zones",
    dependencies=[Depends(require_role("admin"))],
    responses={
        **_NOT_FOUND,
        **_UNAVAILABLE,
        422: {"description": "Invalid zones, lines, rules or masks (the message names the field of the body)."},
        500: {"description": "The config file could not be saved; nothing changed."},
    },
)
def put_zones(name: str, body: ZonesBody, request: Request) -> ZonesBody:
    """Replace the camera's zones, lines, rules (and, when sent, its privacy masks and blur): validated
    like the config file, applied live (unchanged rules keep their ongoing incidents), saved with a backup.

    Without ``rules`` or ``privacy`` in the body the camera keeps its own. Privacy changes are
    audited on their own as well (``privacy.update``)."""
    _check_camera(request, name)
    runtime = console_state(request).runtime
    new: dict[str, Any] = body.model_dump(mode="json", exclude_unset=True)
    new.setdefault("zones", [])
    new.setdefault("lines", [])
    try:
        before = runtime.get_zones(name)
        saved = runtime.put_zones(name, new)
    except KeyError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no camera {name!r}") from exc
    except GroupUnavailableError as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "5"}) from exc
    except ConfigSaveError as exc:
        log.error("zones of camera %s not saved: %s", name, exc)
        raise HTTPException(500, "the config file could not be saved; nothing changed (see the server log)") from exc
    except ConfigError as exc:  # the runtime names the body's field, never the server's path
        raise HTTPException(422, str(exc)) from exc
    audit(request, "zones.update", name, before=before, after=saved)
    if saved["privacy"] != before["privacy"]:
        audit(request, "privacy.update", name, before=before["privacy"], after=saved["privacy"])
    return ZonesBody.model_validate(saved)
