"""`warn_for_config`: the synthetic-only model warning for a whole watch configuration."""

from __future__ import annotations

import io
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def synth_video(tmp_path_factory) -> Path:
    from campusguard.data.synth.video import generate_video

    out = tmp_path_factory.mktemp("synth")
    truth = generate_video(3, out, size_wh=(160, 96), seconds=1.0, fps=5, name="clip")
    return out / truth.video


def test_watch_config_warns_per_camera_model(synth_video):
    from campusguard.app.config import parse_config
    from campusguard.app.model_warning import warn_for_config

    def cfg(text: str):
        return parse_config(text).config

    out = io.StringIO()
    assert not warn_for_config(cfg(f"cameras:\n  - id: a\n    source: {synth_video}\n"), out)
    assert warn_for_config(cfg(f"cameras:\n  - id: a\n    source: {synth_video}\n  - id: b\n    source: 0\n"), out)
    real_weights = "detector:\n  model: fall-yolov8s\ncameras:\n  - id: b\n    source: 0\n"
    assert not warn_for_config(cfg(real_weights), out)
    assert out.getvalue().count("\n") == 1
    # the line names the fix in the config's terms
    assert "`campusguard models pull yolov8n`, then `detector: {model: yolov8n}` in the config" in out.getvalue()
