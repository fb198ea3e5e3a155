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

Coordinates are frame pixels (x right, y down). Zones given as fractions of the frame (0..1)
are converted to pixels with ``resolution_wh``. Stateless except `LineZone`, whose state is
per instance (one per camera and line).
"""

from campusguard.zones.line import LineCrossings, LineZone, side_of_line
from campusguard.zones.polygon import PolygonZone, points_in_polygon

__all__ = ["PolygonZone", "points_in_polygon", "LineZone", "LineCrossings", "side_of_line"]
