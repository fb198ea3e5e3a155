"""Zone rules on scripted tracks: start/end times, debouncing, cooldown, time windows, classes."""

from __future__ import annotations

from datetime import datetime

import pytest

from campusguard.app.rules import CrowdRule, FireLaneRule, IntrusionRule, LoiteringRule
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

RES = (640, 360)
ZONE = PolygonZone([[200, 100], [400, 100], [400, 300], [200, 300]], "yard", resolution_wh=RES)
NIGHT = datetime(2026, 1, 10, 23, 30)
NOON = datetime(2026, 1, 10, 12, 0)


def _walker(scene, tid=1, cls=0, stay=(2.0, 5.0), drop=(), t0=0.0):
    """Walks right at 100 px/s along y=200 from x=105 at ``t0``: inside the zone (x in 200..400)
    from ``t0 + 1.0`` to ``stay[1] + 0.9`` (times of ``stay`` are absolute)."""
    return scene.Track(
        tid,
        cls,
        [(t0, 105.0, 200.0), (stay[0], 305.0, 200.0), (stay[1], 305.0, 200.0), (stay[1] + 2, 505.0, 200.0)],
        drop_frames=set(drop),
    )


def _summary(events):
    return [(e.phase, e.rule_kind, round(e.start_s, 2), None if e.end_s is None else round(e.end_s, 2)) for e in events]


@pytest.mark.parametrize(
    ("rule_kwargs", "drop", "expected"),
    [
        # onset at 1.0, min_seconds 1 -> raised at 2.0; last inside 5.9
        ({"min_seconds": 1.0}, (), [("start", 2.0, None), ("end", 2.0, 5.9)]),
        ({"min_seconds": 0.0}, (), [("start", 1.2, None), ("end", 1.2, 5.9)]),  # inertia 3 frames: 1.0, 1.1, 1.2
        ({"min_seconds": 0.0, "inertia": 1}, (), [("start", 1.0, None), ("end", 1.0, 5.9)]),
        # a 2-frame dropout neither ends nor restarts the event, nor moves its start
        ({"min_seconds": 1.0}, (30, 31), [("start", 2.0, None), ("end", 2.0, 5.9)]),
        ({"min_seconds": 1.0}, (15, 16), [("start", 2.0, None), ("end", 2.0, 5.9)]),
        ({"min_seconds": 5.0}, (), []),  # 4.9 s inside is not enough
    ],
)
def test_intrusion_timing_table(scene, rule_kwargs, drop, expected):
    rule = IntrusionRule(name="no entry", camera_id="cam0", zone=ZONE, **rule_kwargs)
    events = scene.run(rule, scene.frames([_walker(scene, drop=drop)], 9.0))
    assert [(p, s, e) for p, _, s, e in _summary(events)] == expected
    assert all(e.camera_id == "cam0" and e.zone == "yard" and e.rule_name == "no entry" for e in events)
    if events:
        assert events[0].tracker_ids == (1,) and events[0].class_ids == (0,) and events[0].onset_s == 1.0
        assert len({e.event_id for e in events}) == 1


def test_intrusion_ignores_other_classes_and_names_classes(scene):
    car = _walker(scene, cls=2)
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE, min_seconds=1.0)
    assert scene.run(rule, scene.frames([car], 9.0)) == []
    rule = IntrusionRule(
        name="r", camera_id="c", zone=ZONE, class_ids=[0, 2], min_seconds=1.0, class_names={0: "person", 2: "car"}
    )
    events = scene.run(rule, scene.frames([car], 9.0))
    assert events[0].class_names == ("car",)


@pytest.mark.parametrize(
    ("per_track", "expected"),
    [
        # one event per intruder, as the ground truth counts them
        (True, [("start", (1,), 2.0), ("start", (2,), 3.5), ("end", (2,), 4.0), ("end", (1,), 5.9)]),
        # one event for the zone: the second intruder joins it (an update keeps the start time)
        (False, [("start", (1,), 2.0), ("update", (1, 2), 2.0), ("end", (1, 2), 5.9)]),
    ],
)
def test_intrusion_two_intruders(scene, per_track, expected):
    first = _walker(scene, tid=1)
    second = scene.Track(2, 0, [(2.5, 300.0, 150.0), (4.0, 300.0, 150.0)])
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE, min_seconds=1.0, per_track=per_track)
    events = scene.run(rule, scene.frames([first, second], 9.0))
    got = [(e.phase, e.tracker_ids, e.end_s if e.phase == "end" else e.start_s) for e in events]
    assert got == expected


@pytest.mark.parametrize(("wall_time", "n_events"), [(NIGHT, 2), (NOON, 0)])
def test_intrusion_time_windows(scene, wall_time, n_events):
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE, min_seconds=1.0, time_windows=["22:00-06:00"])
    events = scene.run(rule, scene.frames([_walker(scene)], 9.0), wall_time=wall_time)
    assert len(events) == n_events
    if events:
        assert events[0].started_at == NIGHT


def test_time_windows_need_wall_time(scene, make_detections):
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE, time_windows=[("22:00", "06:00")])
    with pytest.raises(InvalidInputError, match="wall_time"):
        rule.update(0.0, make_detections([], tracker_id=[]), 0)


@pytest.mark.parametrize(
    ("per_track", "same_track", "cooldown_s", "starts"),
    [
        (False, False, 0.0, [2.0, 10.0]),
        (False, False, 10.0, [2.0]),  # the zone-level cooldown covers every track
        (True, False, 10.0, [2.0, 10.0]),  # per-track events: the cooldown is per track
        (True, True, 10.0, [2.0]),
        (True, True, 0.0, [2.0, 10.1]),
    ],
)
def test_cooldown_after_end(scene, per_track, same_track, cooldown_s, starts):
    if same_track:  # out after 5.9, back in from 9.1 to 13.9
        wp = [
            (0.0, 105.0, 200.0),
            (2.0, 305.0, 200.0),
            (5.0, 305.0, 200.0),
            (7.0, 505.0, 200.0),
            (8.0, 505.0, 200.0),
            (10.0, 305.0, 200.0),
            (13.0, 305.0, 200.0),
            (15.0, 505.0, 200.0),
        ]
        tracks = [scene.Track(1, 0, wp)]
    else:  # two visits: inside 1.0-5.9 and again 9.0-13.9 (a different track)
        tracks = [_walker(scene, tid=1), _walker(scene, tid=2, t0=8.0, stay=(10.0, 13.0))]
    rule = IntrusionRule(
        name="r", camera_id="c", zone=ZONE, min_seconds=1.0, cooldown_s=cooldown_s, per_track=per_track
    )
    events = scene.run(rule, scene.frames(tracks, 17.0))
    assert [e.start_s for e in events if e.phase == "start"] == starts


def test_rules_reject_time_going_backwards(make_detections):
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE)
    rule.update(5.0, make_detections([], tracker_id=[]), 0)
    with pytest.raises(InvalidInputError, match="earlier"):
        rule.update(4.0, make_detections([], tracker_id=[]), 1)


def test_rules_need_tracked_detections(make_detections):
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE)
    with pytest.raises(InvalidInputError, match="tracker_id"):
        rule.update(0.0, make_detections([[290, 120, 310, 200]]), 0)


def _crowd(scene, arrivals, leave_at, drop=None):
    """Persons arriving (already inside) at ``arrivals`` seconds, all leaving at ``leave_at``."""
    drop = drop or {}
    return [
        scene.Track(
            i + 1,
            0,
            [(t0, 250.0 + 30 * i, 200.0), (leave_at, 250.0 + 30 * i, 200.0)],
            drop_frames=drop.get(i + 1, set()),
        )
        for i, t0 in enumerate(arrivals)
    ]


@pytest.mark.parametrize(
    ("arrivals", "min_count", "min_seconds", "drop", "expected"),
    [
        # the 3rd person is inside from 3.0 -> 3 people for 2 s at 5.0; last frame 7.9 (leave at 8)
        ([1.0, 2.0, 3.0], 3, 2.0, None, [("start", 5.0, None), ("end", 5.0, 8.0)]),
        ([1.0, 2.0, 5.0], 2, 2.0, None, [("start", 4.0, None), ("update", 4.0, None), ("end", 4.0, 8.0)]),
        ([1.0, 2.0], 3, 2.0, None, []),
        ([1.0, 2.0, 3.0], 3, 6.0, None, []),  # holds only 5 s
        # a 2-frame dropout of one person while the count is needed does not restart the run
        ([1.0, 2.0, 3.0], 3, 2.0, {2: {45, 46}}, [("start", 5.0, None), ("end", 5.0, 8.0)]),
        ([1.0, 2.0, 3.0], 3, 2.0, {2: {55, 56}}, [("start", 5.0, None), ("end", 5.0, 8.0)]),
    ],
)
def test_crowd_table(scene, arrivals, min_count, min_seconds, drop, expected):
    rule = CrowdRule(name="crowd", camera_id="c", zone=ZONE, min_count=min_count, min_seconds=min_seconds)
    events = scene.run(rule, scene.frames(_crowd(scene, arrivals, 8.0, drop), 10.0))
    assert [(p, s, e) for p, _, s, e in _summary(events)] == expected
    if events:
        assert events[0].count == min_count
        assert events[-1].tracker_ids == tuple(range(1, len(arrivals) + 1))


def test_crowd_end_at_close_while_active(scene):
    rule = CrowdRule(name="crowd", camera_id="c", zone=ZONE, min_count=2, min_seconds=1.0)
    frames = scene.frames(_crowd(scene, [0.0, 0.0], 20.0), 5.0)
    events = []
    for t, f, d in frames:
        events += rule.update(t, d, f)
    assert [e.phase for e in events] == ["start"] and rule.open_events()[0].phase == "start"
    closing = rule.close(5.0)
    assert [(e.phase, e.end_s) for e in closing] == [("end", 5.0)]
    assert rule.open_events() == [] and rule.close(6.0) == []


def _car(scene, stop_at=3.0, leave_at=10.0, jitter=0.0, tid=5, cls=2, speed=200.0):
    """Drives right along y=250 at ``speed`` px/s, enters the zone (x >= 200) and stops at x=300."""
    x0 = 300.0 - speed * stop_at
    wp = [(0.0, x0, 250.0), (stop_at, 300.0, 250.0)]
    t = stop_at
    while t + 0.5 <= leave_at:  # a jittering box while parked
        t += 0.5
        wp.append((t, 300.0 + (jitter if len(wp) % 2 else -jitter), 250.0))
    wp.append((leave_at + 3, 300.0 + speed * 3, 250.0))
    return scene.Track(tid, cls, wp, size_wh=(120, 60))


@pytest.mark.parametrize(
    ("car_kwargs", "min_seconds", "expected"),
    [
        # stops at 3.0; first still over a whole 1 s window at 4.0 -> raised at 8.0; moves off after 10.0
        ({}, 4.0, (8.0, 4.0, 10.0)),
        ({"jitter": 4.0}, 4.0, (8.0, 4.0, 10.0)),  # 4 px jitter < 2% of 640 px
        ({"jitter": 20.0}, 4.0, None),  # 20 px jumps every half second: not stationary
        ({"cls": 0}, 4.0, None),  # a standing person is not a vehicle
        ({}, 7.0, None),  # still for 6 s only
        ({"speed": 20.0, "stop_at": 12.0, "leave_at": 12.0}, 2.0, None),  # crawling 20 px/s (> 12.8 px per 1 s)
        # 10 px/s counts as still: in the zone from 2.0, still over [2, 3] -> raised at 5.0; the track ends at 15
        ({"speed": 10.0, "stop_at": 12.0, "leave_at": 12.0}, 2.0, (5.0, 3.0, 15.0)),
    ],
)
def test_fire_lane_table(scene, car_kwargs, min_seconds, expected):
    rule = FireLaneRule(name="lane", camera_id="c", zone=ZONE, min_seconds=min_seconds)
    assert rule.max_movement_px == pytest.approx(0.02 * 640)
    events = scene.run(rule, scene.frames([_car(scene, **car_kwargs)], 16.0))
    if expected is None:
        assert events == []
        return
    start_s, onset_s, end_s = expected
    assert [e.phase for e in events] == ["start", "end"]
    assert events[0].start_s == pytest.approx(start_s) and events[0].onset_s == pytest.approx(onset_s)
    assert events[1].end_s == pytest.approx(end_s, abs=0.11)
    assert events[0].tracker_ids == (5,) and events[0].class_ids == (2,)


def test_fire_lane_needs_a_resolution_or_pixels():
    zone = PolygonZone([[200, 100], [400, 100], [400, 300]], "lane")
    with pytest.raises(InvalidInputError, match="max_movement_px"):
        FireLaneRule(name="lane", camera_id="c", zone=zone, min_seconds=5)
    assert FireLaneRule(name="lane", camera_id="c", zone=zone, min_seconds=5, max_movement_px=10).max_movement_px == 10


def test_loitering_one_event_per_track(scene):
    long_stay = _walker(scene, tid=1, stay=(2.0, 7.0))  # inside 1.0-7.9
    short_stay = _walker(scene, tid=2, stay=(2.0, 2.5))  # inside 1.0-3.4
    other = scene.Track(3, 0, [(0.5, 300.0, 150.0), (8.0, 300.0, 150.0)])  # inside 0.5-8.0
    rule = LoiteringRule(name="loiter", camera_id="c", zone=ZONE, min_seconds=5.0)
    events = scene.run(rule, scene.frames([long_stay, short_stay, other], 12.0))
    starts = sorted((e.tracker_ids, e.start_s) for e in events if e.phase == "start")
    assert starts == [((1,), 6.0), ((3,), 5.5)]
    ends = sorted((e.tracker_ids, e.end_s) for e in events if e.phase == "end")
    assert ends == [((1,), 7.9), ((3,), 8.0)]


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (IntrusionRule, {"inertia": 0}, "inertia"),
        (IntrusionRule, {"min_seconds": -1}, "min_seconds"),
        (IntrusionRule, {"class_ids": []}, "class_ids"),
        (IntrusionRule, {"time_windows": ["25:00-06:00"]}, "invalid time"),
        (IntrusionRule, {"time_windows": ["night"]}, "HH:MM"),
        (IntrusionRule, {"time_windows": ["06:00-06:00"]}, "empty"),
        (CrowdRule, {"min_count": 0}, "min_count"),
        (FireLaneRule, {"stationary_window_s": 0}, "stationary_window_s"),
    ],
)
def test_invalid_rule_arguments_name_the_rule(cls, kwargs, message):
    with pytest.raises(InvalidInputError, match=message) as info:
        cls(name="r1", camera_id="c", zone=ZONE, **kwargs)
    assert "'r1'" in str(info.value)


@pytest.mark.parametrize(("stitch_radius", "n_events"), [(0.5, 1), (0.0, 2)])
def test_tracker_id_switch_continues_the_event(scene, make_detections, stitch_radius, n_events):
    """A person standing in the zone loses its id after a missed frame (id 1 -> 9)."""
    rule = IntrusionRule(name="r", camera_id="c", zone=ZONE, min_seconds=1.0, stitch_radius=stitch_radius)
    events = []
    for f in range(60):
        t = f / 10
        if f == 25:
            dets = make_detections([], tracker_id=[])  # missed frame
        else:
            # a second person nearby keeps its id: stitching must not take it over
            dets = make_detections([[290, 120, 310, 200], [345, 120, 365, 200]], tracker_id=[1 if f < 25 else 9, 4])
        events += rule.update(t, dets, f)
    events += rule.close(6.0)
    mine = [e for e in events if 1 in e.tracker_ids or 9 in e.tracker_ids]
    assert len({e.event_id for e in mine}) == n_events
    if n_events == 1:
        assert [e.phase for e in mine] == ["start", "update", "end"] and mine[-1].tracker_ids == (1, 9)
        assert mine[0].start_s == 1.0 and mine[-1].end_s == 6.0
    assert len({e.event_id for e in events if e.tracker_ids == (4,)}) == 1


def test_stitching_ignores_other_classes_and_far_tracks(make_detections):
    rule = LoiteringRule(name="r", camera_id="c", zone=ZONE, min_seconds=2.0, class_ids=None)
    for f in range(15):
        rule.update(f / 10, make_detections([[290, 120, 310, 200]], class_id=0, tracker_id=[1]), f)
    # id 1 vanishes; a car (other class) and a far person appear: neither inherits its 1.4 s dwell
    rule.update(
        1.5, make_detections([[280, 150, 320, 200], [200, 200, 220, 280]], class_id=[2, 0], tracker_id=[2, 3]), 15
    )
    assert rule.presence.renamed == {}
    assert {t: p.onset_s for t, p in rule.presence.tracks.items()} == {1: 0.0, 2: 1.5, 3: 1.5}


def test_updates_are_throttled_and_ids_capped(scene):
    # people keep joining a crowd, one every 0.5 s, until 9.5 s
    tracks = [scene.Track(i + 1, 0, [(0.5 * i, 210.0 + 9 * i, 200.0), (12.0, 210.0 + 9 * i, 200.0)]) for i in range(20)]
    rule = CrowdRule(
        name="crowd", camera_id="c", zone=ZONE, min_count=2, min_seconds=1.0, update_interval_s=2.0, max_ids_per_event=5
    )
    emitted = []
    for t, f, d in scene.frames(tracks, 13.0):
        emitted += [(t, e) for e in rule.update(t, d, f)]
    emitted += [(13.0, e) for e in rule.close(13.0)]
    got = [(t, e.phase, e.count) for t, e in emitted]
    # 2nd person inside from 0.5 -> raised at 1.5 (3 confirmed by then); then one update per 2 s at most
    assert got == [
        (1.5, "start", 3),
        (3.5, "update", 7),
        (5.5, "update", 11),
        (7.5, "update", 15),
        (9.5, "update", 19),
        (11.5, "update", 20),
        (13.0, "end", 20),
    ]
    assert all(e.tracker_ids == (1, 2, 3, 4, 5) for _, e in emitted[1:])  # capped at 5 ids
    assert emitted[-1][1].details["n_objects"] == 20


def test_the_zone_kinds_entries():
    """The four zone kinds' facts (the registry test iterates over whatever kinds it finds)."""
    from campusguard.app.rules.registry import RULES

    entries = {k: RULES.entry(k) for k in ("intrusion", "crowd", "fire_lane", "loitering")}
    assert {k: (e.label, e.has_end, e.order) for k, e in entries.items()} == {
        "intrusion": ("Intrusion", True, 10),
        "crowd": ("Crowd", True, 20),
        "fire_lane": ("Fire lane", True, 30),
        "loitering": ("Loitering", True, 40),
    }
    assert [e.rule_type for e in entries.values()] == [IntrusionRule, CrowdRule, FireLaneRule, LoiteringRule]
