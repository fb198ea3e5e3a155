"""`GET /api/v1/storage`: how full the data volume is and what the media take (the camera wall's disk line).

Operators see the disk before it fills: free and total bytes of the volume holding the store and
the media, media bytes kept by kind (after the retention cleanup's last pass), the configured
limits (``retention.max_media``, ``retention.min_free``), and the volumes a write found full.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from campusguard.app.console.identity.auth import ConsoleState, console_state
from campusguard.app.console.identity.users import role_at_least

__all__ = ["FullVolumeOut", "StorageOut", "router"]

router = APIRouter(tags=["cameras"])


class FullVolumeOut(BaseModel):
    """A volume a write found full, and still full."""

    volume: str | None = Field(description="Mount point of the volume (operators and admins; null for viewers).")
    free_bytes: int = Field(description="Free bytes when the last write failed.")
    last_error: str | None = Field(
        description="What the last failed write said (operators and admins; null for viewers)."
    )


class StorageOut(BaseModel):
    """The data volume and the media on it."""

    free_bytes: int = Field(description="Free bytes of the volume holding the store and the media.")
    total_bytes: int = Field(description="Size of that volume, bytes.")
    media_bytes: dict[str, int] = Field(
        description="Media kept by kind (snapshots, clips, recordings) after the last cleanup pass; empty before it."
    )
    max_media_bytes: int | None = Field(description="`retention.max_media` in bytes, or null for no limit.")
    min_free_bytes: int = Field(description="`retention.min_free` of this volume, bytes.")
    full_volumes: list[FullVolumeOut] = Field(description="Volumes a write found full; media are left out there.")


@router.get("/storage")
async def storage(request: Request, state: ConsoleState = Depends(console_state)) -> StorageOut:
    """Disk use of the data volume, media kept by kind, the retention limits and any full volume
    (its mount point and last error for operators and admins; viewers get the sizes only)."""
    status = await run_in_threadpool(state.runtime.storage_status)  # statvfs on a slow disk: not on the loop
    detail = role_at_least(request.state.user.role, "operator")
    return StorageOut(
        free_bytes=status.free_bytes,
        total_bytes=status.total_bytes,
        media_bytes=status.media_bytes,
        max_media_bytes=status.max_media_bytes,
        min_free_bytes=status.min_free_bytes,
        full_volumes=[
            FullVolumeOut(
                volume=v.volume if detail else None,
                free_bytes=v.free_bytes,
                last_error=v.last_error if detail else None,
            )
            for v in status.full_volumes
        ],
    )
