"""Detection regions from motion and tracks, crops, and merging the crops' boxes back.

A region is a square of at least the model's input side around moving areas and tracked
objects, so a crop reaches the network at (or near) native resolution: a far-away person who is
a few pixels tall in a whole-frame letterbox keeps all of its pixels in a crop. Regions that
would cover most of the frame give way to one whole-frame call, which is then cheaper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.motion.background import MotionDetector
from campusguard.ops.postprocess import nms

__all__ = ["RegionPlan", "plan_regions", "MotionGate", "crop_regions", "merge_region_detections"]

PlanKind = Literal["full", "regions", "skip"]


@dataclass(frozen=True)
class RegionPlan:
    """What the detector runs on for one frame.

    Attributes:
        kind: ``"full"`` (the whole frame), ``"regions"`` (the crops in ``regions``) or ``"skip"``
            (nothing moves and nothing is tracked: no detector call).
        reason: why: ``"keyframe"``, ``"motion"``, ``"large-motion"``, ``"costly-regions"`` (the crops
            would cost the network more than ``max_region_cost`` whole frames), ``"busy"`` (the gate
            found the whole frame needed on its last frames and sends it for a while without
            looking, see `MotionGate`), ``"still"`` or ``"disabled"``.
        regions: ``(R, 4) int64`` xyxy crops in frame pixels (empty unless ``kind == "regions"``).
    """

    kind: PlanKind
    reason: str
    regions: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.int64))

    @property
    def calls(self) -> int:
        """Images this plan sends to the detector."""
        return 1 if self.kind == "full" else len(self.regions)


def _square_around(box: np.ndarray, side: int, frame_wh: tuple[int, int]) -> np.ndarray:
    """An integer ``side`` x ``side`` square centred on ``box``, shifted to lie inside the frame."""
    w, h = frame_wh
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    x1 = int(round(min(max(cx - side / 2, 0), w - side)))
    y1 = int(round(min(max(cy - side / 2, 0), h - side)))
    return np.array([x1, y1, x1 + side, y1 + side], np.int64)


def plan_regions(
    xyxy: np.ndarray,
    frame_wh: tuple[int, int],
    min_side: int,
    margin: float = 0.25,
    full_frame_fraction: float = 0.5,
) -> np.ndarray | None:
    """Square regions covering every box with a margin; ``None`` when the whole frame is cheaper.

    Args:
        xyxy: ``(N, 4)`` boxes (moving areas and tracked objects) in frame pixels.
        frame_wh: frame (width, height).
        min_side: smallest region side, normally the model's input side.
        margin: context kept around each box, as a fraction of its longer side, on every side.
        full_frame_fraction: when the regions' total area exceeds this fraction of the frame,
            one whole-frame call replaces them.

    Returns:
        ``(R, 4) int64`` regions, or ``None`` for "use the whole frame".
    """
    w, h = frame_wh
    limit = min(w, h)
    if len(xyxy) == 0:
        return np.zeros((0, 4), np.int64)
    if min_side >= limit:
        return None
    boxes = np.asarray(xyxy, np.float64)
    order = np.argsort(-((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])), kind="stable")
    regions: list[np.ndarray] = []
    for box in boxes[order]:
        longest = max(box[2] - box[0], box[3] - box[1])
        side = int(np.ceil(max(min_side, longest * (1 + 2 * margin))))
        if side > limit:
            return None
        need = np.array(
            [box[0] - margin * longest, box[1] - margin * longest, box[2] + margin * longest, box[3] + margin * longest]
        )
        if any(r[0] <= need[0] and r[1] <= need[1] and r[2] >= need[2] and r[3] >= need[3] for r in regions):
            continue
        merged = False
        for i, r in enumerate(regions):  # grow an overlapping region if the union still fits
            ux1, uy1 = min(r[0], need[0]), min(r[1], need[1])
            ux2, uy2 = max(r[2], need[2]), max(r[3], need[3])
            overlaps = not (need[2] < r[0] or need[0] > r[2] or need[3] < r[1] or need[1] > r[3])
            union_side = int(np.ceil(max(ux2 - ux1, uy2 - uy1)))
            if overlaps and union_side <= max(min_side, int(1.5 * (r[2] - r[0]))) and union_side <= limit:
                regions[i] = _square_around(np.array([ux1, uy1, ux2, uy2]), max(union_side, int(r[2] - r[0])), frame_wh)
                merged = True
                break
        if not merged:
            regions.append(_square_around(box, side, frame_wh))
    out = np.stack(regions)
    area = float(((out[:, 2] - out[:, 0]) * (out[:, 3] - out[:, 1])).sum())
    if area > full_frame_fraction * w * h:
        return None
    return out


class MotionGate:
    """Per-camera decision of what the detector sees: whole frame, regions, or nothing.

    Args:
        motion: the camera's `MotionDetector` (one per camera).
        keyframe_s: the whole frame is detected at least this often (seconds of frame time).
        min_side: smallest region side (the model's input side).
        margin: context around each moving or tracked box (fraction of its longer side).
        full_frame_fraction: regions covering more than this share of the frame become a whole-frame call.
        input_hw: the detector's network input (h, w) for an image of (h, w) pixels; with it, regions
            whose network input pixels add up to more than ``max_region_cost`` times the whole
            frame's become a whole-frame call (a 320x320 crop costs 1.67 whole 16:9 frames at 192x320).
        max_region_cost: see ``input_hw``; crops buy small-object recall (native resolution), and
            this caps what they may cost (1.0: never more than one whole frame).
        busy_after: after this many frames in a row that needed the whole frame anyway (large
            motion, costly crops, or objects tracked where no crop fits), the gate stops its own
            work (motion analysis, planning) and sends whole frames for ``busy_hold_s``; then it
            restarts its background and plans again (at once when nothing is detected or tracked
            any more: a scene that empties is skipped without waiting). 0: never.
        busy_hold_s: see ``busy_after`` (seconds of frame time). A busy scene then costs the gate
            nothing, and its frames batch like an ungated camera's (`bypass_frames`).
    """

    def __init__(
        self,
        motion: MotionDetector | None = None,
        *,
        keyframe_s: float = 5.0,
        min_side: int = 320,
        margin: float = 0.25,
        full_frame_fraction: float = 0.5,
        input_hw: Callable[[tuple[int, int]], tuple[int, int]] | None = None,
        max_region_cost: float = 1.0,
        busy_after: int = 2,
        busy_hold_s: float = 5.0,
    ) -> None:
        if keyframe_s <= 0:
            raise InvalidInputError(f"keyframe_s must be positive, got {keyframe_s}")
        if max_region_cost <= 0:
            raise InvalidInputError(f"max_region_cost must be positive, got {max_region_cost}")
        if busy_after < 0 or busy_hold_s < 0:
            raise InvalidInputError(f"busy_after and busy_hold_s must not be negative, got {busy_after}, {busy_hold_s}")
        self.busy_after, self.busy_hold_s = busy_after, busy_hold_s
        self.input_hw, self.max_region_cost = input_hw, max_region_cost
        self.motion = motion or MotionDetector()
        self.keyframe_s, self.min_side = keyframe_s, min_side
        self.margin, self.full_frame_fraction = margin, full_frame_fraction
        self._last_keyframe: float | None = None
        self._last_ts: float | None = None
        self._frame_s = 0.1  # frame interval, from the timestamps seen
        self._whole_run = 0  # frames in a row that needed the whole frame
        self._bypass_left = 0

    @property
    def bypass_frames(self) -> int:
        """The next frames that go whole without the gate's work (they need no earlier frame's boxes)."""
        return self._bypass_left

    def reset(self) -> None:
        """Start over (a reconnect or resolution change): the next frame is a keyframe."""
        self.motion.reset()
        self._last_keyframe = None
        self._last_ts, self._whole_run, self._bypass_left = None, 0, 0

    def _tick(self, timestamp_s: float) -> None:
        if self._last_ts is not None and timestamp_s > self._last_ts:
            self._frame_s = timestamp_s - self._last_ts
        self._last_ts = timestamp_s

    def _whole(self, reason: str) -> RegionPlan:
        """A whole-frame plan the gate had to work out; enough of them in a row start a busy stretch."""
        self._whole_run += 1
        if self.busy_after and self._whole_run >= self.busy_after:
            self._whole_run = 0
            self._bypass_left = max(1, int(round(self.busy_hold_s / max(self._frame_s, 1e-3))))
        return RegionPlan("full", reason)

    def plan(self, frame_bgr: np.ndarray, timestamp_s: float, tracked_xyxy: np.ndarray | None = None) -> RegionPlan:
        """Plan one frame; ``tracked_xyxy`` are the boxes of objects the tracker still follows."""
        self._tick(timestamp_s)
        if self._bypass_left > 0 and tracked_xyxy is not None and len(tracked_xyxy) == 0:
            self._bypass_left = 0  # the scene emptied (nothing detected or tracked): look again now
            self.motion.reset()
        if self._bypass_left > 0:  # busy: the whole frame, no motion analysis
            self._bypass_left -= 1
            self._last_keyframe = timestamp_s
            if self._bypass_left == 0:
                self.motion.reset()  # its background is stale: the next frame starts a new one
            return RegionPlan("full", "busy")
        moving = self.motion(frame_bgr)
        if (
            self._last_keyframe is None
            or timestamp_s - self._last_keyframe >= self.keyframe_s
            or timestamp_s < self._last_keyframe
        ):
            self._last_keyframe = timestamp_s
            return RegionPlan("full", "keyframe")
        tracked = np.zeros((0, 4), np.float32) if tracked_xyxy is None else np.asarray(tracked_xyxy, np.float32)
        boxes = np.concatenate([moving, tracked.reshape(-1, 4)]) if len(tracked) else moving
        if len(boxes) == 0:
            self._whole_run = 0
            return RegionPlan("skip", "still")
        h, w = frame_bgr.shape[:2]
        regions = plan_regions(boxes, (w, h), self.min_side, self.margin, self.full_frame_fraction)
        if regions is None:
            return self._whole("large-motion")
        if self.input_hw is not None and self.region_cost(regions, (h, w)) > self.max_region_cost:
            return self._whole("costly-regions")
        self._whole_run = 0
        return RegionPlan("regions", "motion", regions)

    def region_cost(self, regions: np.ndarray, frame_hw: tuple[int, int]) -> float:
        """The crops' network input pixels over the whole frame's (needs ``input_hw``)."""
        assert self.input_hw is not None
        whole = float(np.prod(self.input_hw(frame_hw)))
        crops = sum(float(np.prod(self.input_hw((int(y2 - y1), int(x2 - x1))))) for x1, y1, x2, y2 in regions)
        return crops / whole


def crop_regions(frame_bgr: np.ndarray, plan: RegionPlan) -> list[np.ndarray]:
    """The images to detect on for ``plan``: the frame itself, its region crops (views), or none."""
    if plan.kind == "full":
        return [frame_bgr]
    return [frame_bgr[y1:y2, x1:x2] for x1, y1, x2, y2 in plan.regions]


def _cut_by_inner_edge(xyxy: np.ndarray, crop_wh: tuple[int, int], inner: np.ndarray, edge_px: float) -> np.ndarray:
    """Which of a crop's boxes touch one of its sides that lies inside the frame (the object was cut)."""
    w, h = crop_wh
    touches = np.stack(
        [xyxy[:, 0] <= edge_px, xyxy[:, 1] <= edge_px, xyxy[:, 2] >= w - edge_px, xyxy[:, 3] >= h - edge_px], axis=1
    )
    return (touches & inner).any(axis=1)


def merge_region_detections(
    plan: RegionPlan,
    per_image: list[Detections],
    iou_threshold: float,
    frame_wh: tuple[int, int] | None = None,
    edge_px: float = 1.0,
) -> Detections:
    """Map each crop's boxes back to the frame and drop duplicates from overlapping regions (class-aware NMS).

    With ``frame_wh``, a box that touches a crop side lying inside the frame (within ``edge_px``)
    is dropped: it is a part of an object the crop cut, and regions are planned so that every
    known object lies wholly inside one of them, with a margin.
    """
    if plan.kind == "full":
        return per_image[0]
    if plan.kind == "skip" or not per_image:
        return Detections.empty()
    if len(per_image) != len(plan.regions):
        raise InvalidInputError(f"{len(per_image)} detection sets for {len(plan.regions)} regions")
    shifted = []
    for (x1, y1, x2, y2), dets in zip(plan.regions, per_image, strict=True):
        if len(dets) and frame_wh is not None:
            inner = np.array([x1 > 0, y1 > 0, x2 < frame_wh[0], y2 < frame_wh[1]])
            dets = dets[~_cut_by_inner_edge(dets.xyxy, (int(x2 - x1), int(y2 - y1)), inner, edge_px)]
        if len(dets):
            offset = np.array([x1, y1, x1, y1], np.float32)
            shifted.append(Detections(dets.xyxy + offset, dets.confidence, dets.class_id, data=dict(dets.data)))
    if not shifted:
        return Detections.empty()
    merged = Detections.merge(shifted)
    if len(shifted) == 1:
        return merged
    return merged[nms(merged.xyxy, merged.confidence, merged.class_id, iou_threshold)]
