"""Motion gating: moving areas, regions, the gate's decisions, and boxes mapped back from crops."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.motion import (
    MotionDetector,
    MotionGate,
    RegionPlan,
    crop_regions,
    merge_region_detections,
    plan_regions,
)
from campusguard.ops.boxes import box_iou


def scene(square_x: int | None, brightness: int = 90) -> np.ndarray:
    """A 720p textured background with an optional 60x120 moving block at ``square_x``."""
    rng = np.random.default_rng(0)
    frame = np.clip(rng.normal(brightness, 6, (720, 1280, 3)), 0, 255).astype(np.uint8)
    if square_x is not None:
        frame[400:520, square_x : square_x + 60] = (30, 200, 240)
    return frame


def test_still_scene_has_no_motion_and_a_moving_block_is_found():
    motion = MotionDetector()
    assert len(motion(scene(None))) == 0  # first frame only starts the background
    assert len(motion(scene(None))) == 0
    boxes = motion(scene(600))
    assert len(boxes) == 1
    x1, y1, x2, y2 = boxes[0]
    assert x1 <= 600 and y1 <= 400 and x2 >= 660 and y2 >= 520  # the whole block, a little dilated
    assert box_iou(boxes, np.array([[600, 400, 660, 520]], np.float32))[0, 0] > 0.5


def test_sudden_lighting_change_reports_the_whole_frame_and_relearns():
    motion = MotionDetector()
    motion(scene(None))
    np.testing.assert_array_equal(motion(scene(None, brightness=200)), [[0, 0, 1280, 720]])
    assert len(motion(scene(None, brightness=200))) == 0


@pytest.mark.parametrize("kwargs", [{"threshold": 0}, {"alpha": 0}, {"width": 8}, {"blur": 4}])
def test_bad_motion_settings_are_refused(kwargs):
    with pytest.raises(InvalidInputError):
        MotionDetector(**kwargs)


def test_regions_cover_boxes_with_margin_inside_the_frame():
    boxes = np.array([[10, 10, 40, 90], [1200, 600, 1270, 715]], np.float32)
    regions = plan_regions(boxes, (1280, 720), min_side=320)
    assert regions is not None and len(regions) == 2
    for r in regions:
        assert r[2] - r[0] == r[3] - r[1] == 320
        assert r[0] >= 0 and r[1] >= 0 and r[2] <= 1280 and r[3] <= 720
    for b in boxes:
        assert any(r[0] <= b[0] and r[1] <= b[1] and r[2] >= b[2] and r[3] >= b[3] for r in regions)


def test_nearby_boxes_share_a_region_and_large_motion_means_the_whole_frame():
    near = np.array([[500, 300, 540, 380], [560, 310, 600, 390]], np.float32)
    regions = plan_regions(near, (1280, 720), min_side=320)
    assert regions is not None and len(regions) == 1
    assert plan_regions(np.array([[0, 0, 700, 700]], np.float32), (1280, 720), 320) is None
    many = np.array(
        [[x, 50, x + 40, 120] for x in range(0, 1280, 330)] + [[x, 500, x + 40, 600] for x in range(0, 1280, 330)],
        np.float32,
    )
    assert plan_regions(many, (1280, 720), 320) is None  # eight regions would cover most of the frame


def test_gate_keyframes_skips_still_frames_and_keeps_tracked_objects():
    gate = MotionGate(keyframe_s=5.0, min_side=320)
    assert gate.plan(scene(None), 0.0).reason == "keyframe"
    assert gate.plan(scene(None), 0.1).kind == "skip"
    moving = gate.plan(scene(600), 0.2)
    assert moving.kind == "regions" and moving.calls == 1
    still_but_tracked = gate.plan(scene(None), 0.3, tracked_xyxy=np.array([[100, 100, 150, 200]], np.float32))
    assert still_but_tracked.kind == "regions"
    r = still_but_tracked.regions[0]
    assert r[0] <= 100 and r[1] <= 100 and r[2] >= 150 and r[3] >= 200
    assert gate.plan(scene(None), 5.3).reason == "keyframe"


def test_crops_costing_the_network_more_than_max_region_cost_whole_frames_become_the_whole_frame():
    def letterbox_320(hw: tuple[int, int]) -> tuple[int, int]:  # the bundled model's aspect-matched input
        h, w = hw
        s = 320 / max(h, w)
        return (int(np.ceil(h * s / 32) * 32), int(np.ceil(w * s / 32) * 32))

    tracked = np.array([[100, 100, 150, 200], [900, 400, 950, 500]], np.float32)  # two far-apart people
    two_crops = MotionGate(keyframe_s=5.0, min_side=320, input_hw=letterbox_320, max_region_cost=2.0)
    two_crops.plan(scene(None), 0.0)
    plan = two_crops.plan(scene(None), 0.1, tracked_xyxy=tracked)
    # two 320x320 crops cost 2 x 102400 px against 192 x 320 = 61440 px for the whole 1280x720 frame
    assert two_crops.region_cost(np.array([[0, 0, 320, 320], [400, 0, 720, 320]]), (720, 1280)) == pytest.approx(
        3.333, abs=1e-3
    )
    assert (plan.kind, plan.reason) == ("full", "costly-regions")
    one_crop = MotionGate(keyframe_s=5.0, min_side=320, input_hw=letterbox_320, max_region_cost=2.0)
    one_crop.plan(scene(None), 0.0)
    assert one_crop.plan(scene(None), 0.1, tracked_xyxy=tracked[:1]).kind == "regions"  # 1.67 whole frames
    never = MotionGate(keyframe_s=5.0, min_side=320, input_hw=letterbox_320, max_region_cost=1.0)
    never.plan(scene(None), 0.0)
    assert never.plan(scene(None), 0.1, tracked_xyxy=tracked[:1]).reason == "costly-regions"
    assert never.plan(scene(None), 0.2).kind == "skip"  # still skips when nothing moves or is tracked
    with pytest.raises(InvalidInputError, match="max_region_cost"):
        MotionGate(max_region_cost=0)


def test_crops_and_merging_map_boxes_back_and_drop_duplicates():
    frame = scene(None)
    plan = RegionPlan("regions", "motion", np.array([[100, 100, 420, 420], [300, 100, 620, 420]], np.int64))
    crops = crop_regions(frame, plan)
    assert [c.shape for c in crops] == [(320, 320, 3), (320, 320, 3)]
    # the same person seen by both overlapping crops, and one only in the second
    first = Detections(np.array([[250, 50, 290, 150]], np.float32), np.array([0.9], np.float32), np.array([0]))
    second = Detections(
        np.array([[51, 51, 91, 151], [200, 200, 240, 300]], np.float32),
        np.array([0.8, 0.7], np.float32),
        np.array([0, 0]),
    )
    merged = merge_region_detections(plan, [first, second], iou_threshold=0.7)
    assert len(merged) == 2
    np.testing.assert_allclose(merged.xyxy[0], [350, 150, 390, 250])
    np.testing.assert_allclose(merged.xyxy[1], [500, 300, 540, 400])
    assert len(merge_region_detections(RegionPlan("skip", "still"), [], 0.7)) == 0
    with pytest.raises(InvalidInputError):
        merge_region_detections(plan, [first], 0.7)


class CountingMotion(MotionDetector):
    """The real motion detector, counting the frames it analyses."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self, frame_bgr: np.ndarray) -> np.ndarray:
        self.calls += 1
        return super().__call__(frame_bgr)


def test_a_busy_scene_goes_whole_without_the_gates_work_then_the_gate_looks_again():
    motion = CountingMotion()
    # crops of 800 px never fit a 720p frame: tracked objects always need the whole frame
    gate = MotionGate(motion, keyframe_s=5.0, min_side=800, busy_after=2, busy_hold_s=1.0)
    tracked = np.array([[600, 400, 660, 520]], np.float32)
    reasons = [gate.plan(scene(600), i / 10, tracked_xyxy=tracked).reason for i in range(3)]
    assert reasons == ["keyframe", "large-motion", "large-motion"]
    assert gate.bypass_frames == 10  # 1 s at the 10 fps of the timestamps
    analysed = motion.calls
    busy = [gate.plan(scene(600), (3 + i) / 10, tracked_xyxy=tracked) for i in range(10)]
    assert {(p.kind, p.reason) for p in busy} == {("full", "busy")}
    assert motion.calls == analysed and gate.bypass_frames == 0  # no motion analysis while busy
    # the scene went quiet: the gate restarts its background and skips again
    assert [gate.plan(scene(None), (13 + i) / 10).kind for i in range(3)] == ["skip", "skip", "skip"]
    assert motion.calls == analysed + 3


def test_a_busy_stretch_ends_at_once_when_nothing_is_detected_or_tracked_any_more():
    gate = MotionGate(keyframe_s=5.0, min_side=800, busy_after=2, busy_hold_s=5.0)
    tracked = np.array([[600, 400, 660, 520]], np.float32)
    for i in range(3):
        gate.plan(scene(600), i / 10, tracked_xyxy=tracked)
    assert gate.bypass_frames == 50
    assert gate.plan(scene(600), 0.3, tracked_xyxy=tracked).reason == "busy"
    # the person left: no boxes from the last frame, none tracked: skipped without waiting out the 5 s
    empty = np.zeros((0, 4), np.float32)
    assert [gate.plan(scene(None), (4 + i) / 10, tracked_xyxy=empty).kind for i in range(3)] == ["skip"] * 3
    assert gate.bypass_frames == 0


def test_a_gate_that_never_stops_looking():
    gate = MotionGate(keyframe_s=5.0, min_side=800, busy_after=0)
    tracked = np.array([[600, 400, 660, 520]], np.float32)
    reasons = {gate.plan(scene(600), i / 10, tracked_xyxy=tracked).reason for i in range(1, 30)}
    assert reasons == {"keyframe", "large-motion"} and gate.bypass_frames == 0
    with pytest.raises(InvalidInputError, match="busy_after"):
        MotionGate(busy_after=-1)
