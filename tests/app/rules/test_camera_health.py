"""The `camera_health` rule: timing of its incidents, offline by the clock, the reference view, config."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import build_camera
from campusguard.app.rules import RULES, RuleEngine
from campusguard.app.rules.camera_health import (
    CameraHealthConfig,
    CameraHealthRule,
    ReferenceStore,
    effective_health,
)
from campusguard.app.rules.zone_rules import IntrusionRule
from campusguard.detections import Detections
from campusguard.zones import PolygonZone

RNG = np.random.default_rng(0)
SCENE = cv2.GaussianBlur(RNG.integers(0, 255, (180, 320), dtype=np.uint8), (0, 0), 2.0)
SCENE = cv2.normalize(SCENE, None, 20, 230, cv2.NORM_MINMAX)


def frame(kind: str = "ok", seed: int = 0) -> np.ndarray:
    """A grey frame of the test scene with fresh sensor noise; ``kind``: ok, covered, turned, blurred."""
    base = SCENE
    if kind == "covered":
        base = np.full_like(SCENE, 25)
    elif kind == "turned":
        m = cv2.getRotationMatrix2D((160, 90), 12, 1.2)
        base = cv2.warpAffine(SCENE, m, (320, 180), borderMode=cv2.BORDER_REFLECT)
    elif kind == "blurred":
        base = cv2.GaussianBlur(SCENE, (0, 0), 5)
    noise = np.random.default_rng(seed).normal(0, 3, SCENE.shape)
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def rule(live: bool = False, store: ReferenceStore | None = None, **settings: object) -> CameraHealthRule:
    cfg = CameraHealthConfig.model_validate({"learn_s": 5, **settings})
    return CameraHealthRule(name="camera_health", camera_id="c", config=cfg, live=live, references=store, started_s=0.0)


def feed(r: CameraHealthRule, script: list[tuple[float, float, str]], step_s: float = 1.0) -> list:
    """Feed frames of ``kind`` from ``t0`` to ``t1`` for each ``(t0, t1, kind)``; the events."""
    events = []
    frozen = None
    for t0, t1, kind in script:
        for i, t in enumerate(np.arange(t0, t1, step_s)):
            if kind == "frozen":
                frozen = frozen if frozen is not None else frame("ok", 999)
                image = frozen
            else:
                image = frame(kind, int(t * 10) + i)
            events += r.observe(float(t), int(t * 10), image)
    return events


@pytest.mark.parametrize(
    ("kind", "problem", "min_s"),
    [("covered", "covered", 10), ("frozen", "frozen", 10), ("blurred", "blurred", 20), ("turned", "moved", 30)],
)
def test_a_problem_that_lasts_its_min_s_is_one_incident_from_onset_to_end(kind: str, problem: str, min_s: float) -> None:
    r = rule()
    events = feed(r, [(0, 20, "ok"), (20, 80, kind), (80, 100, "ok")])
    starts = [e for e in events if e.phase == "start"]
    ends = [e for e in events if e.phase == "end"]
    assert [e.zone for e in starts] == [problem] and [e.zone for e in ends] == [problem]
    (start,), (end,) = starts, ends
    assert start.rule_kind == "camera_health" and start.details["problem"] == problem
    assert start.onset_s == pytest.approx(20, abs=1.01)
    assert start.start_s == pytest.approx(20 + min_s, abs=1.01)
    assert 79 <= end.end_s <= 80 and end.event_id == start.event_id
    assert start.details["measures"]  # the numbers that decided it
    assert r.status().state == "ok" and not r.open_events()


def test_a_problem_shorter_than_its_min_s_and_a_camera_still_learning_raise_nothing() -> None:
    r = rule()
    assert feed(r, [(0, 3, "covered"), (3, 20, "ok"), (20, 28, "covered"), (28, 40, "ok")]) == []


def test_a_problem_turned_off_raises_nothing() -> None:
    r = rule(covered={"enabled": False})
    assert [e for e in feed(r, [(0, 20, "ok"), (20, 60, "covered")]) if e.zone == "covered"] == []


def test_offline_is_judged_by_the_clock_and_ends_with_the_first_frame() -> None:
    r = rule(live=True)
    feed(r, [(0, 10, "ok")])
    events = []
    for t in np.arange(10.2, 40, 0.2):  # no frame after 9 s
        events += r.tick(float(t))
    (start,) = events
    assert start.zone == "offline" and start.onset_s == pytest.approx(9.0)
    assert start.start_s == pytest.approx(19.0, abs=0.25)
    assert r.status().state == "offline"
    assert RuleEngine("c", [r]).close_for_outage(40.0) == []  # an outage does not end the outage's own incident
    (end,) = r.observe(40.0, 400, frame())
    assert end.phase == "end" and end.zone == "offline" and 39.7 <= end.end_s <= 40.0
    assert rule(live=False).tick(100.0) == []  # a file has no clock of its own: never offline


def test_a_camera_that_never_gave_a_frame_is_offline_from_its_start() -> None:
    r = rule(live=True)
    events = [e for t in np.arange(0.2, 12, 0.2) for e in r.tick(float(t))]
    (start,) = events
    assert start.zone == "offline" and start.onset_s == 0.0


def test_accepting_a_new_view_ends_moved_and_is_kept_for_the_next_run(tmp_path: Path) -> None:
    store = ReferenceStore(tmp_path / "health")
    r = rule(live=True, store=store)
    events = feed(r, [(0, 10, "ok"), (10, 45, "turned")])
    assert [e.zone for e in events if e.phase == "start"] == ["moved"]
    assert r.accept_view("ada", zones=["gate"])
    (end,) = feed(r, [(45, 55, "turned")])
    assert end.phase == "end" and end.zone == "moved"
    status = r.status()
    assert status.state == "ok" and status.reference_accepted_by == "ada" and status.zones_on_old_view == ("gate",)
    # the next run starts from the accepted view: the old view is now the moved one, judged at once
    again = rule(live=True, store=store)
    assert [e.zone for e in feed(again, [(0, 40, "ok")]) if e.phase == "start"] == ["moved"]
    # the zones saved again: the note of the old view's zones is gone, here and for the next run
    assert again.clear_old_view_zones() and not again.clear_old_view_zones()
    kept = store.load("c")
    assert kept is not None and kept.zones_on_old_view == () and kept.accepted_by == "ada"
    assert again.status().zones_on_old_view == () and rule(live=True, store=store).status().zones_on_old_view == ()
    (tmp_path / "health" / "c.npy").write_bytes(b"not numpy")
    assert ReferenceStore(tmp_path / "health").load("c") is None  # damaged: learned again


def test_the_snapshot_is_the_last_good_view_beside_the_current_one() -> None:
    r = rule()
    (start,) = [e for e in feed(r, [(0, 20, "ok"), (20, 40, "covered")]) if e.phase == "start"]
    image = r.snapshot_image(start, frame("covered"))
    assert image.ndim == 3 and image.shape[1] > 2 * 320
    left, right = image[40:, :300], image[40:, -300:]
    assert left.std() > 20 and right.std() < 10  # the good view has texture, the covered one none
    offline = r.snapshot_image(start, None)
    assert offline.shape[0] == image.shape[0]


def test_a_cameras_health_section_changes_only_what_it_names() -> None:
    site = CameraHealthConfig.model_validate({"covered": {"min_area": 0.6}, "moved": {"min_s": 45}})
    cam = CameraHealthConfig.model_validate({"covered": {"min_s": 5}})
    merged = effective_health(site, cam)
    assert (merged.covered.min_s, merged.covered.min_area, merged.moved.min_s) == (5, 0.6, 45)
    assert effective_health(site, None) is site


def test_health_is_on_for_every_camera_and_off_where_asked(tmp_path: Path) -> None:
    text = f"""\
health:
  blurred: {{min_s: 40}}
storage: {{sqlite: {tmp_path / "e.db"}}}
cameras:
  - id: a
    source: a.mp4
  - id: b
    source: b.mp4
    health: {{enabled: false}}
  - id: c
    source: http://10.0.0.1/video
    health: {{frozen: {{min_s: 20}}}}
    zones:
      - name: z
        polygon: [[0, 0], [100, 0], [100, 100], [0, 100]]
    rules:
      - {{kind: intrusion, zone: z}}
"""
    loaded = parse_config(text, "w.yaml")
    names = {0: "person"}
    a = build_camera(loaded, 0, names, (320, 180), 10.0).rules.rules
    b = build_camera(loaded, 1, names, (320, 180), 10.0).rules.rules
    c = build_camera(loaded, 2, names, (320, 180), 10.0).rules.rules
    assert [x.kind for x in a] == ["camera_health"] and b == []
    assert [type(x) for x in c] == [IntrusionRule, CameraHealthRule]
    health = c[1]
    assert isinstance(health, CameraHealthRule) and health.live and health.references is not None
    assert (health.config.frozen.min_s, health.config.blurred.min_s) == (20, 40)
    assert health.references.folder == (tmp_path / "health").resolve()
    assert "camera_health" in RULES.kinds() and RULES.entry("camera_health").section == "health"


def test_health_is_not_a_rules_item_and_its_schema_is_documented() -> None:
    from campusguard.app.config import config_schema
    from campusguard.errors import ConfigError

    schema = json.loads(config_schema())
    assert "health" in schema["properties"]
    with pytest.raises(ConfigError, match="unknown rule kind 'camera_health'"):
        parse_config("cameras:\n  - id: a\n    source: a.mp4\n    rules:\n      - kind: camera_health\n", "c.yaml")
    with pytest.raises(ConfigError, match=r"c\.yaml:4: cameras\[0\]\.health\.covered\.min_area"):
        parse_config("cameras:\n  - id: a\n    source: a.mp4\n    health: {covered: {min_area: 2}}\n", "c.yaml")


def test_the_engine_hands_frames_to_health_and_keeps_it_through_an_outage() -> None:
    zone = PolygonZone([(0, 0), (320, 0), (320, 180), (0, 180)], "z", resolution_wh=(320, 180))
    intrusion = IntrusionRule(name="i", camera_id="c", zone=zone, min_seconds=0, inertia=1)
    health = rule(live=True)
    engine = RuleEngine("c", [intrusion, health])
    assert engine.picture_rules() == [health] and engine.picture_rules() == [health]  # the second answer remembered
    person = Detections(
        np.array([[10, 10, 50, 100]], np.float32), np.array([0.9], np.float32), np.array([0]), np.array([1])
    )
    events = engine.update(0.0, person, 0) + engine.observe(0.0, 0, frame())
    assert [e.rule_kind for e in events] == ["intrusion"]
    for t in np.arange(0.2, 15, 0.2):
        events += engine.tick(float(t))
    assert {e.rule_kind for e in events if e.phase == "start"} == {"intrusion", "camera_health"}
    ended = engine.close_for_outage(15.0)
    assert [e.rule_kind for e in ended] == ["intrusion"]
    assert [e.zone for e in engine.open_events()] == ["offline"]


def test_a_files_incident_still_open_at_its_end_ends_on_the_files_clock() -> None:
    """A file's stream clock starts at its first frame: closing at the end of the file ends the open
    incident at the file's time, never at the process's monotonic clock."""
    cfg = CameraHealthConfig.model_validate({"learn_s": 5})
    r = CameraHealthRule(name="camera_health", camera_id="c", config=cfg, live=False)
    feed(r, [(0, 20, "ok"), (20, 40, "covered")])
    (end,) = r.close(40.0)
    assert end.phase == "end" and 39.0 <= end.end_s <= 40.0
