"""LineCrossingRule and RuleEngine."""

from __future__ import annotations

import pytest

from campusguard.app.rules import RULE_TYPES, IntrusionRule, LineCrossingRule, RuleEngine
from campusguard.errors import InvalidInputError
from campusguard.zones import LineZone, PolygonZone


def _line():
    # vertical line x=320 drawn downwards: "left" (on screen, walking down) is x > 320
    return LineZone((320, 20), (320, 340), "gate", in_side="left", hysteresis_px=2.0)


def _tracks(scene):
    right_walker = scene.Track(1, 0, [(0.0, 250.0, 200.0), (2.0, 390.0, 200.0)])  # crosses x=320 at 1.0
    left_walker = scene.Track(2, 0, [(0.0, 400.0, 300.0), (2.0, 240.0, 300.0)])  # crosses at 1.0
    car = scene.Track(3, 2, [(0.0, 250.0, 100.0), (2.0, 390.0, 100.0)], size_wh=(100, 50))
    return [right_walker, left_walker, car]


@pytest.mark.parametrize(
    ("direction", "class_ids", "expected"),
    [
        ("in", (0,), [("in", (1,), 1)]),
        ("out", (0,), [("out", (2,), 1)]),
        ("both", (0,), [("in", (1,), 1), ("out", (2,), 1)]),
        ("in", None, [("in", (1,), 1), ("in", (3,), 2)]),
        ("in", (2,), [("in", (3,), 1)]),
    ],
)
def test_line_crossing_table(scene, direction, class_ids, expected):
    rule = LineCrossingRule(name="count", camera_id="c", line=_line(), direction=direction, class_ids=class_ids)
    events = scene.run(rule, scene.frames(_tracks(scene), 3.0))
    assert [(e.direction, e.tracker_ids, e.count) for e in events] == expected
    for e in events:
        # crossing between frames 1.0 and 1.1 (x=320 exactly at 1.0 is on the line, within hysteresis)
        assert e.phase == "start" and e.start_s == e.end_s == pytest.approx(1.1)
        assert e.rule_kind == "line_crossing" and e.zone == "gate"
    assert rule.in_count + rule.out_count >= len(events)


def test_line_crossing_cooldown_still_counts(scene):
    tracks = [
        scene.Track(i + 1, 0, [(0.0 + i * 0.5, 250.0, 100.0 + 60 * i), (2.0 + i * 0.5, 390.0, 100.0 + 60 * i)])
        for i in range(3)
    ]
    rule = LineCrossingRule(name="count", camera_id="c", line=_line(), cooldown_s=5.0)
    events = scene.run(rule, scene.frames(tracks, 4.0))
    assert len(events) == 1 and rule.in_count == 3


def test_engine_runs_rules_and_closes(scene):
    zone = PolygonZone([[200, 100], [400, 100], [400, 300], [200, 300]], "yard")
    engine = RuleEngine(
        "c",
        [
            IntrusionRule(name="intrusion", camera_id="c", zone=zone, min_seconds=0.5),
            LineCrossingRule(name="count", camera_id="c", line=_line()),
        ],
    )
    walker = scene.Track(1, 0, [(0.0, 250.0, 200.0), (2.0, 390.0, 200.0), (5.0, 390.0, 200.0)])
    events = []
    for t, f, d in scene.frames([walker], 5.0):
        events += engine.update(t, d, f)
    assert [(e.rule_name, e.phase) for e in events] == [("intrusion", "start"), ("count", "start")]
    assert [e.rule_name for e in engine.open_events()] == ["intrusion"]
    closing = engine.close(5.0)
    assert [(e.rule_name, e.phase, e.end_s) for e in closing] == [("intrusion", "end", 5.0)]
    assert engine.open_events() == []


def test_engine_validation():
    zone = PolygonZone([[0, 0], [10, 0], [10, 10]], "z")
    a = IntrusionRule(name="x", camera_id="c", zone=zone)
    with pytest.raises(InvalidInputError, match="unique"):
        RuleEngine("c", [a, IntrusionRule(name="x", camera_id="c", zone=zone)])
    with pytest.raises(InvalidInputError, match="belongs to camera 'c'"):
        RuleEngine("d", [a])


def test_rule_types_cover_every_kind():
    from campusguard.app.config import RULE_KINDS
    from campusguard.app.rules import RULES

    assert set(RULE_TYPES) == set(RULES.kinds())
    # the kinds a camera's `rules` items may have: all but those a camera section configures (health)
    assert set(RULE_KINDS) == {e.kind for e in RULES if e.section is None}
    assert all(cls.kind == kind for kind, cls in RULE_TYPES.items())


def test_line_rule_validation():
    with pytest.raises(InvalidInputError, match="direction"):
        LineCrossingRule(name="r", camera_id="c", line=_line(), direction="up")


def test_rule_state_stays_bounded_over_many_tracks(make_detections):
    """3,000 frames, a new track id every 2 frames walking through every zone and the line:
    per-track state is forgotten once tracks are gone, so memory does not grow with time."""
    from campusguard.app.rules import CrowdRule, FireLaneRule, LoiteringRule

    zone = PolygonZone([[200, 100], [400, 100], [400, 300], [200, 300]], "yard", resolution_wh=(640, 360))
    line = LineZone((320, 20), (320, 340), "gate", forget_after_updates=50)
    engine = RuleEngine(
        "c",
        [
            IntrusionRule(name="i", camera_id="c", zone=zone, min_seconds=0.5),
            CrowdRule(name="cr", camera_id="c", zone=zone, min_count=3, min_seconds=1.0),
            FireLaneRule(name="f", camera_id="c", zone=zone, min_seconds=1.0, class_ids=None),
            LoiteringRule(name="l", camera_id="c", zone=zone, min_seconds=1.0),
            LineCrossingRule(name="x", camera_id="c", line=line),
        ],
    )
    n_events = 0
    for f in range(3000):
        t = f / 10
        # each track lives 40 frames, walking 10 px per frame left to right across the zone
        alive = [k for k in range(max(0, f // 2 - 20), f // 2 + 1) if 0 <= f - 2 * k < 40]
        xs = [150 + 10 * (f - 2 * k) for k in alive]
        boxes = [[x - 10, 180 + (k % 5) * 20 - 60, x + 10, 180 + (k % 5) * 20] for x, k in zip(xs, alive, strict=True)]
        n_events += len(engine.update(t, make_detections(boxes, tracker_id=[k + 1 for k in alive]), f))
    assert n_events > 1000  # the scene really raises events all along
    for rule in engine.rules[:4]:
        assert len(rule.presence.tracks) <= 40
        assert len(rule.track_episodes) <= 40
    assert len(engine.rules[2]._still_last) <= 40
    assert len(line._tracks) <= 80


def test_carry_over_keeps_unchanged_rules_and_their_state(scene):
    """An engine rebuilt from an edited config takes over the running rules whose fingerprint is
    the same (their open incident goes on, one id); changed or removed ones are handed back to close."""
    from campusguard.app.config import ZoneConfig
    from campusguard.app.rules.engine import rule_fingerprint
    from campusguard.app.rules.zone_rules import IntrusionRuleConfig

    yard = ZoneConfig(name="yard", polygon=[(200, 100), (400, 100), (400, 300), (200, 300)])
    gate = ZoneConfig(name="gate", polygon=[(0, 0), (50, 0), (50, 50)])
    names = {0: "person"}

    def build(sections, zones):
        built = {z.name: z.build((640, 360)) for z in zones}
        rules = [
            IntrusionRule(name=s.display_name(), camera_id="c", zone=built[s.zone], min_seconds=s.min_seconds)
            for s in sections
        ]
        keys = [rule_fingerprint(s, zones, [], names=names, resolution_wh=(640, 360)) for s in sections]
        return RuleEngine("c", rules, keys)

    watch = IntrusionRuleConfig(zone="yard", min_seconds=0.5)
    at_gate = IntrusionRuleConfig(zone="gate")
    running = build([watch, at_gate], [yard, gate])
    walker = scene.Track(1, 0, [(0.0, 300.0, 200.0), (2.0, 300.0, 200.0)])
    events = [e for t, f, d in scene.frames([walker], 2.0) for e in running.update(t, d, f)]
    assert [(e.rule_name, e.phase) for e in events] == [("intrusion:yard", "start")]
    # the gate zone renamed and a rule added elsewhere: the yard rule is the same
    moved_gate = ZoneConfig(name="door", polygon=gate.polygon)
    edited = build([watch, IntrusionRuleConfig(zone="door")], [yard, moved_gate])
    retired = edited.carry_over(running)
    assert edited.rules[0] is running.rules[0] and edited.rules[1] is not running.rules[1]
    assert [r.name for r in retired.rules] == ["intrusion:gate"]
    assert [e.event_id for e in edited.open_events()] == [events[0].event_id]
    # the yard moved: its rule restarts (handed back to close)
    moved_yard = ZoneConfig(name="yard", polygon=[(210, 100), (400, 100), (400, 300), (210, 300)])
    again = build([watch], [moved_yard])
    retired = again.carry_over(edited)
    assert again.rules[0] is not edited.rules[0] and [r.name for r in retired.rules] == [
        "intrusion:yard",
        "intrusion:door",
    ]
    assert [e.phase for e in retired.close(2.0)] == ["end"]
    # rules without keys are never carried over
    assert RuleEngine("c", [running.rules[0]]).carry_over(running).rules == running.rules


def test_the_line_crossing_entry():
    """A crossing is instantaneous: its kind has no end phase (MQTT pulses it back to 0)."""
    from campusguard.app.rules.registry import RULES

    entry = RULES.entry("line_crossing")
    assert (entry.label, entry.has_end, entry.order, entry.rule_type) == ("Line crossing", False, 50, LineCrossingRule)
