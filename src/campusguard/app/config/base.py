"""What every config section shares: the base model and the location type of a field."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigModel", "Loc", "check_imgsz"]

Loc = tuple[int | str, ...]
"""Where a field sits in the file, as pydantic spells it: ``("cameras", 0, "zones", 1, "polygon")``."""


class ConfigModel(BaseModel):
    """Base of every section: unknown keys are errors and defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


def check_imgsz(value: int | tuple[int, int] | None) -> int | tuple[int, int] | None:
    """A network input size (an int, or [height, width]): positive multiples of 32 up to 4096, or None."""
    if value is None:
        return None
    dims = (value,) if isinstance(value, int) else value
    if any(d < 32 or d > 4096 or d % 32 for d in dims):
        raise ValueError(f"imgsz must be positive multiples of 32 up to 4096, got {value}")
    return value
