"""Replay against the real pipeline: a synthetic campus scene watched (`WatchService`, the detector
giving the scene's true boxes, so a run takes seconds), its tracks recorded by the service; then a
changed config (a loitering dwell raised, a crowd count lowered, a new intrusion zone) replayed over
them must raise the incidents a real watch run of that changed config raises, event ids included."""

from __future__ import annotations

import copy
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/app: fakes_watch

from fakes_watch import TruthDetector  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.demo import demo_config  # noqa: E402
from campusguard.app.engine.wiring import build_rules  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.rules import RuleEngine  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.app.tracks import replay as replay_mod  # noqa: E402
from campusguard.app.tracks.files import FLAG_FALLEN  # noqa: E402
from campusguard.app.tracks.replay import feed_segment, final_states, run_replay  # noqa: E402
from campusguard.app.tracks.segments import load_segments  # noqa: E402
from campusguard.data.synth.classes import COCO_NAMES  # noqa: E402
from campusguard.detections import Detections  # noqa: E402

NAMES = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, list | tuple) else dict(COCO_NAMES)


def _config(truth: dict[str, Any], video: Path, out: Path) -> dict[str, Any]:
    data = demo_config(truth, video, out)
    data["outputs"] = {"metrics_interval_s": 0}
    data["alerts"] = []
    data["storage"] = {"sqlite": str(out / "events.db")}
    return data


def changed(data: dict[str, Any]) -> dict[str, Any]:
    """The target's change: loitering's dwell raised, crowd's count lowered, a new intrusion zone."""
    data = copy.deepcopy(data)
    cam = data["cameras"][0]
    for rule in cam["rules"]:
        if rule["kind"] == "loitering":
            rule["min_seconds"] = float(rule["min_seconds"]) + 4
        if rule["kind"] == "crowd":
            rule["min_count"] = max(1, int(rule["min_count"]) - 1)
    cam["zones"].append({"name": "walkway", "polygon": [[300, 180], [640, 180], [640, 260], [300, 260]]})
    cam["rules"].append({"kind": "intrusion", "zone": "walkway", "min_seconds": 1.0, "inertia": 2})
    return data


def watch(data: dict[str, Any], video: Path, where: Path) -> None:
    loaded = parse_config(yaml.safe_dump(data), str(where / "watch.yaml"))
    service = WatchService(loaded, detector_factory=lambda *a: TruthDetector(video.with_suffix(".json"), NAMES))
    assert service.run()


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    from campusguard.data.synth.video import generate_video

    folder = tmp_path_factory.mktemp("scene")
    truth = generate_video(21, folder, size_wh=(640, 360), seconds=40, fps=10, name="scene").to_dict()
    video = folder / "scene.mp4"
    run_a = folder / "a"
    run_a.mkdir()
    data = _config(truth, video, run_a)
    watch(data, video, run_a)
    return video, data, run_a


def test_a_changed_config_replayed_raises_what_watch_of_it_raises(scene, tmp_path: Path) -> None:
    video, data, run_a = scene
    b = changed(data)
    replayed = run_replay(parse_config(yaml.safe_dump(b), str(run_a / "b.yaml")), since=None)
    run_b = tmp_path / "b"
    run_b.mkdir()
    b_own = copy.deepcopy(b)
    b_own["storage"] = {"sqlite": str(run_b / "events.db")}
    watch(b_own, video, run_b)
    watched = {e.event_id: e for e in read_events(run_b / "events.db")}
    assert watched and {i.event_id for i in replayed.incidents} == set(watched)
    kinds = {e.rule_kind for e in watched.values()}
    assert "intrusion" in kinds and any(e.zone == "walkway" for e in watched.values())  # the new zone raised some
    for inc in replayed.incidents:
        ev = watched[inc.event_id]
        assert (inc.start_s, inc.end_s, inc.tracker_ids, inc.zone) == (ev.start_s, ev.end_s, ev.tracker_ids, ev.zone)
    # run A's stored incidents that no incident of the real run B matches (same kind and zone,
    # overlapping, sharing a track) are gone, the others kept
    stored_a = read_events(run_a / "events.db")

    def kept(a: Any) -> bool:
        return any(
            (b.rule_kind, b.zone) == (a.rule_kind, a.zone)
            and a.start_s <= b.end_s
            and b.start_s <= a.end_s
            and set(a.tracker_ids) & set(b.tracker_ids)
            for b in watched.values()
        )

    counts = replayed.comparison.counts["none"]
    assert counts["gone"] + counts["kept"] == len(stored_a)
    assert {r.event.event_id for r in replayed.comparison.gone} == {e.event_id for e in stored_a if not kept(e)}
    assert replayed.comparison.new == len([e for e in watched.values() if not any(
        (a.rule_kind, a.zone) == (e.rule_kind, e.zone)
        and a.start_s <= e.end_s
        and e.start_s <= a.end_s
        and set(a.tracker_ids) & set(e.tracker_ids)
        for a in stored_a
    )])


def _feed_frames_whole(engine: RuleEngine, segment: Any) -> list[Any]:
    """Every frame of ``segment`` through `RuleEngine.update` as the analytics stage feeds it: the
    frame's tracked rows whole, each rule taking its own rows (`update`)."""
    b = segment.block
    off = b.offsets()
    out: list[Any] = []
    for i in range(b.frames):
        a, z = int(off[i]), int(off[i + 1])
        data = {"fallen": b.fallen[a:z].astype(bool)} if b.flags[i] & FLAG_FALLEN else {}
        dets = Detections(
            b.xyxy[a:z], np.ones(z - a, np.float32), b.class_id[a:z].astype(np.int64), b.tracker_id[a:z].astype(np.int64), data
        )
        out += engine.update(float(b.t[i]), dets, int(b.index[i]), datetime.fromtimestamp(float(b.wall[i])).astimezone())
    return out + engine.close(float(b.t[-1]), datetime.fromtimestamp(float(b.wall[-1])).astimezone())


def test_the_replays_feed_gives_what_feeding_every_frame_whole_gives(scene) -> None:
    """Replay takes a segment's rows of interest at once and feeds each rule its slice of every frame,
    skipping idle rules; that must give the very events (ids, phases, times, tracks, wall times) the
    analytics stage's way gives. Extra rules widen the check: a line across the scene counted both ways, a per-track
    fire lane, a loitering rule on the new zone, a rule armed only in a time window."""
    _, data, run_a = scene
    b = changed(data)
    cam = b["cameras"][0]
    cam["lines"].append({"name": "middle", "points": [[320, 10], [320, 350]], "in_side": "right"})
    cam["rules"] += [
        {"kind": "line_crossing", "line": "middle", "direction": "both", "name": "both_ways"},
        {"kind": "loitering", "zone": "walkway", "min_seconds": 2.0, "inertia": 2},
        {"kind": "fire_lane", "zone": "walkway", "classes": ["person"], "min_seconds": 1.0, "max_movement": 0.2},
        {"kind": "intrusion", "zone": "walkway", "min_seconds": 0.0, "per_track": False, "name": "night",
         "time_windows": [_window_around_now()]},
    ]
    loaded = parse_config(yaml.safe_dump(b), str(run_a / "b.yaml"))
    (segment,) = load_segments(loaded.config.storage.tracks_path())
    runs = []
    for how in ("replay", "replay, no skipping", "whole frames"):
        engine, _ = build_rules(loaded, 0, segment.meta.names, segment.meta.resolution_wh, segment.meta.stream_key)
        engine = RuleEngine(engine.camera_id, [r for r in engine.rules if r.kind != "camera_health"])
        if how == "whole frames":
            runs.append(_feed_frames_whole(engine, segment))
        else:
            runs.append(feed_segment(engine, segment, skip_idle=how == "replay"))
    assert runs[0] == runs[1] == runs[2]
    kinds = {(e.rule_name, e.phase) for e in runs[0]}
    for name in ("both_ways", "loitering:walkway", "fire_lane:walkway", "night"):
        assert any(n == name for n, _ in kinds), name  # each extra rule raised something to compare
    assert [e.started_at for e in runs[0]] == [e.started_at for e in runs[2]]


def _window_around_now() -> str:
    """A daily window that holds the scene's wall times (it was recorded a moment ago); near midnight it wraps
    past it, as `TimeWindow` allows (``"23:10-01:10"``)."""
    now = datetime.now()
    return f"{now - timedelta(hours=1):%H:%M}-{now + timedelta(hours=1):%H:%M}"


def test_a_rule_that_needs_pixels_is_left_out_with_one_line(scene, monkeypatch: pytest.MonkeyPatch) -> None:
    _, data, run_a = scene
    monkeypatch.setattr(replay_mod, "PIXEL_KINDS", frozenset({"camera_health", "crowd"}))
    lines: list[str] = []
    result = run_replay(parse_config(yaml.safe_dump(data), str(run_a / "a.yaml")), since=None, note=lines.append)
    # camera health is on by default for every camera: it reads pixels too, so it is noted, not an error
    assert [ln for ln in lines if "reads pixels" in ln] == [
        "camera cam0: rule crowd:danger_area (crowd) reads pixels the tracks do not hold: not replayed",
        "camera cam0: rule camera_health (camera_health) reads pixels the tracks do not hold: not replayed",
    ]
    assert result.skipped_rules == ["cam0:crowd:danger_area", "cam0:camera_health"]
    assert all(i.rule_kind != "crowd" for i in result.incidents)
    assert "camera_health" in replay_mod.pixel_kinds()


def test_rule_engine_type_is_what_replay_feeds(scene) -> None:
    _, data, run_a = scene
    loaded = parse_config(yaml.safe_dump(data), str(run_a / "a.yaml"))
    (segment,) = load_segments(loaded.config.storage.tracks_path())
    engine, _ = build_rules(loaded, 0, segment.meta.names, segment.meta.resolution_wh)
    assert isinstance(engine, RuleEngine)
    assert {e.event_id for e in final_states(feed_segment(engine, segment))} == {
        e.event_id for e in read_events(run_a / "events.db")
    }


def test_outcomes_set_through_the_api_are_counted_by_replay(scene, tmp_path: Path) -> None:
    """Target 3: false alarms marked through the console's API, then a stricter rule replayed: the
    false alarms it removes are counted gone, the confirmed incident it keeps counted kept."""
    import shutil

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "console"))
    from fakes_console import make_console

    _, data, run_a = scene
    shutil.copy(run_a / "events.db", tmp_path / "events.db")
    shutil.copytree(run_a / "tracks", tmp_path / "tracks")
    own = copy.deepcopy(data)
    own["storage"] = {"sqlite": str(tmp_path / "events.db")}
    config = tmp_path / "watch.yaml"
    config.write_text(yaml.safe_dump(own))
    stored = read_events(tmp_path / "events.db")
    loitering = [e.event_id for e in stored if e.rule_kind == "loitering"]
    others = [e.event_id for e in stored if e.rule_kind != "loitering"]
    assert loitering and others
    c = make_console(config, tmp_path)
    try:
        client = c.client()
        r = client.post(
            "/api/v1/events/bulk",
            json={"ids": loitering, "action": "resolve", "outcome": "false_alarm", "note": "nobody there"},
            headers=c.bearer("otto"),
        )
        assert r.status_code == 200 and all(e["outcome"] == "false_alarm" for e in r.json()["updated"])
        r = client.post(f"/api/v1/events/{others[0]}/resolve", json={"outcome": "confirmed"}, headers=c.bearer("otto"))
        assert r.status_code == 200 and r.json()["outcome"] == "confirmed" and r.json()["outcome_by"] == "otto"
        bad = client.post(f"/api/v1/events/{others[-1]}/resolve", json={"outcome": "maybe"}, headers=c.bearer("otto"))
        assert bad.status_code == 422
        entries, _ = c.users.audit_entries(limit=50)
        assert {(e.target, e.details.get("outcome")) for e in entries if e.action == "event.resolve"} >= {
            (others[0], "confirmed"),
            *((eid, "false_alarm") for eid in loitering),
        }
        metrics = client.get("/metrics", headers=c.bearer("ada")).text
        assert 'campusguard_incident_outcomes_total{outcome="false_alarm",rule="loitering:loiter_area"}' in metrics
        listed = client.get("/api/v1/events?outcome=false_alarm", headers=c.bearer("otto")).json()
        assert {e["id"] for e in listed["items"]} == set(loitering)
        # the noise page's data: the loitering rows are all false alarms, and come first
        noise = client.get("/api/v1/noise", params={"since": "2000-01-01T00:00:00"}, headers=c.bearer("vera")).json()
        first = noise["rows"][0]
        assert first["rule"] == "loitering:loiter_area" and first["noise_share"] == 1.0
        assert first["incidents_url"].startswith("/events?camera=cam0&rule=loitering")
        assert sum(r["false_alarm"] for r in noise["rows"]) == len(loitering)
        # the shift report of the period, from the console (HTML asked for; PDF needs the reports extra)
        shift = client.get(
            "/api/v1/reports/shift", params={"since": "2000-01-01T00:00:00", "format": "html"}, headers=c.bearer("otto")
        )
        assert shift.status_code == 200 and "false_alarm" in shift.text and "Outcomes" in shift.text
        # the rule form's "Replay the last 7 days": the edited rules over the stored tracks, nothing saved
        zones = client.get("/api/v1/cameras/cam0/zones", headers=c.bearer("ada")).json()
        for rule in zones["rules"]:
            if rule["kind"] == "loitering":
                rule["min_seconds"] = 600.0
        before = config.read_text()
        r = client.post("/api/v1/cameras/cam0/zones/replay", json=zones, headers=c.bearer("otto"))
        assert r.status_code == 200, r.text
        assert r.json()["comparison"]["false_alarm"] == {"gone": len(loitering), "kept": 0}
        assert config.read_text() == before
    finally:
        c.runtime.stop()
        c.users.close()
    stricter = copy.deepcopy(own)
    for rule in stricter["cameras"][0]["rules"]:
        if rule["kind"] == "loitering":
            rule["min_seconds"] = 600.0  # longer than the scene: no loitering at all
    result = run_replay(parse_config(yaml.safe_dump(stricter), str(config)), since=None)
    counts = result.comparison.counts
    assert counts["false_alarm"] == {"gone": len(loitering), "kept": 0}
    assert counts["confirmed"] == {"gone": 0, "kept": 1}
    assert f"{len(loitering)} of {len(loitering)} false alarms gone, 1 of 1 confirmed kept" in result.comparison.summary()
