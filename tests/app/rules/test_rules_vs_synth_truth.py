"""The rules reproduce the synthetic videos' ground-truth incidents (`campusguard.data.synth`).

The truth's per-frame boxes stand in for a perfect detector: with the truth's track ids the
rules must find exactly the scripted incidents; through ByteTrack with 5% missed detections
and box jitter, still F1 >= 0.9. Same rule semantics on both sides is what this checks.
"""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.app.eval_events import Incident, evaluate_events, incidents_from_events
from campusguard.app.rules import CrowdRule, FireLaneRule, IntrusionRule, LineCrossingRule, LoiteringRule, RuleEngine
from campusguard.detections import Detections
from campusguard.tracking import ByteTrackTracker
from campusguard.zones import LineZone, PolygonZone

synth_video = pytest.importorskip("campusguard.data.synth.video")


def _engine(truth, camera_id: str) -> RuleEngine:
    res = tuple(truth.resolution_wh)
    zones = {k: PolygonZone(v, k, resolution_wh=res, units="pixels") for k, v in truth.zones.items()}
    fence = truth.lines["fence_line"]
    line = LineZone(*fence["points"], "fence_line", in_side=fence["in_side"], resolution_wh=res, units="pixels")
    p = truth.params
    cam = camera_id
    return RuleEngine(
        cam,
        [
            IntrusionRule(
                name="intrusion", camera_id=cam, zone=zones["restricted"], min_seconds=p["intrusion"]["min_seconds"]
            ),
            CrowdRule(
                name="crowd",
                camera_id=cam,
                zone=zones["danger_area"],
                min_count=p["crowd"]["min_count"],
                min_seconds=p["crowd"]["min_seconds"],
            ),
            FireLaneRule(
                name="fire lane",
                camera_id=cam,
                zone=zones["fire_lane"],
                min_seconds=p["fire_lane"]["min_seconds"],
                max_movement=p["fire_lane"]["stationary_frac"],
                stationary_window_s=p["fire_lane"]["stationary_window_s"],
            ),
            LoiteringRule(
                name="loitering",
                camera_id=cam,
                zone=zones["loiter_area"],
                min_seconds=p["loitering"]["min_seconds"],
                class_ids=None,
            ),
            LineCrossingRule(name="fence", camera_id=cam, line=line, direction="in", class_ids=None),
        ],
    )


def _run(truth, camera_id: str, noisy: bool, rng: np.random.Generator) -> list:
    engine = _engine(truth, camera_id)
    tracker = ByteTrackTracker(frame_rate=truth.fps) if noisy else None
    events = []
    for frame in truth.frames:
        objs = [o for o in frame["objects"] if not noisy or rng.random() > 0.05]
        xyxy = np.array([o["xyxy"] for o in objs], np.float32).reshape(-1, 4)
        if noisy:
            xyxy += rng.normal(0, 1.0, xyxy.shape).astype(np.float32)
        conf = rng.uniform(0.6, 0.95, len(objs)) if noisy else np.full(len(objs), 0.9)
        ids = None if noisy else [o["track_id"] for o in objs]
        dets = Detections(xyxy, conf, [o["class_id"] for o in objs], ids)
        if tracker is not None:
            dets = tracker.update(dets, timestamp_s=frame["t"])
        events += engine.update(frame["t"], dets, frame["frame"])
    events += engine.close(truth.frames[-1]["t"] + 1.0 / truth.fps)
    return events


@pytest.mark.parametrize("seed", [3, 8])
def test_rules_reproduce_synth_truth(seed):
    truth = synth_video.video_truth(seed, seconds=40.0)
    cam = f"seed{seed}"
    gt = [Incident(cam, i["kind"], i["zone"], i["start_s"], i["end_s"], tuple(i["track_ids"])) for i in truth.incidents]
    assert len(gt) >= 4  # the scenario really scripts incidents

    exact = evaluate_events(gt, incidents_from_events(_run(truth, cam, False, np.random.default_rng(seed))))
    assert (exact.overall.fp, exact.overall.fn) == (0, 0)
    assert exact.overall.start_error_median_s <= 0.1

    tracked = evaluate_events(gt, incidents_from_events(_run(truth, cam, True, np.random.default_rng(seed))))
    assert tracked.overall.f1 >= 0.9
