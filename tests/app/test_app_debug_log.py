"""``--log-level debug``: what each source opened, gate decisions, detector batches and rule state
changes, rate-limited so a long run stays readable; nothing of it at ``info`` (issue 23)."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402

GATED = "    motion: {enabled: true, min_region: 64, margin: 0.25, keyframe_s: 5}\n    zones:\n"


def _run(tmp_path: Path, level: int, caplog: pytest.LogCaptureFixture) -> list[str]:
    video = write_scene(tmp_path / "scene.mp4", n=60)
    text = scene_config(video, tmp_path).replace("    zones:\n", GATED, 1)
    service = WatchService(parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    with caplog.at_level(level, logger="campusguard"):
        assert service.run()
    return [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]


def test_debug_tells_what_happened_and_stays_short(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lines = _run(tmp_path, logging.DEBUG, caplog)
    text = "\n".join(lines)
    assert "opened path" in text and "mp4" in text and "320x180" in text and "10 fps" in text
    assert "camera cam1: first frame of this connection: 320x180" in text
    assert "camera cam1 frame 0: gate full (keyframe)" in text
    assert "detector batch 1:" in text
    # both incidents of the scene, each start and end, with the rule and kind
    for kind in ("intrusion", "fire_lane"):
        assert any(f"({kind}): incident" in ln and " start at " in ln for ln in lines), text
        assert any(f"({kind}): incident" in ln and " end at " in ln for ln in lines), text
    # 60 frames: gate and batch lines are rate-limited (one per camera and decision, per batch shape,
    # every 10 s), not one per frame
    assert sum("gate" in ln for ln in lines) <= 6
    assert sum("detector batch" in ln for ln in lines) <= 6


def test_info_has_none_of_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert _run(tmp_path, logging.INFO, caplog) == []
