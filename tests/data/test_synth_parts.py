"""Building blocks of the generator: camera model, sprites per class, rule semantics of the truth."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.data.synth import Camera, RuleParams, compute_incidents
from campusguard.data.synth.classes import BICYCLE, BUS, CAR, MOTORCYCLE, PERSON, TRUCK
from campusguard.data.synth.lighting import LIGHTINGS
from campusguard.data.synth.sprites import draw_object, draw_rider, random_look


def test_camera_projection_roundtrip_and_scale() -> None:
    cam = Camera.for_frame(640, 360)
    xz = np.array([[-3.0, 8.0], [0.0, 15.0], [5.0, 30.0]])
    np.testing.assert_allclose(cam.unproject(cam.project(xz)), xz, rtol=1e-9)
    assert cam.row_of_depth(cam.near_depth_m) == pytest.approx(360.0)
    assert 1.7 * cam.px_per_m(cam.near_depth_m) == pytest.approx(120.0)  # a person on the bottom row
    big = Camera.for_frame(1280, 720)
    assert 1.7 * big.px_per_m(big.near_depth_m) == pytest.approx(240.0)  # sizes scale with the width


def _extent(class_id: int, view: str, px_per_m: float = 40.0) -> tuple[int, int]:
    rng = np.random.default_rng(0)
    sprite = draw_object(class_id, px_per_m, view, random_look(rng, class_id), LIGHTINGS[0], phase=1.0)
    ys, xs = np.nonzero(sprite.bgra[..., 3])
    return int(xs.max() - xs.min() + 1), int(ys.max() - ys.min() + 1)


# (class, view, width/height range): silhouettes differ per class
@pytest.mark.parametrize(
    ("class_id", "view", "lo", "hi"),
    [
        (PERSON, "front", 0.2, 0.45),
        (PERSON, "right", 0.15, 0.5),
        (BICYCLE, "right", 1.4, 1.9),
        (CAR, "left", 2.6, 3.3),
        (CAR, "front", 1.1, 1.4),
        (MOTORCYCLE, "right", 1.6, 2.1),
        (BUS, "right", 3.4, 4.0),
        (BUS, "back", 0.7, 0.9),
        (TRUCK, "left", 2.0, 2.5),
        (TRUCK, "front", 0.65, 0.85),
    ],
)
def test_sprite_silhouettes_per_class(class_id: int, view: str, lo: float, hi: float) -> None:
    w, h = _extent(class_id, view)
    assert lo <= w / h <= hi


def test_sprite_alpha_is_exact_and_anchor_on_ground() -> None:
    rng = np.random.default_rng(1)
    for class_id in (PERSON, CAR, BUS):
        sprite = draw_object(class_id, 30.0, "right", random_look(rng, class_id), LIGHTINGS[3])
        alpha = sprite.bgra[..., 3]
        assert set(np.unique(alpha).tolist()) <= {0, 255}
        ax, ay = sprite.anchor_xy
        assert ay == alpha.shape[0] - 1 and alpha[ay - 2 : ay + 1].any()  # drawn down to the ground row


def test_rider_sits_on_its_vehicle() -> None:
    rng = np.random.default_rng(2)
    look = random_look(rng, MOTORCYCLE)
    bike = draw_object(MOTORCYCLE, 50.0, "left", look, LIGHTINGS[0])
    rider = draw_rider(MOTORCYCLE, 50.0, "left", random_look(rng, PERSON), LIGHTINGS[0], look.size)
    # both placed on the same ground point: the rider's canvas overlaps the bike's upper half
    bx0, by0 = 100 - bike.anchor_xy[0], 200 - bike.anchor_xy[1]
    rx0, ry0 = 100 - rider.anchor_xy[0], 200 - rider.anchor_xy[1]
    assert by0 - 40 < ry0 < by0 and ry0 + rider.bgra.shape[0] > by0 + bike.bgra.shape[0] // 3
    assert bx0 - 10 < rx0 < bx0 + bike.bgra.shape[1]


ZONES = {
    "danger_area": np.array([[0, 0], [100, 0], [100, 100], [0, 100]], float),
    "restricted": np.array([[200, 0], [300, 0], [300, 100], [200, 100]], float),
    "fire_lane": np.array([[400, 0], [500, 0], [500, 100], [400, 100]], float),
    "loiter_area": np.array([[600, 0], [700, 0], [700, 100], [600, 100]], float),
}
FENCE = (np.array([200.0, 100.0]), np.array([200.0, 0.0]), "right")  # upward line: right side is x > 200


def _frames(tracks: dict[int, tuple[int, list[tuple[float, float] | None]]], n: int) -> list[dict]:
    """Frames at 10 fps from ``{track: (class, [bottom-centre or None per frame])}``."""
    out = []
    for i in range(n):
        objs = []
        for tid, (cls, pts) in tracks.items():
            if i < len(pts) and pts[i] is not None:
                x, y = pts[i]
                objs.append({"track_id": tid, "class_id": cls, "xyxy": [x - 5, y - 30, x + 5, y]})
        out.append({"frame": i, "t": i / 10, "objects": objs})
    return out


@pytest.mark.parametrize(
    ("tracks", "n", "expected"),
    [
        # three people in the danger area from frame 10 to 59: start after 3 s of it, end at the last frame
        (
            {
                1: (0, [None] * 10 + [(50, 50)] * 50),
                2: (0, [None] * 10 + [(60, 50)] * 50),
                3: (0, [None] * 10 + [(70, 50)] * 60),
            },
            70,
            [("crowd", "danger_area", 4.0, 5.9, [1, 2, 3])],
        ),
        # two people only: no crowd; a car in the danger area does not count
        ({1: (0, [(50, 50)] * 60), 2: (0, [(60, 50)] * 60), 3: (2, [(70, 50)] * 60)}, 60, []),
        # inside for 0.5 s (frames 0.1..0.6): an intrusion (and a crossing in); 0.4 s: only the crossing
        (
            {1: (0, [(150, 50)] + [(250, 50)] * 6 + [(150, 50)] * 3)},
            10,
            [("line_crossing", "fence_line", 0.1, 0.1, [1]), ("intrusion", "restricted", 0.6, 0.6, [1])],
        ),
        (
            {1: (0, [(150, 50)] + [(250, 50)] * 5 + [(150, 50)] * 3)},
            9,
            [("line_crossing", "fence_line", 0.1, 0.1, [1])],
        ),
        # leaving the restricted side is not a crossing "in"
        ({1: (0, [(250, 90)] * 2 + [(150, 90)] * 2)}, 4, []),
        # a car driving 10 px/frame stops at frame 9: it moved < 16 px (2% of 800) over the last 1 s
        # from frame 18 on, so the incident starts 4 s later
        (
            {1: (2, [(400 + 10 * i, 50) for i in range(10)] + [(490, 50)] * 80)},
            90,
            [("fire_lane", "fire_lane", 5.8, 8.9, [1])],
        ),
        # a person standing in the fire lane is not a fire-lane incident
        ({1: (0, [(450, 50)] * 90)}, 90, []),
        # loitering: 8 s in the loiter area
        ({7: (0, [(650, 50)] * 85)}, 85, [("loitering", "loiter_area", 8.0, 8.4, [7])]),
    ],
)
def test_incident_rules(tracks: dict, n: int, expected: list) -> None:
    found = compute_incidents(_frames(tracks, n), ZONES, FENCE, 800, 10, RuleParams())
    got = [(i.kind, i.zone, round(i.start_s, 3), round(i.end_s, 3), list(i.track_ids)) for i in found]
    assert got == expected
