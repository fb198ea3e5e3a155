"""Write the synthetic data set to disk: YOLO image splits, ``data.yaml`` and videos with truth.

Layout of ``out_dir``::

    data.yaml                 path (absolute), train, val, nc: 8, names: COCO ids 0..7
    images/{train,val}/NNNNNN.jpg
    labels/{train,val}/NNNNNN.txt
    videos/video_NNN.mp4 + video_NNN.json   (see `campusguard.data.synth.video`)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2

from campusguard.data.synth.classes import COCO_NAMES, SYNTH_NC
from campusguard.data.synth.images import ImageParams, encode_jpeg, render_image, yolo_label_text
from campusguard.data.synth.view_effects import ViewEffect
from campusguard.errors import InvalidInputError
from campusguard.models.info import check_imgsz

__all__ = ["DatasetSummary", "generate_dataset", "validate_generate_args", "video_seed"]

Progress = Callable[[str, int], None]
"""Called as ``progress(stage, n_done)`` with stage ``"images"`` or ``"videos"``."""


@dataclass(frozen=True)
class DatasetSummary:
    """What `generate_dataset` wrote."""

    out_dir: Path
    data_yaml: Path
    n_train: int
    n_val: int
    n_objects: int
    videos: tuple[Path, ...]


def video_seed(seed: int, index: int) -> int:
    """Seed of video ``index`` in the data set made with ``seed`` (recorded in its truth JSON)."""
    return seed * 1000 + index


def validate_generate_args(
    images: int,
    videos: int,
    seed: int,
    imgsz: int,
    video_size_wh: tuple[int, int],
    video_seconds: float,
    fps: int,
    val_fraction: float,
) -> None:
    """Raise `InvalidInputError` naming the first bad argument."""
    check_imgsz(imgsz, name="--imgsz", min_size=64, max_size=4096)
    checks = [
        (images >= 0, f"--images must be >= 0, got {images}"),
        (videos >= 0, f"--videos must be >= 0, got {videos}"),
        (seed >= 0, f"--seed must be >= 0, got {seed}"),
        (
            all(160 <= v <= 4096 for v in video_size_wh) and all(v % 2 == 0 for v in video_size_wh),
            f"--video-size must be even WIDTHxHEIGHT in 160..4096, got {video_size_wh[0]}x{video_size_wh[1]}",
        ),
        (
            video_size_wh[0] >= video_size_wh[1],
            f"--video-size must be landscape (width >= height), got {video_size_wh[0]}x{video_size_wh[1]}",
        ),
        (1.0 <= video_seconds <= 3600.0, f"--video-seconds must be in 1..3600, got {video_seconds}"),
        (1 <= fps <= 120, f"--fps must be in 1..120, got {fps}"),
        (0.0 <= val_fraction < 1.0, f"--val-fraction must be in [0, 1), got {val_fraction}"),
        (
            images == 0 or val_fraction == 0.0 or round(images * val_fraction) >= 1,
            f"--val-fraction {val_fraction} of {images} images leaves the val split empty",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise InvalidInputError(message)


def write_data_yaml(out_dir: Path) -> Path:
    """Write ``data.yaml`` (absolute ``path``, COCO names of ids 0..7) and return its path."""
    names = "\n".join(f"  {i}: {COCO_NAMES[i]}" for i in range(SYNTH_NC))
    text = (
        f"# CampusGuard synthetic campus data set (campusguard synth)\npath: {out_dir.resolve()}\n"
        f"train: images/train\nval: images/val\nnc: {SYNTH_NC}\nnames:\n{names}\n"
    )
    path = out_dir / "data.yaml"
    path.write_text(text)
    return path


def generate_dataset(
    out_dir: str | Path,
    *,
    images: int,
    videos: int = 0,
    seed: int = 0,
    imgsz: int = 640,
    video_size_wh: tuple[int, int] = (640, 360),
    video_seconds: float = 40.0,
    fps: int = 10,
    val_fraction: float = 0.2,
    params: ImageParams | None = None,
    progress: Progress | None = None,
    view_effects: Sequence[ViewEffect] = (),
) -> DatasetSummary:
    """Render and write the data set; same arguments give the same bytes.

    The last ``round(images * val_fraction)`` images form the val split. Video ``i`` uses seed
    `video_seed(seed, i)`; ``view_effects`` happen to every video's view (camera-health problems
    and nuisances, in the truth as ``camera_health`` incidents).
    """
    validate_generate_args(images, videos, seed, imgsz, video_size_wh, video_seconds, fps, val_fraction)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InvalidInputError(f"--out {out} exists and is not a directory")
    cv2.setNumThreads(1)
    n_val = round(images * val_fraction)
    n_train = images - n_val
    for sub in ("images/train", "images/val", "labels/train", "labels/val"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    n_objects = 0
    for i in range(images):
        split = "train" if i < n_train else "val"
        im = render_image(seed, i, imgsz, params)
        (out / "images" / split / f"{i:06d}.jpg").write_bytes(encode_jpeg(im.image, im.jpeg_quality))
        (out / "labels" / split / f"{i:06d}.txt").write_text(yolo_label_text(im.objects, imgsz, imgsz))
        n_objects += len(im.objects)
        if progress is not None:
            progress("images", i + 1)
    data_yaml = write_data_yaml(out)
    video_paths: list[Path] = []
    if videos:
        from campusguard.data.synth.video import generate_video

        for v in range(videos):
            truth = generate_video(
                video_seed(seed, v),
                out / "videos",
                size_wh=video_size_wh,
                seconds=video_seconds,
                fps=fps,
                name=f"video_{v:03d}",
                effects=view_effects,
            )
            video_paths.append(out / "videos" / truth.video)
            if progress is not None:
                progress("videos", v + 1)
    return DatasetSummary(out, data_yaml, n_train, n_val, n_objects, tuple(video_paths))
