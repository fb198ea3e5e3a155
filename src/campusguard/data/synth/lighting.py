"""Lighting variants: a BGR gain applied to diffuse colours, plus sky colours and a night flag."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Lighting", "LIGHTINGS", "Color", "shade"]

Color = tuple[int, int, int]


@dataclass(frozen=True)
class Lighting:
    """One lighting variant.

    Attributes:
        name: short name (``day``, ``overcast``, ``dusk``, ``night``).
        gain: BGR multipliers applied to every diffuse (non-emissive) colour.
        sky_top: BGR sky colour at the top of the frame.
        sky_horizon: BGR sky colour at the horizon.
        night: whether lamps, windows and headlights glow.
    """

    name: str
    gain: tuple[float, float, float]
    sky_top: Color
    sky_horizon: Color
    night: bool


LIGHTINGS: tuple[Lighting, ...] = (
    Lighting("day", (1.0, 1.0, 1.0), (200, 140, 90), (235, 210, 185), False),
    Lighting("overcast", (0.82, 0.8, 0.78), (175, 170, 165), (205, 200, 195), False),
    Lighting("dusk", (0.55, 0.6, 0.78), (120, 80, 70), (110, 150, 230), False),
    Lighting("night", (0.32, 0.27, 0.24), (45, 22, 12), (70, 45, 35), True),
)


def shade(color: Color, light: Lighting) -> Color:
    """Diffuse ``color`` (BGR 0..255) as seen under ``light``."""
    return (
        min(255, int(color[0] * light.gain[0])),
        min(255, int(color[1] * light.gain[1])),
        min(255, int(color[2] * light.gain[2])),
    )
