"""What the main job hands a newcomer: videos Chromium plays, and thumbnails that show why.

The demo runs on its real synthetic video with `TruthDetector` (the video's own boxes), so the
incidents are the scripted ones; the videos are the files `demo` writes (the synthetic source
and `watch`'s annotated recording), opened in Debian's Chromium as a reader of summary.html
would open them.
"""

from __future__ import annotations

import base64
import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import TruthDetector  # noqa: E402

from campusguard.app.demo import DemoResult, incident_picture, run_demo  # noqa: E402
from campusguard.app.engine.analytics import TRIGGER_BOXES  # noqa: E402
from campusguard.data.synth.classes import COCO_NAMES  # noqa: E402

NAMES = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)
CHROMIUM = Path("/usr/bin/chromium")
RED_BGR = np.array([0, 0, 255])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    out_dir = tmp_path_factory.mktemp("demo")
    return run_demo(
        seed=0,
        out_dir=out_dir,
        seconds=40,
        out=io.StringIO(),
        detector_factory=lambda *a: TruthDetector(out_dir / "campus-seed0.json", NAMES),
    )


def _decode_data_uri(uri: str) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(base64.b64decode(uri), np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    return image


def test_each_summary_thumbnail_draws_the_boxes_and_the_zone_that_raised_it(demo: DemoResult) -> None:
    truth = json.loads(demo.truth.read_text())
    events = sorted(demo.events, key=lambda e: e.start_s)
    assert {e.rule_kind for e in events} >= {"crowd", "line_crossing", "intrusion"}
    thumbs = re.findall(r'<img src="data:image/jpeg;base64,([^"]+)" alt="([^"]+)"', demo.summary_html.read_text())
    assert len(thumbs) == len(events)
    for event, (uri, alt) in zip(events, thumbs, strict=True):
        boxes = event.details[TRIGGER_BOXES]
        assert {b["tracker_id"] for b in boxes} <= set(event.tracker_ids) and boxes
        drawn = incident_picture(event, truth)
        assert drawn is not None
        for box in boxes:  # every triggering box outlined in red on the full-size picture
            x1, y1, x2, y2 = (round(v) for v in box["xyxy"])
            edge = drawn[y1, max(x1, 0) : x2]
            assert (np.abs(edge.astype(int) - RED_BGR).sum(axis=1) < 60).mean() > 0.8, event.rule_kind
        shape = truth["zones"].get(event.zone, {}).get("polygon") or truth["lines"][event.zone]["points"]
        for x, y in np.round(np.asarray(shape)).astype(int):  # and the rule's zone or line in red
            x, y = min(x, drawn.shape[1] - 1), min(y, drawn.shape[0] - 1)
            patch = drawn[max(y - 2, 0) : y + 3, max(x - 2, 0) : x + 3].reshape(-1, 3).astype(int)
            assert (np.abs(patch - RED_BGR).sum(axis=1) < 60).any(), (event.zone, x, y)
        # the page's thumbnail is that picture, not the raw snapshot
        thumb = _decode_data_uri(uri)
        size = (thumb.shape[1], thumb.shape[0])
        raw = cv2.imread(str(event.snapshot_path))
        from_drawn = np.abs(cv2.resize(drawn, size, interpolation=cv2.INTER_AREA).astype(int) - thumb).mean()
        from_raw = np.abs(cv2.resize(raw, size, interpolation=cv2.INTER_AREA).astype(int) - thumb).mean()
        assert from_drawn < from_raw
        assert event.rule_kind in alt and event.zone in alt


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


PLAY = """async (src) => {
  const v = document.createElement('video');
  v.muted = true;
  document.body.appendChild(v);
  const result = await new Promise((resolve) => {
    v.onloadeddata = () => resolve({ok: true, w: v.videoWidth, h: v.videoHeight, d: v.duration});
    v.onerror = () => resolve({ok: false, error: v.error && v.error.message, code: v.error && v.error.code});
    setTimeout(() => resolve({ok: false, error: 'timeout'}), 15000);
    v.src = src;
  });
  if (result.ok) {
    try { await v.play(); result.played = true; } catch (e) { result.played = false; result.error = String(e); }
  }
  return result;
}"""


@pytest.mark.slow
def test_every_video_the_demo_and_watch_write_plays_in_chromium(demo: DemoResult, browser: Any) -> None:
    videos = sorted(demo.out_dir.rglob("*.mp4"))
    assert demo.video in videos and any(p.parent.name == "annotated" for p in videos)
    page = demo.summary_html.read_text()
    assert demo.video.name in page  # the summary links them
    tab = browser.new_page()
    tab.goto(demo.summary_html.as_uri())
    for video in videos:
        result = tab.evaluate(PLAY, video.as_uri())
        assert result["ok"] and result.get("played"), (video.name, result)
        assert (result["w"], result["h"]) == (640, 360) and result["d"] > 1.0, (video.name, result)
    tab.close()
