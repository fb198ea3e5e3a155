"""The fall rule on scripted tracks: track shape and detector class, zones, timing, bad arguments."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.app.rules import FallRule, RuleEngine, whole_frame_zone
from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.zones import PolygonZone

RES = (640, 360)
FPS = 10
UPRIGHT, DOWN = (24.0, 70.0), (70.0, 24.0)  # (w, h) of a standing and a lying person


def _person_frames(phases, fallen_flag=None, x0=300.0, y=300.0, speed_px_s=0.0, tid=1):
    """Frames of one tracked person: ``phases`` is ``[(seconds, (w, h)), ...]`` in order; the
    bottom-centre moves right at ``speed_px_s`` during the first phase only. ``fallen_flag``
    (a function of the phase index) adds ``data["fallen"]``, as a detector with that class does."""
    frames, t, f = [], 0.0, 0
    x = x0
    for k, (seconds, (w, h)) in enumerate(phases):
        for _ in range(int(round(seconds * FPS))):
            if k == 0:
                x = x0 + speed_px_s * t
            data = {} if fallen_flag is None else {"fallen": np.array([fallen_flag(k)])}
            det = Detections(
                np.array([[x - w / 2, y - h, x + w / 2, y]], np.float32),
                np.array([0.9], np.float32),
                np.array([0]),
                np.array([tid]),
                data,
            )
            frames.append((round(t, 3), f, det))
            t += 1 / FPS
            f += 1
    return frames


def _run(rule, frames):
    events = []
    for t, f, det in frames:
        events += rule.update(t, det, f)
    return events + rule.close(frames[-1][0])


def _rule(**kw):
    kw.setdefault("zone", whole_frame_zone(RES))
    return FallRule(name="fall", camera_id="cam0", min_seconds=kw.pop("min_seconds", 2.0), **kw)


def _starts(events):
    return [(e.phase, round(e.start_s, 2), None if e.end_s is None else round(e.end_s, 2)) for e in events]


@pytest.mark.parametrize(
    ("phases", "speed", "expected"),
    [
        # stands still 2 s, falls at 2.0 and lies 5 s: down and still from 2.0 -> raised at 4.0, ends 6.9
        ([(2.0, UPRIGHT), (5.0, DOWN)], 0.0, [("start", 4.0, None), ("end", 4.0, 6.9)]),
        # lying for less than min_seconds: nothing
        ([(2.0, UPRIGHT), (1.5, DOWN), (2.0, UPRIGHT)], 0.0, []),
        # never seen upright (lying from the start, e.g. someone on a bench): nothing
        ([(6.0, DOWN)], 0.0, []),
        # walks at 40 px/s until 1.9 s, then falls: still (moved < 12.8 px over the last 1 s) from 2.7
        ([(2.0, UPRIGHT), (5.0, DOWN)], 40.0, [("start", 4.7, None), ("end", 4.7, 6.9)]),
    ],
)
def test_track_shape_timing(phases, speed, expected):
    events = _run(_rule(), _person_frames(phases, speed_px_s=speed))
    assert _starts(events) == expected
    assert all(e.rule_kind == "fall" and e.details["signal"] == "track-shape" for e in events)


def test_moving_wide_box_is_not_a_fall():
    # a wide box that keeps moving (e.g. someone crawling or a mislabelled cyclist)
    frames = []
    for f in range(80):
        t = f / FPS
        w, h = UPRIGHT if t < 2 else DOWN
        x = 100 + 30 * t
        frames.append((t, f, Detections(np.array([[x - w / 2, 300 - h, x + w / 2, 300]]), [0.9], [0], [1])))
    assert _run(_rule(), frames) == []


def test_detector_class_signal_fires_on_the_flag_even_for_upright_boxes():
    frames = _person_frames([(1.0, UPRIGHT), (4.0, UPRIGHT)], fallen_flag=lambda k: k == 1)
    events = _run(_rule(), frames)
    assert _starts(events) == [("start", 3.0, None), ("end", 3.0, 4.9)]
    assert {e.details["signal"] for e in events} == {"detector-class"}
    assert events[0].details["medical"] is True and events[0].tracker_ids == (1,)


def test_detector_class_without_the_flag_is_a_clear_error():
    with pytest.raises(InvalidInputError, match="needs a detector with a fallen class"):
        _run(_rule(signal="detector-class"), _person_frames([(1.0, UPRIGHT)]))


def test_track_shape_ignores_a_detector_flag():
    # forced track-shape: the flag is ignored and the box shape decides
    frames = _person_frames([(2.0, UPRIGHT), (5.0, DOWN)], fallen_flag=lambda k: False)
    events = _run(_rule(signal="track-shape"), frames)
    assert [e.phase for e in events] == ["start", "end"]


@pytest.mark.parametrize(("x0", "n_events"), [(300.0, 2), (560.0, 0)])
def test_zone_limits_where_falls_count(x0, n_events):
    zone = PolygonZone([[200, 100], [400, 100], [400, 340], [200, 340]], "hall", resolution_wh=RES)
    events = _run(_rule(zone=zone), _person_frames([(2.0, UPRIGHT), (5.0, DOWN)], x0=x0))
    assert len(events) == n_events
    assert all(e.zone == "hall" for e in events)


def test_cooldown_and_engine():
    # two falls of the same person 1.5 s apart: the cooldown of 5 s suppresses the second
    phases = [(2.0, UPRIGHT), (3.0, DOWN), (1.0, UPRIGHT), (3.0, DOWN)]
    assert [e.phase for e in _run(_rule(), _person_frames(phases))].count("start") == 2
    engine = RuleEngine("cam0", [_rule(cooldown_s=5.0)])
    assert [e.phase for e in _run(engine, _person_frames(phases))].count("start") == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"signal": "pose"}, "signal must be one of"),
        ({"down_aspect": 0.0}, "down_aspect must be"),
        ({"upright_aspect": float("nan")}, "upright_aspect must be"),
        ({"min_seconds": -1.0}, "min_seconds must be"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        _rule(**kwargs)


def test_fall_rule_from_config_watches_the_whole_frame_without_a_zone():
    from campusguard.app.config import parse_config
    from campusguard.app.engine.wiring import build_camera

    loaded = parse_config(
        "cameras:\n  - id: cam0\n    source: x.mp4\n    rules:\n      - kind: fall\n        min_duration_s: 2\n"
    )
    parts = build_camera(loaded, 0, {0: "person"}, RES, FPS)
    events = _run(parts.rules, _person_frames([(2.0, UPRIGHT), (5.0, DOWN)]))
    assert _starts(events) == [("start", 4.0, None), ("end", 4.0, 6.9)]
    assert events[0].rule_name == "fall:frame" and events[0].zone == "frame"


def _two_tracks(frames_a, frames_b):
    """Merge two single-track frame lists (same timing) into frames with both rows."""
    out = []
    for (t, f, a), (_, _, b) in zip(frames_a, frames_b, strict=True):
        out.append(
            (
                t,
                f,
                Detections(
                    np.concatenate([a.xyxy, b.xyxy]),
                    np.concatenate([a.confidence, b.confidence]),
                    np.concatenate([a.class_id, b.class_id]),
                    np.concatenate([a.tracker_id, b.tracker_id]),
                ),
            )
        )
    return out


def test_two_boxes_on_one_fallen_person_raise_one_incident_two_people_two():
    # the detector gives the lying person a second, smaller box (the upper body) tracked as track 2,
    # which was upright too before: one person, one incident
    phases = [(2.0, UPRIGHT), (5.0, DOWN)]
    whole = _person_frames(phases, tid=1)
    part = _person_frames([(2.0, (20.0, 60.0)), (5.0, (40.0, 20.0))], x0=325.0, tid=2)  # 3/4 of it on the body
    events = _run(_rule(), _two_tracks(whole, part))
    assert _starts(events) == [("start", 4.0, None), ("end", 4.0, 6.9)]
    assert events[0].tracker_ids == (1,)
    # a second person lying 200 px away is another incident
    other = _person_frames(phases, x0=500.0, tid=3)
    events = _run(_rule(), _two_tracks(whole, other))
    assert sorted(e.tracker_ids for e in events if e.phase == "start") == [(1,), (3,)]
    # with a stricter duplicate test (9/10 of the smaller box on the other) both tracks raise their own
    events = _run(_rule(duplicate_overlap=0.9), _two_tracks(whole, part))
    assert len([e for e in events if e.phase == "start"]) == 2


def test_the_fall_entry():
    from campusguard.app.rules.registry import RULES

    entry = RULES.entry("fall")
    assert (entry.label, entry.has_end, entry.order, entry.rule_type) == ("Fall", True, 60, FallRule)
