"""Synthetic videos: determinism, truth schema, zones, and incidents consistent with the tracks.

The consistency test re-derives every rule per frame with an independent implementation
(`cv2.pointPolygonTest`) and checks that the frames where each rule has held for its
``min_seconds`` are exactly the frames covered by the truth's incidents.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.data.synth import SYNTH_CLASS_IDS
from campusguard.data.synth.video import (
    SCHEMA,
    SynthVideo,
    VideoTruth,
    generate_video,
    iter_video_frames,
    load_video_truth,
)

KINDS = {"crowd", "fire_lane", "intrusion", "loitering", "line_crossing"}


@cache
def _truth(seed: int) -> dict:
    return SynthVideo(seed).truth().to_dict()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_same_seed_same_bytes(tmp_path: Path) -> None:
    a = generate_video(7, tmp_path / "a", seconds=6.0, name="v")
    generate_video(7, tmp_path / "b", seconds=6.0, name="v")
    for name in ("v.mp4", "v.json"):
        assert _sha(tmp_path / "a" / name) == _sha(tmp_path / "b" / name)
    generate_video(9, tmp_path / "c", seconds=6.0, name="v")
    assert _sha(tmp_path / "a" / "v.json") != _sha(tmp_path / "c" / "v.json")
    cap = cv2.VideoCapture(str(tmp_path / "a" / "v.mp4"))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == a.num_frames == 60
    loaded = load_video_truth(tmp_path / "a" / "v.json")
    assert loaded.to_dict() == json.loads((tmp_path / "a" / "v.json").read_text())


def test_in_memory_frames_match_the_truth_boxes() -> None:
    frames = list(iter_video_frames(4, seconds=2.0))
    assert [(i, t) for i, t, _ in frames] == [(i, i / 10) for i in range(20)]
    assert all(f.shape == (360, 640, 3) and f.dtype == np.uint8 for _, _, f in frames)
    again = [f for _, _, f in iter_video_frames(4, seconds=2.0)]
    assert all(np.array_equal(a[2], b) for a, b in zip(frames, again, strict=True))
    video = SynthVideo(4, seconds=2.0)
    assert np.array_equal(video.frame(5)[0], frames[5][2])


def test_truth_schema_and_zones() -> None:
    d = _truth(0)
    for key in (
        "schema",
        "seed",
        "camera_id",
        "video",
        "fps",
        "resolution_wh",
        "num_frames",
        "zones",
        "lines",
        "params",
        "frames",
        "incidents",
    ):
        assert key in d
    assert d["schema"] == SCHEMA and d["resolution_wh"] == [640, 360] and d["fps"] == 10
    assert d["num_frames"] == len(d["frames"]) == 400
    assert d["params"]["crowd"] == {"min_count": 3, "min_seconds": 3.0}
    w, h = d["resolution_wh"]
    polys = {}
    for name in ("restricted", "fire_lane", "danger_area", "loiter_area"):
        poly = np.array(d["zones"][name]["polygon"], np.float32)
        assert poly.shape[0] >= 3 and poly.shape[1] == 2
        assert (
            (poly[:, 0] >= 0).all() and (poly[:, 0] <= w).all() and (poly[:, 1] >= 0).all() and (poly[:, 1] <= h).all()
        )
        assert cv2.contourArea(poly) > 500 and cv2.isContourConvex(poly)
        polys[name] = poly
    names = list(polys)
    for i, a in enumerate(names):  # zones do not overlap
        for b in names[i + 1 :]:
            area, _ = cv2.intersectConvexConvex(polys[a], polys[b])
            assert area < 1.0, (a, b)
    line = d["lines"]["fence_line"]
    (x1, y1), (x2, y2) = line["points"]
    assert line["in_side"] in ("left", "right")
    cx, cy = polys["restricted"].mean(axis=0)
    cross = (x2 - x1) * (cy - y1) - (y2 - y1) * (cx - x1)  # > 0: right-hand side on screen (y down)
    assert (cross > 0) == (line["in_side"] == "right")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_frames_boxes_valid(seed: int) -> None:
    d = _truth(seed)
    w, h = d["resolution_wh"]
    ids_per_frame = []
    for f in d["frames"]:
        ids = [o["track_id"] for o in f["objects"]]
        assert len(ids) == len(set(ids))
        ids_per_frame.append(ids)
        for o in f["objects"]:
            x1, y1, x2, y2 = o["xyxy"]
            assert 0 <= x1 < x2 <= w and 0 <= y1 < y2 <= h
            assert x2 - x1 >= 6 and y2 - y1 >= 12  # thin upright people: see render.compose
            assert o["class_id"] in SYNTH_CLASS_IDS
    assert sum(map(len, ids_per_frame)) > 400  # busy scene


def _inside(poly: np.ndarray, x: float, y: float) -> bool:
    return cv2.pointPolygonTest(poly.astype(np.float32), (float(x), float(y)), False) >= 0


def _segments_intersect(p: tuple, q: tuple, a: tuple, b: tuple) -> bool:
    """Whether segment p-q meets segment a-b (shapely-free orientation test)."""

    def orient(o: tuple, s: tuple, t: tuple) -> float:
        return (s[0] - o[0]) * (t[1] - o[1]) - (s[1] - o[1]) * (t[0] - o[0])

    return orient(a, b, p) * orient(a, b, q) <= 0 and orient(p, q, a) * orient(p, q, b) <= 0


def _held_frames(times: list[float], flags: list[bool], min_s: float) -> set[int]:
    held, run_start = set(), None
    for i, f in enumerate(flags):
        run_start = (i if run_start is None else run_start) if f else None
        if f and times[i] - times[run_start] >= min_s - 1e-9:
            held.add(i)
    return held


def _covered(times: list[float], incidents: list[dict]) -> set[int]:
    return {i for inc in incidents for i, t in enumerate(times) if inc["start_s"] - 1e-6 <= t <= inc["end_s"] + 1e-6}


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5])
def test_incidents_consistent_with_tracks_and_zones(seed: int) -> None:
    d = _truth(seed)
    zones = {k: np.array(v["polygon"]) for k, v in d["zones"].items()}
    times = [f["t"] for f in d["frames"]]
    p = d["params"]
    anchors: dict[int, dict[int, tuple[float, float, int]]] = {}
    for i, f in enumerate(d["frames"]):
        for o in f["objects"]:
            x1, _, x2, y2 = o["xyxy"]
            anchors.setdefault(o["track_id"], {})[i] = ((x1 + x2) / 2, y2, o["class_id"])
    incs = d["incidents"]
    by = {k: [i for i in incs if i["kind"] == k] for k in KINDS}
    assert {i["kind"] for i in incs} <= KINDS
    n = len(times)
    # crowd
    flags = [
        sum(1 for a in anchors.values() if i in a and a[i][2] == 0 and _inside(zones["danger_area"], *a[i][:2]))
        >= p["crowd"]["min_count"]
        for i in range(n)
    ]
    assert _held_frames(times, flags, p["crowd"]["min_seconds"]) == _covered(times, by["crowd"])
    for tid, a in anchors.items():
        mine = lambda kind, tid=tid: [i for i in by[kind] if tid in i["track_ids"]]  # noqa: E731
        cls = next(iter(a.values()))[2]
        if cls == 0:
            flags = [i in a and _inside(zones["restricted"], *a[i][:2]) for i in range(n)]
            assert _held_frames(times, flags, p["intrusion"]["min_seconds"]) == _covered(times, mine("intrusion"))
        flags = [i in a and _inside(zones["loiter_area"], *a[i][:2]) for i in range(n)]
        assert _held_frames(times, flags, p["loitering"]["min_seconds"]) == _covered(times, mine("loitering"))
        if cls in (2, 3, 5, 7):
            lag = round(d["fps"] * 1.0)
            flags = [
                i in a
                and i - lag in a
                and _inside(zones["fire_lane"], *a[i][:2])
                and np.hypot(a[i][0] - a[i - lag][0], a[i][1] - a[i - lag][1]) < 0.02 * d["resolution_wh"][0]
                for i in range(n)
            ]
            assert _held_frames(times, flags, p["fire_lane"]["min_seconds"]) == _covered(times, mine("fire_lane"))
        # line crossings into the restricted side: side sign flips between consecutive frames and
        # the anchor's move intersects the fence segment
        (x1, y1), (x2, y2) = d["lines"]["fence_line"]["points"]
        sgn = 1 if d["lines"]["fence_line"]["in_side"] == "right" else -1
        side = {i: sgn * ((x2 - x1) * (v[1] - y1) - (y2 - y1) * (v[0] - x1)) for i, v in a.items()}
        crossings = [
            times[i]
            for i in sorted(side)
            if i - 1 in side
            and side[i - 1] <= 0 < side[i]
            and _segments_intersect(a[i - 1][:2], a[i][:2], (x1, y1), (x2, y2))
        ]
        assert crossings == [i["start_s"] for i in mine("line_crossing")]


@pytest.mark.parametrize("seed", [0, 2, 4, 6, 8, 10])
def test_even_seeds_have_every_kind_well_separated(seed: int) -> None:
    incs = _truth(seed)["incidents"]
    assert {i["kind"] for i in incs} == KINDS
    spans = sorted((i["start_s"], i["end_s"], i["kind"]) for i in incs if i["kind"] != "line_crossing")
    for (_, e0, k0), (s1, _, k1) in zip(spans[:-1], spans[1:], strict=True):
        assert s1 - e0 >= 1.5, f"{k0} ends {e0}, {k1} starts {s1}"
    for inc in incs:
        assert 0 <= inc["start_s"] <= inc["end_s"] <= 40.0


def test_odd_seed_has_several_incidents() -> None:
    kinds = {i["kind"] for i in _truth(1)["incidents"]}
    assert len(kinds - {"line_crossing"}) >= 2


def test_video_truth_is_a_dataclass_roundtrip() -> None:
    t = SynthVideo(3, seconds=3.0).truth()
    assert isinstance(t, VideoTruth) and t.num_frames == 30


def test_images_and_video_share_the_object_scale() -> None:
    """Scale contract: a detector trained on the images sees the same pixel sizes in the videos."""
    from campusguard.data.synth import Camera, render_image

    img_cam, vid_cam = Camera.for_frame(640, 640), Camera.for_frame(640, 360)
    assert img_cam.focal_px == vid_cam.focal_px
    assert img_cam.near_depth_m == pytest.approx(vid_cam.near_depth_m)
    img_h = [  # a person's length: the box height, or its width for the people drawn lying down
        max(o.xyxy[3] - o.xyxy[1], o.xyxy[2] - o.xyxy[0])
        for i in range(40)
        for o in render_image(1, i).objects
        if o.class_id == 0
    ]
    vid_h = [o["xyxy"][3] - o["xyxy"][1] for f in _truth(0)["frames"] for o in f["objects"] if o["class_id"] == 0]
    assert min(img_h) >= 24 and max(img_h) <= 160
    assert min(vid_h) >= 24 and max(vid_h) <= 140
    lo, hi = np.percentile(img_h, [5, 95])
    assert lo <= np.median(vid_h) <= hi
