"""Camera-health measures: normalised to the light, moved by what they are meant to see."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from campusguard.data.synth.video import SynthVideo
from campusguard.data.synth.view_effects import ViewEffect, apply_view_effects
from campusguard.errors import InvalidInputError
from campusguard.health import HealthMonitor, HealthThresholds, measure_view, similarity
from campusguard.health.measures import changed_fraction


@pytest.fixture(scope="module")
def scene() -> SynthVideo:
    return SynthVideo(3, (640, 360), seconds=120, fps=5, idle_fraction=0.5)


def test_dusk_keeps_contrast_sharpness_and_structure(scene: SynthVideo) -> None:
    day, _ = scene.frame(10)
    dusk = cv2.convertScaleAbs(day, alpha=0.45)
    a, b = measure_view(day), measure_view(dusk)
    assert b.brightness == pytest.approx(0.45 * a.brightness, rel=0.05)
    assert b.sharpness == pytest.approx(a.sharpness, rel=0.15)
    assert similarity(a.structure, b.structure) > 0.95
    textured = a.block_contrast > 0.02
    assert np.median(b.block_contrast[textured] / a.block_contrast[textured]) > 0.8


@pytest.mark.parametrize(
    ("effect", "measure"),
    [
        (ViewEffect("defocus", 0, 1, sigma=5), "sharpness"),
        (ViewEffect("turn", 0, 1), "similarity"),
        (ViewEffect("cover", 0, 1), "contrast"),
    ],
)
def test_each_problem_moves_its_own_measure(scene: SynthVideo, effect: ViewEffect, measure: str) -> None:
    clean, _ = scene.frame(10)
    hit = apply_view_effects(clean.copy(), [effect], 0.5, scene.seed, 10)
    a, b = measure_view(clean), measure_view(hit)
    if measure == "sharpness":
        assert b.sharpness < 0.3 * a.sharpness
    elif measure == "similarity":
        assert similarity(a.structure, b.structure) < 0.5
    else:
        assert float(np.mean(b.block_contrast < 0.3 * a.block_contrast)) > 0.8


def test_sensor_noise_always_changes_the_picture_and_a_repeated_frame_does_not(scene: SynthVideo) -> None:
    f1, f2 = scene.frame(20)[0], scene.frame(21)[0]  # an empty stretch: only the noise differs
    assert changed_fraction(measure_view(f1).detail, measure_view(f2).detail) > 0.2
    assert changed_fraction(measure_view(f1).detail, measure_view(f1.copy()).detail) == 0.0


def test_grey_and_bgr_frames_measure_alike_and_bad_pictures_are_one_line(scene: SynthVideo) -> None:
    frame, _ = scene.frame(5)
    grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
    assert measure_view(grey).sharpness == pytest.approx(measure_view(frame).sharpness)
    with pytest.raises(InvalidInputError, match="uint8 grey or BGR"):
        measure_view(frame.astype(np.float32))
    with pytest.raises(InvalidInputError, match="at least 16x16"):
        measure_view(np.zeros((8, 8), np.uint8))
    with pytest.raises(InvalidInputError, match="covered_area"):
        HealthThresholds(covered_area=0)


def test_the_monitor_learns_first_and_never_learns_a_problem(scene: SynthVideo) -> None:
    monitor = HealthMonitor(HealthThresholds(learn_s=10))
    cover = [ViewEffect("cover", 30, 200)]
    problems = []
    for i in range(0, 5 * 60, 5):  # one sample a second for a minute
        frame, _ = scene.frame(i)
        t = i / 5
        reading = monitor.observe(t, measure_view(apply_view_effects(frame, cover, t, scene.seed, i)))
        problems.append((t, reading.learning, reading.problems[:1]))
    assert all(learning for t, learning, _ in problems if t < 10)
    assert all(p == () for t, _, p in problems if t < 30)
    assert all(p == ("covered",) for t, _, p in problems if t >= 30)  # 30 s covered, and still not learned as usual
