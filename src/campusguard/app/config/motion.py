"""The camera's motion section: run the detector only where something moves (plus tracked objects)."""

from __future__ import annotations

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["MotionConfig"]


class MotionConfig(ConfigModel):
    """Motion gating of one camera: whole frame every ``keyframe_s``, else crops around motion and tracks."""

    enabled: bool | None = Field(
        None,
        title="Enabled",
        description="Detect only where there is motion or a tracked object (plus the whole frame every keyframe_s). "
        "Default: on for live sources, off for files and folders.",
    )
    threshold: int = Field(
        25,
        ge=1,
        le=254,
        title="Threshold",
        description="Grey-level difference (0..255) from the background that counts as motion.",
    )
    min_area: float = Field(
        0.0005,
        ge=0,
        le=1,
        title="Smallest motion",
        description="Smallest moving area kept, as a fraction of the frame's area.",
    )
    width: int = Field(
        320,
        ge=32,
        le=4096,
        title="Working width",
        description="Motion is found on the frame downscaled to this width, pixels.",
    )
    alpha: float = Field(
        0.02,
        gt=0,
        le=1,
        title="Background rate",
        description="Background learning rate per frame; a still object fades into the background after about 3/alpha frames.",
    )
    keyframe_s: float = Field(
        5.0,
        gt=0,
        le=3600,
        title="Keyframe interval",
        description="The whole frame is detected at least this often, seconds.",
    )
    min_region: int | None = Field(
        None,
        ge=32,
        le=4096,
        title="Smallest region",
        description="Smallest side of a detection crop, pixels; none uses the network's input side (crops at native resolution).",
    )
    margin: float = Field(
        1.0,
        ge=0,
        le=2,
        title="Margin",
        description="Context around each moving or tracked box, as a fraction of its longer side (a crop is at least "
        "1 + 2 x margin times the box). 1.0 keeps near, large people at about the scale the network sees in whole frames "
        "(benchmarks/small_objects.py: 0.25 loses half of the people over 80 px tall in 720p).",
    )
    full_frame_fraction: float = Field(
        0.5,
        gt=0,
        le=1,
        title="Whole-frame share",
        description="When the crops would cover more than this share of the frame, the whole frame is detected instead.",
    )
    max_region_cost: float = Field(
        1.0,
        gt=0,
        le=100,
        title="Largest crop cost",
        description="When the crops would cost the network more than this many whole frames (input pixels: a 320x320 "
        "crop is 1.67 whole 16:9 frames at 192x320), the whole frame is detected instead. Crops buy recall of small, far "
        "objects at native resolution; 1.0 (the default) never pays more than a whole frame.",
    )
    busy_hold_s: float = Field(
        5.0,
        ge=0,
        le=3600,
        title="Busy hold",
        description="When the gate finds the whole frame needed on two frames in a row (large motion, costly crops, or "
        "tracked objects where no crop fits), it sends whole frames for this long without its own work (motion "
        "analysis), batched like an ungated camera's, then looks again; 0 never stops looking.",
    )
