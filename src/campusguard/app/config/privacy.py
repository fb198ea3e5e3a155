"""A camera's privacy section: areas that are never analysed, stored or shown, and how people are
shown to viewers who only need counts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, Strict, field_validator, model_validator

from campusguard.app.config.base import ConfigModel
from campusguard.app.config.zones import PolygonShapeConfig

__all__ = ["BlurMode", "PrivacyConfig", "PrivacyMaskConfig"]

BlurMode = Literal["none", "persons", "faces"]


class PrivacyMaskConfig(PolygonShapeConfig):
    """A polygon filled with one flat colour on every decoded frame, before detection."""

    name: str = Field(
        "mask",
        title="Name",
        description="Mask name, unique per camera (for the editor and the audit log).",
        min_length=1,
        max_length=64,
    )


class PrivacyConfig(ConfigModel):
    """Privacy masks and blur by role for one camera."""

    masks: list[PrivacyMaskConfig] = Field(
        default_factory=list,
        title="Masks",
        description="Areas filled solid on the decoded frame before detection: never analysed, stored, streamed or exported.",
        max_length=32,
    )
    fill_bgr: tuple[Annotated[int, Strict()], Annotated[int, Strict()], Annotated[int, Strict()]] = Field(
        (0, 0, 0), title="Mask colour", description="Fill colour of the masks as [blue, green, red], 0..255."
    )
    blur: BlurMode = Field(
        "none",
        title="Blur for viewers",
        description="What viewers see blurred in live view, snapshots and clips: `none`, `persons` (whole person boxes) "
        "or `faces` (the head part of each person box). Operators and admins see the frame sharp; their downloads are audited.",
    )

    @field_validator("fill_bgr")
    @classmethod
    def _channels(cls, value: tuple[int, int, int]) -> tuple[int, int, int]:
        if any(c < 0 or c > 255 for c in value):
            raise ValueError("each channel of fill_bgr must be 0..255")
        return value

    @model_validator(mode="after")
    def _unique_names(self) -> PrivacyConfig:
        names = [m.name for m in self.masks]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(f"mask name {name!r} is used twice")
        return self

    @property
    def active(self) -> bool:
        """Whether this section changes any frame (a mask or a blur)."""
        return bool(self.masks) or self.blur != "none"
