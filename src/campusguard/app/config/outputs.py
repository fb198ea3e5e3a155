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
        description="Write one annotated MP4 per camera here (zones, boxes, ids, active incidents).",
    )
    annotated_fps: float | None = Field(
        None,
        gt=0,
        le=240,
        title="Annotated video frame rate",
        description="Frame rate of annotated videos; none uses the source's.",
    )
    annotated_segment_s: float = Field(
        600.0,
        gt=0,
        le=86400,
        title="Annotated segment length",
        description="Start a new annotated file every this many seconds of video (an open MP4 grows in memory).",
    )
    snapshots_dir: str | None = Field(
        None, title="Snapshot folder", description="Write a JPEG snapshot per event start here."
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
