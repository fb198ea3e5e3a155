"""Synthetic videos with quiet stretches (`idle_fraction`): nobody in view and nothing moving there."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.data.synth.video import SynthVideo, load_video_truth
from campusguard.errors import InvalidInputError


def test_an_idle_video_is_empty_and_still_outside_its_active_spans(tmp_path):
    video = SynthVideo(2, (320, 180), seconds=80, fps=5, idle_fraction=0.75)
    assert video.active_windows == [(30.0, 50.0)]
    truth = video.truth()
    assert truth.incidents  # the busy span still scripts incidents, scored as always
    assert all(w[0] <= i["start_s"] and i["end_s"] <= w[1] for i in truth.incidents for w in video.active_windows)
    idle = [f for f in truth.frames if not 30.0 <= f["t"] <= 50.0]
    assert len(idle) >= 0.74 * len(truth.frames) and all(not f["objects"] for f in idle)
    assert any(f["objects"] for f in truth.frames if 30.0 <= f["t"] <= 50.0)
    # nothing moves: two idle frames differ by the sensor noise only
    a, b = video.frame(10)[0].astype(np.int16), video.frame(60)[0].astype(np.int16)
    assert np.abs(a - b).mean() < 6
    saved = load_video_truth(truth.save(tmp_path / "v.json"))
    assert saved.idle_fraction == 0.75 and saved.active_windows == [(30.0, 50.0)]


def test_a_busy_video_has_no_idle_fields_and_bad_fractions_are_refused():
    assert "idle_fraction" not in SynthVideo(2, (320, 180), seconds=10, fps=2).truth().to_dict()
    with pytest.raises(InvalidInputError, match="idle fraction"):
        SynthVideo(2, idle_fraction=1.0)
