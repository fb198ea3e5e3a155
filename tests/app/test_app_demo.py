"""The demo: synthetic video, config from the bundled example, watch, score, HTML summary.

The network is replaced by `TruthDetector` (the video's ground-truth boxes, frame by frame),
so these tests check everything after detection (tracking, rules, store, scoring, outputs)
on the real synthetic video; the default model's scores are measured by the demo itself.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import cv2
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import TruthDetector  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.demo import EXAMPLE_CONFIG, demo_config, run_demo  # noqa: E402
from campusguard.data.synth.classes import COCO_NAMES  # noqa: E402

NAMES = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)


def test_bundled_example_config_is_valid() -> None:
    loaded = parse_config(EXAMPLE_CONFIG.read_text(), str(EXAMPLE_CONFIG))
    cam = loaded.config.cameras[0]
    assert {r.kind for r in cam.rules} == {"intrusion", "crowd", "fire_lane", "loitering", "line_crossing"}
    loaded.check_class_names(0, NAMES)


def test_demo_config_takes_geometry_and_thresholds_from_the_truth(tmp_path: Path) -> None:
    truth = {
        "camera_id": "camX",
        "resolution_wh": [320, 180],
        "zones": {"restricted": {"polygon": [[10, 10], [100, 10], [100, 100]]}},
        "lines": {},
        "params": {"intrusion": {"min_seconds": 1.5}, "crowd": {"min_count": 7, "min_seconds": 9}},
    }
    data = demo_config(truth, tmp_path / "v.mp4", tmp_path)
    cam = data["cameras"][0]
    assert cam["id"] == "camX" and cam["resolution_wh"] == [320, 180]
    assert [r["kind"] for r in cam["rules"]] == ["intrusion"]  # rules on zones the video lacks are dropped
    assert cam["rules"][0]["min_seconds"] == 1.5
    assert data["storage"]["sqlite"] == str(tmp_path / "events.db")
    parse_config(yaml.safe_dump(data), "demo.yaml")  # and it is a valid config


def test_demo_end_to_end_scores_and_outputs(tmp_path: Path) -> None:
    out = io.StringIO()
    seed = 0  # even seeds script all four zone incidents plus a line crossing
    result = run_demo(
        seed=seed,
        out_dir=tmp_path,
        seconds=40,
        out=out,
        detector_factory=lambda *a: TruthDetector(tmp_path / f"campus-seed{seed}.json", NAMES),
    )
    printed = out.getvalue()
    assert result.clean
    scripted = json.loads(result.truth.read_text())["incidents"]
    assert {i["kind"] for i in scripted} >= {"intrusion", "crowd", "fire_lane", "loitering"}
    # with perfect boxes, every scripted incident is found and nothing else (tracking and rules agree with the script)
    assert result.scores.overall.f1 == pytest.approx(1.0)
    assert result.scores.overall.tp == len(scripted)
    assert printed.count("[start]") == len(scripted)  # incidents printed as they happened
    assert "F1 1.000" in printed
    cap = cv2.VideoCapture(str(result.annotated_video))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 400
    cap.release()
    page = result.summary_html.read_text()
    assert "F1 <b>1.000</b>" in page and page.count("data:image/jpeg;base64,") == len(scripted)
    assert json.loads((tmp_path / "scores.json").read_text())["overall"]["f1"] == pytest.approx(1.0)
    # a second run in the same folder starts from a clean slate
    result2 = run_demo(
        seed=seed,
        out_dir=tmp_path,
        seconds=40,
        out=io.StringIO(),
        detector_factory=lambda *a: TruthDetector(tmp_path / f"campus-seed{seed}.json", NAMES),
    )
    assert len(result2.events) == len(result.events)


def test_demo_with_falls_adds_the_fall_rule_and_finds_every_fall(tmp_path: Path) -> None:
    seed = 2
    result = run_demo(
        seed=seed,
        out_dir=tmp_path,
        seconds=25,
        out=io.StringIO(),
        detector_factory=lambda *a: TruthDetector(tmp_path / f"campus-seed{seed}.json", NAMES),
        falls=True,
    )
    rules = yaml.safe_load(result.config.read_text())["cameras"][0]["rules"]
    fall_rule = next(r for r in rules if r["kind"] == "fall")
    assert fall_rule["min_duration_s"] == 3.0 and "zone" not in fall_rule  # anywhere, as the truth counts falls
    scripted = json.loads(result.truth.read_text())["incidents"]
    assert any(i["kind"] == "fall" for i in scripted)
    assert result.scores.per_kind["fall"].f1 == pytest.approx(1.0)
    assert result.scores.overall.f1 == pytest.approx(1.0)
    falls = [e for e in result.events if e.rule_kind == "fall"]
    assert falls and all(e.details["signal"] == "track-shape" for e in falls)


def test_demo_with_an_idle_fraction_is_quiet_outside_its_busy_span_and_scored(tmp_path: Path) -> None:
    seed = 2
    out = io.StringIO()
    result = run_demo(
        seed=seed,
        out_dir=tmp_path,
        seconds=60,
        out=out,
        detector_factory=lambda *a: TruthDetector(tmp_path / f"campus-seed{seed}-idle50.json", NAMES),
        idle_fraction=0.5,
    )
    truth = json.loads(result.truth.read_text())
    assert result.video.name == f"campus-seed{seed}-idle50.mp4"
    assert truth["idle_fraction"] == 0.5 and truth["active_windows_s"] == [[15.0, 45.0]]
    assert all(not f["objects"] for f in truth["frames"] if not 15.0 <= f["t"] <= 45.0)
    assert truth["incidents"] and result.scores.overall.f1 == pytest.approx(1.0)
    assert "active spans 15-45 s; nobody in view and nothing moving outside them" in out.getvalue()
