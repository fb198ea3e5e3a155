"""What every config section shares: the base model and the location type of a field."""

from __future__ import annotations

from campusguard.app.infra.configmodel import ConfigModel
from campusguard.models.info import check_imgsz

__all__ = ["ConfigModel", "Loc", "validate_imgsz"]

Loc = tuple[int | str, ...]
"""Where a field sits in the file, as pydantic spells it: ``("cameras", 0, "zones", 1, "polygon")``."""


def validate_imgsz(value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    """A network input size (an int, or [height, width]) checked by the kit's `check_imgsz` (up to 4096), or None."""
    if value is not None:
        check_imgsz(value, max_size=4096)  # InvalidInputError is a ValueError: pydantic reports it on the field
    return value
