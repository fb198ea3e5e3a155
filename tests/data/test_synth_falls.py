"""Synthetic falls (``falls=True``): truth flags, box shapes, fall incidents, and the fall rule
reproducing them from the truth boxes (exact with the truth's ids; F1 >= 0.9 through ByteTrack
with missed detections and jitter)."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from campusguard.app.eval_events import evaluate_events, incidents_from_events, load_truth
from campusguard.app.rules import FallRule, RuleEngine, whole_frame_zone
from campusguard.data.synth.video import SynthVideo, VideoTruth
from campusguard.detections import Detections
from campusguard.tracking import ByteTrackTracker

SECONDS = 25.0
SEEDS = (0, 1, 2, 3)


@cache
def _truth(seed: int, falls: bool = True) -> VideoTruth:
    return SynthVideo(seed, seconds=SECONDS, falls=falls).truth()


@pytest.mark.parametrize("seed", SEEDS)
def test_every_video_with_falls_has_a_fall_and_its_truth_is_consistent(seed):
    truth = _truth(seed)
    falls = [i for i in truth.incidents if i["kind"] == "fall"]
    assert falls and all(i["zone"] == "frame" and len(i["track_ids"]) == 1 for i in falls)
    assert truth.params["fall"]["min_seconds"] == 3.0
    for inc in falls:
        (tid,) = inc["track_ids"]
        seen = [(f["t"], o) for f in truth.frames for o in f["objects"] if o["track_id"] == tid]
        during = [o for t, o in seen if inc["start_s"] - 1e-6 <= t <= inc["end_s"] + 1e-6]
        assert during and all(o.get("fallen") for o in during)  # only a person flagged down raises it
        for o in during:
            x1, y1, x2, y2 = o["xyxy"]
            assert x2 - x1 >= 1.2 * (y2 - y1)  # lying: much wider than tall
        before = [o for t, o in seen if t < inc["start_s"] and not o.get("fallen")]
        assert any(o["xyxy"][3] - o["xyxy"][1] >= 1.5 * (o["xyxy"][2] - o["xyxy"][0]) for o in before)


def test_without_falls_the_videos_are_unchanged():
    plain = _truth(2, falls=False)
    assert "fall" not in plain.params
    assert not any("fallen" in o for f in plain.frames for o in f["objects"])
    assert {i["kind"] for i in plain.incidents} <= {"crowd", "fire_lane", "intrusion", "loitering", "line_crossing"}


def _fall_events(truth: VideoTruth, noisy: bool, rng: np.random.Generator) -> list:
    p = truth.params["fall"]
    rule = FallRule(
        name="fall",
        camera_id=truth.camera_id,
        zone=whole_frame_zone(tuple(truth.resolution_wh)),
        min_seconds=p["min_seconds"],
        down_aspect=p["down_aspect"],
        upright_aspect=p["upright_aspect"],
        max_movement=p["stationary_frac"],
        stationary_window_s=p["stationary_window_s"],
    )
    engine = RuleEngine(truth.camera_id, [rule])
    tracker = ByteTrackTracker(frame_rate=truth.fps) if noisy else None
    events = []
    for frame in truth.frames:
        objs = [o for o in frame["objects"] if not noisy or rng.random() > 0.05]
        xyxy = np.array([o["xyxy"] for o in objs], np.float32).reshape(-1, 4)
        if noisy:
            xyxy += rng.normal(0, 1.0, xyxy.shape).astype(np.float32)
        dets = Detections(
            xyxy,
            np.full(len(objs), 0.9),
            [o["class_id"] for o in objs],
            None if noisy else [o["track_id"] for o in objs],
        )
        if tracker is not None:
            dets = tracker.update(dets, timestamp_s=frame["t"])
        events += engine.update(frame["t"], dets, frame["frame"])
    return events + engine.close(truth.frames[-1]["t"] + 1.0 / truth.fps)


@pytest.mark.parametrize("noisy", [False, True])
def test_fall_rule_reproduces_the_synthetic_falls(tmp_path, noisy):
    rng = np.random.default_rng(0)
    tp = fp = fn = 0
    for seed in SEEDS:
        truth = _truth(seed)
        path = truth.save(tmp_path / f"seed{seed}.json")
        events = _fall_events(truth, noisy, rng)
        assert {e.details["signal"] for e in events} <= {"track-shape"}
        falls = [i for i in load_truth(path) if i.kind == "fall"]
        score = evaluate_events(falls, incidents_from_events(events)).overall
        tp, fp, fn = tp + score.tp, fp + score.fp, fn + score.fn
        if not noisy:
            assert (score.fp, score.fn) == (0, 0), (seed, score)
            starts = sorted(round(e.start_s, 1) for e in events if e.phase == "end")
            assert starts == sorted(round(i.start_s, 1) for i in falls)
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert f1 >= 0.9, (tp, fp, fn)
