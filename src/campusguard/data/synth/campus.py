"""The campus seen by the fixed video camera: zones, fence line, road and sidewalks in world metres.

World coordinates are metres, ``x`` to the right and ``z`` depth away from the camera (see
`campusguard.data.synth.camera`). The same layout is one of the still-image scenes, so the
detector trained on the stills has seen this campus (with random objects) before the videos.
"""

from __future__ import annotations

import numpy as np

from campusguard.data.synth.scene import Building, Layout, Patch

__all__ = [
    "ZONES_XZ",
    "FENCE_LINE_XZ",
    "ROAD_Z",
    "NEAR_LANE_Z",
    "FAR_LANE_Z",
    "NEAR_WALK_Z",
    "FAR_WALK_Z",
    "campus_layout",
]

XZ = tuple[float, float]
ZONES_XZ: dict[str, tuple[XZ, ...]] = {
    "restricted": ((3.0, 7.5), (12.0, 7.5), (12.0, 12.5), (3.0, 12.5)),
    "fire_lane": ((-10.0, 16.0), (-3.0, 16.0), (-3.0, 18.8), (-10.0, 18.8)),
    "danger_area": ((-4.5, 8.5), (-1.0, 8.5), (-1.0, 11.5), (-4.5, 11.5)),
    "loiter_area": ((-0.3, 7.0), (2.2, 7.0), (2.2, 10.5), (-0.3, 10.5)),
}
"""Zone polygons on the ground, world metres ``(x, z)``."""

FENCE_LINE_XZ: tuple[XZ, XZ] = ((3.0, 7.5), (3.0, 12.5))
"""The fence between the plaza and the restricted yard, near end first."""

ROAD_Z = (16.0, 22.0)
NEAR_LANE_Z, FAR_LANE_Z = 16.6, 19.6  # near side of vehicles in each lane
NEAR_WALK_Z, FAR_WALK_Z = (14.4, 15.6), (22.3, 23.2)


def campus_layout(rng: np.random.Generator) -> Layout:
    """The campus layout; ``rng`` varies only the buildings and far trees."""
    walk = (170, 180, 185)
    asphalt = (85, 85, 88)
    patches = (
        Patch(((-200, NEAR_WALK_Z[0] - 0.4), (200, NEAR_WALK_Z[0] - 0.4), (200, ROAD_Z[0]), (-200, ROAD_Z[0])), walk),
        Patch(((-200, ROAD_Z[1]), (200, ROAD_Z[1]), (200, FAR_WALK_Z[1] + 0.4), (-200, FAR_WALK_Z[1] + 0.4)), walk),
        Patch(((-200, ROAD_Z[0]), (200, ROAD_Z[0]), (200, ROAD_Z[1]), (-200, ROAD_Z[1])), asphalt, "dashed_center"),
        Patch(ZONES_XZ["fire_lane"], (60, 60, 200), "hatch_red"),
        Patch(((3.0, 7.0), (30.0, 7.0), (30.0, 12.5), (3.0, 12.5)), (120, 135, 140)),
        Patch(ZONES_XZ["danger_area"], (70, 110, 140), "hazard"),
        Patch(((-0.5, 6.0), (2.4, 6.0), (2.4, 10.7), (-0.5, 10.7)), (165, 175, 190)),
        Patch(((0.6, 10.7), (1.8, 10.7), (1.8, NEAR_WALK_Z[0] - 0.4), (0.6, NEAR_WALK_Z[0] - 0.4)), (165, 175, 190)),
    )
    fences = (FENCE_LINE_XZ, ((3.0, 12.5), (30.0, 12.5)))
    buildings: list[Building] = []
    x = -60.0
    while x < 60:
        w = float(rng.uniform(14, 30))
        c = int(rng.integers(120, 210))
        floors = int(rng.integers(3, 7))
        buildings.append(
            Building(
                x,
                x + w,
                float(rng.uniform(46, 54)),
                floors * 3.5 + 1,
                (c - 20, c - 10, c),
                (120, 100, 70),
                floors,
                tuple(bool(v) for v in rng.random(64) < 0.45),
            )
        )
        x += w + float(rng.uniform(2, 8))
    props = [("tree", float(x), float(rng.uniform(30, 40))) for x in rng.uniform(-30, 30, 8)]
    props += [("lamp", float(x), 23.6) for x in (-14.0, -4.0, 6.0, 16.0)]
    props += [("bench", 1.4, 10.6), ("bin", -0.2, 10.6)]
    return Layout((60, 140, 80), patches, tuple(buildings), fences, tuple(props), 40.0, (ROAD_Z,))
