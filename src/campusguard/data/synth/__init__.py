"""Deterministic synthetic campus data: still images (YOLO format) and videos with ground truth.

Public API:
    `COCO_NAMES`, `SYNTH_CLASS_IDS`: class names (COCO ids 0..79) and the ids the generator draws.
    `render_image(seed, index, imgsz)`: one image and its labels, in memory.
    `generate_dataset(out_dir, images=..., videos=..., seed=...)`: the whole data set on disk.
    `iter_video_frames(seed, ...)`, `video_truth(seed, ...)`, `generate_video(seed, out_dir, ...)`:
    scripted campus videos in memory or on disk, with per-frame tracks and incidents (`VideoTruth`).
    `Camera`: the shared camera model (same object pixel sizes in images and videos).
"""

from campusguard.data.synth.camera import Camera
from campusguard.data.synth.classes import COCO_NAMES, SYNTH_CLASS_IDS, SYNTH_NC, VEHICLE_CLASS_IDS
from campusguard.data.synth.dataset import DatasetSummary, generate_dataset, video_seed
from campusguard.data.synth.images import ImageParams, SynthImage, render_image
from campusguard.data.synth.incidents import Incident, RuleParams, compute_incidents
from campusguard.data.synth.render import RenderedObject
from campusguard.data.synth.video import (
    SynthVideo,
    VideoTruth,
    generate_video,
    iter_video_frames,
    load_video_truth,
    video_truth,
)

__all__ = [
    "COCO_NAMES",
    "SYNTH_CLASS_IDS",
    "SYNTH_NC",
    "VEHICLE_CLASS_IDS",
    "Camera",
    "ImageParams",
    "SynthImage",
    "RenderedObject",
    "render_image",
    "DatasetSummary",
    "generate_dataset",
    "video_seed",
    "SynthVideo",
    "VideoTruth",
    "generate_video",
    "iter_video_frames",
    "video_truth",
    "load_video_truth",
    "Incident",
    "RuleParams",
    "compute_incidents",
]
