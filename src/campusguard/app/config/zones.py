"""Zones and lines of a camera: named shapes checked by the kit (`campusguard.zones`), built into
`PolygonZone` and `LineZone` once the frame size is known."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, Strict, field_validator, model_validator

from campusguard.app.config.base import ConfigModel
from campusguard.app.infra.configmodel import NameText
from campusguard.zones import FrameUnits, LineZone, PolygonZone, line_problem, polygon_problem, units_problem

__all__ = ["LineConfig", "PolygonShapeConfig", "ZoneConfig"]

Coordinate = Annotated[float, Strict()]
"""A coordinate: a number (an int or a float), never a boolean or a string (``[true, 1]`` is no point)."""
Point = tuple[Coordinate, Coordinate]


def _checked(problem: str | None) -> None:
    if problem:
        raise ValueError(problem)


class PolygonShapeConfig(ConfigModel):
    """A named polygon of one camera, in pixels or fractions of its frame, checked by the kit
    (`polygon_problem`, `units_problem`): what zones and privacy masks share."""

    name: NameText = Field(
        "shape",
        title="Name",
        description="Name, unique per camera.",
        min_length=1,
        max_length=64,
    )
    polygon: list[Point] = Field(
        default_factory=list,
        title="Polygon",
        description="Vertices as [x, y] pairs, in pixels of the frame or in fractions 0..1 (see `units`).",
        max_length=256,
    )
    units: FrameUnits = Field(
        "pixels", title="Units", description="`pixels` of the camera frame, or `fraction` of its width and height."
    )

    @field_validator("polygon")
    @classmethod
    def _valid_polygon(cls, value: list[Point]) -> list[Point]:
        _checked(polygon_problem(value))
        return value

    @model_validator(mode="after")
    def _valid_units(self) -> Self:
        _checked(units_problem(self.polygon, self.units))
        return self


class ZoneConfig(PolygonShapeConfig):
    """A named polygon zone of one camera."""

    name: NameText = Field(
        "zone",
        title="Name",
        description="Zone name, unique per camera; rules refer to it.",
        min_length=1,
        max_length=64,
    )
    anchor: Literal["bottom_center", "center"] = Field(
        "bottom_center",
        title="Anchor",
        description="Point of each box tested against the zone (bottom-centre by default, as Frigate and DeepStream do).",
    )

    def build(self, resolution_wh: tuple[int, int]) -> PolygonZone:
        """The zone for frames of ``resolution_wh`` (width, height); `InvalidInputError` if it leaves them."""
        return PolygonZone(self.polygon, self.name, resolution_wh=resolution_wh, units=self.units)


class LineConfig(ConfigModel):
    """A named counting line of one camera."""

    name: NameText = Field(
        "line",
        title="Name",
        description="Line name, unique per camera; rules refer to it.",
        min_length=1,
        max_length=64,
    )
    points: list[Point] = Field(
        default_factory=lambda: [(0.0, 0.5), (1.0, 0.5)],
        title="Points",
        description="The two end points [[x1, y1], [x2, y2]] in pixels or fractions (see `units`).",
        min_length=2,
        max_length=2,
    )
    units: FrameUnits = Field("pixels", title="Units", description="`pixels` or `fraction` of the frame.")
    in_side: Literal["left", "right"] = Field(
        "right",
        title="Inside",
        description="Which side of the directed line (walking from the first point to the second, as seen on screen) counts as 'in'.",
    )

    @field_validator("points")
    @classmethod
    def _valid_line(cls, value: list[Point]) -> list[Point]:
        _checked(line_problem(value))
        return value

    @model_validator(mode="after")
    def _valid_units(self) -> LineConfig:
        _checked(units_problem(self.points, self.units))
        return self

    def build(self, resolution_wh: tuple[int, int], hysteresis_px: float = 0.0) -> LineZone:
        """The line for frames of ``resolution_wh``; `InvalidInputError` if it leaves them."""
        return LineZone(
            self.points[0],
            self.points[1],
            self.name,
            in_side=self.in_side,
            resolution_wh=resolution_wh,
            units=self.units,
            hysteresis_px=hysteresis_px,
        )
