"""What every config section shares: the base model and the location type of a field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from campusguard.models.info import check_imgsz

__all__ = ["ConfigModel", "Loc", "validate_imgsz"]

Loc = tuple[int | str, ...]
"""Where a field sits in the file, as pydantic spells it: ``("cameras", 0, "zones", 1, "polygon")``."""


class ConfigModel(BaseModel):
    """Base of every section: unknown keys are errors and defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def validate_imgsz(value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    """A network input size (an int, or [height, width]) checked by the kit's `check_imgsz` (up to 4096), or None."""
    if value is not None:
        check_imgsz(value, max_size=4096)  # InvalidInputError is a ValueError: pydantic reports it on the field
    return value
