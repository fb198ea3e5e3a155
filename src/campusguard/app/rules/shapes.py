"""What the rules need of a camera's zone and line sections: structural protocols, so that the rule
package needs nothing of the config package (which derives its rule union from the rule registry).

`campusguard.app.config.zones`' `ZoneConfig` and `LineConfig` satisfy them as they are.
"""

from __future__ import annotations

from typing import Any, Protocol

from campusguard.zones import LineZone

__all__ = ["LineSection", "ShapeSection"]


class ShapeSection(Protocol):
    """A named zone or line section, as its JSON (a rule's fingerprint includes the shape it watches)."""

    @property
    def name(self) -> str: ...

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The section's fields (``mode="json"``: JSON-compatible values)."""
        ...


class LineSection(ShapeSection, Protocol):
    """A line section, built into the kit's `LineZone` for a frame size."""

    def build(self, resolution_wh: tuple[int, int], hysteresis_px: float = 0.0) -> LineZone:
        """The line for frames of ``resolution_wh`` (width, height), with ``hysteresis_px`` of dead band."""
        ...
