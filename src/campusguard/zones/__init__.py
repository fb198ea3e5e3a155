"""Polygon zones and counting lines, tested on box anchors (bottom-centre by default).

Public API:
    `PolygonZone(polygon_xy, name, resolution_wh=None, units="auto")`: a validated polygon;
        ``contains(points_xy) -> (N,) bool`` and ``trigger(detections, anchor="bottom_center")
        -> (N,) bool``. Points on the boundary count as inside.
    `LineZone(start_xy, end_xy, name, in_side="right", hysteresis_px=0, stitch_radius=0.5, ...)`:
        a counting line; ``update(detections) -> LineCrossings`` with per-row ``crossed_in`` /
        ``crossed_out`` masks, and running ``in_count`` / ``out_count``. Needs ``tracker_id``;
        a tracker id switch next to the line is stitched (see `LineZone`).
    `side_of_line(points_xy, start_xy, end_xy)`: signed distance of points from a directed line.

    `polygon_problem(points)`, `line_problem(points)`, `units_problem(points, units)`: what is
        wrong with a shape (a message) or None; the one place shapes are checked, used by the
        classes above and by the app's config validators.
    `to_pixels(points, resolution_wh, units, what)`: the one conversion of fractions to pixels.

Coordinates are frame pixels (x right, y down). ``units`` (`Units`) is ``"pixels"``,
``"fraction"`` (of the frame, 0..1, converted to pixels with ``resolution_wh``) or ``"auto"``. Stateless except `LineZone`, whose state is
per instance (one per camera and line).
"""

from campusguard.zones.line import LineCrossings, LineZone, line_problem, side_of_line
from campusguard.zones.polygon import (
    FrameUnits,
    PolygonZone,
    Units,
    points_in_polygon,
    polygon_problem,
    to_pixels,
    units_problem,
)

__all__ = [
    "FrameUnits",
    "LineCrossings",
    "LineZone",
    "PolygonZone",
    "Units",
    "line_problem",
    "points_in_polygon",
    "polygon_problem",
    "side_of_line",
    "to_pixels",
    "units_problem",
]
