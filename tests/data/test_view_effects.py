"""Scripted view effects: what each does to the frame, its ground truth, and the CLI's spelling of it."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.data.synth.video import SynthVideo
from campusguard.data.synth.view_effects import ViewEffect, parse_view_effect
from campusguard.errors import InvalidInputError


def test_a_freeze_repeats_one_frame_noise_included_and_the_problems_are_in_the_truth() -> None:
    effects = [ViewEffect("freeze", 2, 4), ViewEffect("cover", 5, 7), ViewEffect("dusk", 1, 3, level=0.5)]
    video = SynthVideo(4, (160, 96), seconds=8, fps=5, effects=effects)
    frozen = [video.frame(i)[0] for i in range(10, 20)]
    assert all(np.array_equal(frozen[0], f) for f in frozen)
    assert not np.array_equal(video.frame(20)[0], video.frame(21)[0])  # noise moves again
    covered = video.frame(30)[0]
    assert covered[:, :100].std() < 8 and covered.mean() < 60
    truth = video.truth()
    health = [i for i in truth.incidents if i["kind"] == "camera_health"]
    assert health == [
        {"kind": "camera_health", "zone": "frozen", "start_s": 2, "end_s": 4, "track_ids": []},
        {"kind": "camera_health", "zone": "covered", "start_s": 5, "end_s": 7, "track_ids": []},
    ]
    assert video.frame(39)[0].mean() < 0.7 * SynthVideo(4, (160, 96), seconds=8, fps=5).frame(39)[0].mean()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cover:40-80", ViewEffect("cover", 40, 80)),
        ("defocus:110-170:sigma=5", ViewEffect("defocus", 110, 170, sigma=5)),
        ("turn:1-2:angle_deg=8,zoom=1.1", ViewEffect("turn", 1, 2, angle_deg=8, zoom=1.1)),
    ],
)
def test_the_cli_spelling_of_an_effect(text: str, expected: ViewEffect) -> None:
    assert parse_view_effect(text) == expected


@pytest.mark.parametrize("text", ["cover", "cover:40", "cover:x-y", "smoke:1-2", "cover:1-2:size=3", "cover:5-1"])
def test_a_bad_effect_is_one_line(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_view_effect(text)
