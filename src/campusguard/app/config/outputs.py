"""The outputs section: annotated video, snapshots and metrics."""

from __future__ import annotations

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["OutputsConfig"]


class OutputsConfig(ConfigModel):
    """Optional outputs."""

    annotated_video_dir: str | None = Field(
        None,
        title="Annotated video folder",
        description=(
            "Record each camera's annotated view here (zones, boxes, ids, active incidents), as finished MP4 "
            "segments named <camera>_<UTC start>_<counter>.mp4."
        ),
    )
    annotated_fps: float | None = Field(
        None,
        gt=0,
        le=240,
        title="Annotated video frame rate",
        description="Frame rate of annotated videos; none uses the source's.",
    )
    annotated_segment_s: float = Field(
        60.0,
        gt=0,
        le=86400,
        title="Annotated segment length",
        description=(
            "Finish the annotated file and start a new one every this many seconds of video: a crash or a full "
            "disk loses at most the open segment."
        ),
    )
    snapshots_dir: str | None = Field(
        None, title="Snapshot folder", description="Write a JPEG snapshot per event start here."
    )
    media_reserve_mb: float = Field(
        1.0,
        ge=0,
        le=1_000_000,
        title="Room kept for events",
        description=(
            "Media (recording, snapshots, clips) are left out while their volume has less than this many MiB "
            "free, so event rows still fit on a disk that fills."
        ),
    )
    metrics_interval_s: float = Field(
        10.0,
        ge=0,
        le=86400,
        title="Metrics interval",
        description="Print per-camera metrics every this many seconds (0: only at exit).",
    )
    metrics_file: str | None = Field(
        None, title="Metrics file", description="Also append metrics as JSON lines to this file."
    )
