"""Camera health end to end: `watch` over videos the tests make (covered, defocused, turned and frozen,
and a scene of harmless changes), and a live HTTP camera that goes offline and comes back."""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector  # noqa: E402
from http_camera import HttpCamera  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.data.synth.video import SynthVideo, generate_video  # noqa: E402
from campusguard.data.synth.view_effects import ViewEffect  # noqa: E402

FPS = 5
SIZE = (320, 180)
PROBLEMS = [  # the episodes: a 40 s cover, 60 s defocus (sigma 5), 60 s turn (10 deg, shift, 1.2x), 40 s freeze
    ViewEffect("cover", 20, 60),
    ViewEffect("defocus", 80, 140, sigma=5),
    ViewEffect("turn", 160, 220, angle_deg=10, zoom=1.2, shift_px=20),
    ViewEffect("freeze", 240, 280),
]
HARMLESS = [  # none of these is a health problem
    ViewEffect("dusk", 30, 150, level=0.45),  # dusk: brightness ramps down to 45% and stays there
    ViewEffect("flash", 60, 60 + 3 / FPS, level=0.85),  # a 3-frame flash
    ViewEffect("shade", 100, 104, area=0.4),  # a dark shape over 40% of the view for 4 s
    ViewEffect("shake", 170, 175, shift_px=3),  # 5 s of +-3 px wind shake
]


def watch(video: Path, tmp: Path, extra: str = "") -> list:
    text = f"""\
cameras:
  - id: cam0
    source: {video}
    motion: {{enabled: true}}
alerts:
  - kind: jsonl
    path: {tmp / "alerts.jsonl"}
storage:
  sqlite: {tmp / "events.db"}
outputs:
  snapshots_dir: {tmp / "snaps"}
  metrics_interval_s: 0
{extra}"""
    service = WatchService(parse_config(text, "w.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    assert service.run()
    return list(read_events(tmp / "events.db"))


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    tmp = tmp_path_factory.mktemp("health")
    generate_video(21, tmp, SIZE, 300, FPS, name="problems", idle_fraction=0.5, effects=PROBLEMS)
    return tmp, watch(tmp / "problems.mp4", tmp)


def test_each_problem_is_one_incident_of_its_kind_on_time(problems: tuple[Path, list]) -> None:
    tmp, events = problems
    latest = {e.event_id: e for e in events}
    health = sorted((e for e in latest.values() if e.rule_kind == "camera_health"), key=lambda e: e.start_s)
    assert [e.details["problem"] for e in health] == ["covered", "blurred", "moved", "frozen"]
    limits = {"covered": 30, "frozen": 30, "blurred": 60, "moved": 60}  # seconds after onset
    for ev, effect in zip(health, PROBLEMS, strict=True):
        problem = ev.details["problem"]
        assert ev.zone == problem and ev.rule_name == "camera_health"
        assert effect.start_s <= ev.start_s <= effect.start_s + limits[problem], (problem, ev.start_s)
        assert ev.onset_s is not None and abs(ev.onset_s - effect.start_s) <= 12, (problem, ev.onset_s)
        assert ev.end_s is not None and abs(ev.end_s - effect.end_s) <= 30, (problem, ev.end_s)
        assert ev.details["measures"], problem
        assert ev.snapshot_path and Path(ev.snapshot_path).is_file()
    # each incident went through the sinks, start and end
    alerts = [json.loads(line) for line in (tmp / "alerts.jsonl").read_text().splitlines()]
    phases = {(a["event_id"], a["phase"]) for a in alerts}
    assert all((e.event_id, "start") in phases and (e.event_id, "end") in phases for e in health)


def test_eval_events_scores_health_incidents_against_the_generators_truth(problems: tuple[Path, list]) -> None:
    tmp, events = problems
    truth = [i for i in load_truth(tmp / "problems.json") if i.kind == "camera_health"]
    assert [i.zone for i in truth] == ["covered", "blurred", "moved", "frozen"]
    predicted = [i for i in incidents_from_events(events) if i.kind == "camera_health"]
    scores = evaluate_events(truth, predicted, tolerance_s=2.0)
    assert scores.per_kind["camera_health"].f1 == 1.0


def test_dusk_a_flash_a_passing_shape_shake_and_quiet_stretches_raise_nothing(tmp_path: Path) -> None:
    generate_video(22, tmp_path, SIZE, 200, FPS, name="harmless", idle_fraction=0.7, effects=HARMLESS)
    events = watch(tmp_path / "harmless.mp4", tmp_path)
    assert [e.details for e in events if e.rule_kind == "camera_health"] == []


def test_a_live_camera_that_refuses_connections_is_an_offline_incident(tmp_path: Path) -> None:
    scene = SynthVideo(5, SIZE, seconds=60, fps=10, idle_fraction=0.5)
    frames = [scene.frame(i)[0] for i in range(0, 50)]
    camera = HttpCamera(lambda t: frames[int(t * 10) % len(frames)], fps=10)
    text = f"""\
cameras:
  - id: gate
    source: {camera.url}
    reconnect: {{initial_s: 0.5, max_s: 4}}
    health: {{offline: {{min_s: 3}}}}
alerts:
  - kind: jsonl
    path: {tmp_path / "alerts.jsonl"}
storage:
  sqlite: {tmp_path / "events.db"}
outputs:
  metrics_interval_s: 0
"""
    service = WatchService(parse_config(text, "w.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    runner = threading.Thread(target=service.run, daemon=True)
    runner.start()

    def alerts() -> list[dict]:
        path = tmp_path / "alerts.jsonl"
        return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []

    def wait(predicate, timeout_s: float) -> float:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.2)
        return time.monotonic()

    try:
        wait(lambda: service.metrics.get("gate") is not None and service.metrics["gate"].frames_processed > 20, 60)
        outage = time.monotonic()
        camera.down()
        started = wait(lambda: any(a["phase"] == "start" for a in alerts()), 40)
        assert started - outage <= 30
        time.sleep(max(0.0, 8 - (time.monotonic() - outage)))  # an 8 s outage (the 60 s, shortened for CI)
        camera.up()
        back = time.monotonic()
        ended = wait(lambda: any(a["phase"] == "end" for a in alerts()), 40)
        assert ended - back <= 30
    finally:
        service.stop()
        runner.join(30)
        camera.close()
    (start,) = [a for a in alerts() if a["phase"] == "start"]
    (end,) = [a for a in alerts() if a["phase"] == "end"]
    assert start["rule_kind"] == "camera_health" and start["zone"] == "offline" and end["event_id"] == start["event_id"]
    assert start["details"]["problem"] == "offline"
    assert not any("interrupted" in a.get("details", {}) for a in alerts())
    stored = [e for e in read_events(tmp_path / "events.db") if e.rule_kind == "camera_health"]
    assert {e.zone for e in stored} == {"offline"} and all(e.end_s is not None for e in stored)
    assert np.isfinite(stored[-1].end_s)
