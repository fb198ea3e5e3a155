"""The tracker section: ByteTrack settings, one tracker per camera."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["TrackerConfig"]


class TrackerConfig(ConfigModel):
    """Multi-object tracking (ByteTrack), one tracker per camera."""

    kind: Literal["bytetrack"] = Field("bytetrack", title="Tracker", description="Tracking algorithm.")
    lost_track_s: float = Field(
        1.0, ge=0, le=600, title="Lost-track time", description="Seconds a track survives without a matching detection."
    )
    track_activation_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        title="Activation threshold",
        description="Minimum confidence for a detection to start a track.",
    )
    high_conf_threshold: float = Field(
        0.5,
        ge=0,
        le=1,
        title="High-confidence threshold",
        description="Confidence splitting ByteTrack's first (high) and second (low) association stages.",
    )
    min_iou: float = Field(
        0.1,
        ge=0,
        le=1,
        title="Minimum IoU",
        description="Minimum IoU between a predicted track box and a detection to match them.",
    )
    min_consecutive_frames: int = Field(
        2,
        ge=1,
        le=100,
        title="Confirmation frames",
        description="Frames a new track must be matched in a row before it gets an id.",
    )
