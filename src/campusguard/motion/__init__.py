"""Motion gating: run the detector only where something moves, plus where tracked objects are.

`MotionDetector` finds moving areas on a downscaled grey frame against a running background;
`MotionGate` turns those areas and the boxes of tracked objects into square detection regions
(the whole frame every ``keyframe_s``); `crop_regions` and `merge_region_detections` run a
`Detector` on the crops and map the boxes back, with NMS across overlapping regions.
"""

from campusguard.motion.background import MotionDetector
from campusguard.motion.regions import (
    MotionGate,
    RegionPlan,
    crop_regions,
    merge_region_detections,
    plan_regions,
)

__all__ = ["MotionDetector", "MotionGate", "RegionPlan", "crop_regions", "merge_region_detections", "plan_regions"]
