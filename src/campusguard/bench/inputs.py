"""Frames fed to the benchmark, and calibration images for INT8.

Frames come, in order of preference, from an explicit image folder, the images of the
``--data`` set, Ultralytics' two sample photos (found on disk, without importing Ultralytics),
or deterministic synthetic frames, so a benchmark runs on any machine with no download.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from campusguard.errors import InvalidInputError
from campusguard.io.images import IMAGE_SUFFIXES

__all__ = [
    "list_images",
    "ultralytics_sample_images",
    "synthetic_frame",
    "load_frames",
    "stream_frames",
    "calibration_images",
]

# resolutions (height, width) of the simulated camera sources of the multi-stream scenario
STREAM_RESOLUTIONS: tuple[tuple[int, int], ...] = ((720, 1280), (1080, 1920), (480, 640), (960, 1280))


def list_images(folder: str | Path) -> list[Path]:
    """Image files directly in ``folder``, sorted; `InvalidInputError` when it is missing or has none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InvalidInputError(f"{folder}: image folder not found")
    images = sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not images:
        raise InvalidInputError(f"{folder}: no images ({', '.join(IMAGE_SUFFIXES)}) in the folder")
    return images


def ultralytics_sample_images() -> list[Path]:
    """Ultralytics' bundled sample photos (bus.jpg, zidane.jpg) if the package is installed."""
    spec = importlib.util.find_spec("ultralytics")
    if spec is None or spec.origin is None:
        return []
    assets = Path(spec.origin).parent / "assets"
    return sorted(assets.glob("*.jpg")) if assets.is_dir() else []


def synthetic_frame(height: int, width: int, seed: int) -> np.ndarray:
    """A deterministic ``(height, width, 3) uint8`` BGR frame: smooth gradients plus rectangles and noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    base = np.stack(
        [
            128 + 100 * np.sin(xx / (17 + seed % 7)),
            128 + 100 * np.cos(yy / (23 + seed % 5)),
            (xx + yy) % 256,
        ],
        axis=-1,
    )
    for _ in range(12):
        y0, x0 = int(rng.integers(0, height - 8)), int(rng.integers(0, width - 8))
        h, w = int(rng.integers(8, height // 3 + 9)), int(rng.integers(8, width // 3 + 9))
        base[y0 : y0 + h, x0 : x0 + w] = rng.integers(0, 256, 3)
    base += rng.normal(0, 8, base.shape)
    return np.clip(base, 0, 255).astype(np.uint8)


def load_frames(images: Sequence[Path] | None = None, count: int = 8) -> tuple[list[np.ndarray], str]:
    """Up to ``count`` BGR frames and a phrase naming where they came from.

    Args:
        images: image files to use; ``None``: Ultralytics' samples, else synthetic 720x1280 frames.
        count: number of frames for synthetic input (real images are used as given, at most ``count``).
    """
    from campusguard.io.images import read_image

    paths = list(images) if images else ultralytics_sample_images()
    if paths:
        frames = [read_image(p) for p in paths[:count]]
        return frames, f"{len(frames)} image(s) from {paths[0].parent}"
    return [synthetic_frame(720, 1280, seed) for seed in range(count)], f"{count} synthetic 720x1280 frames"


def stream_frames(frames: Sequence[np.ndarray], streams: int) -> list[list[np.ndarray]]:
    """Frames of ``streams`` simulated camera sources, each source at its own resolution.

    Source ``i`` shows the pool's frames resized to ``STREAM_RESOLUTIONS[i % 4]``, starting at
    frame ``i``, so concurrent sources differ in content and size as real cameras do.
    """
    import cv2

    if streams < 1:
        raise InvalidInputError(f"streams={streams} must be at least 1")
    if not frames:
        raise InvalidInputError("multi-stream needs at least one frame")
    out = []
    for i in range(streams):
        h, w = STREAM_RESOLUTIONS[i % len(STREAM_RESOLUTIONS)]
        order = [frames[(i + k) % len(frames)] for k in range(len(frames))]
        out.append([cv2.resize(f, (w, h), interpolation=cv2.INTER_LINEAR) for f in order])
    return out


def calibration_images(
    out_dir: Path,
    count: int,
    sources: Sequence[Path] | None = None,
    seed: int = 0,
) -> list[Path]:
    """``count`` calibration images for INT8 quantisation, written under ``out_dir`` if needed.

    With ``sources`` (a data set or ``--calib`` folder) the first ``count`` are returned as they
    are (repeated when there are fewer). Without, crops, flips and brightness changes of
    Ultralytics' samples (or synthetic frames) are written once and reused: fine for SPEED of
    random-weight models, not for accuracy of trained ones.
    """
    import cv2

    from campusguard.io.images import read_image

    if count < 1:
        raise InvalidInputError(f"calibration count {count} must be at least 1")
    if sources:
        src = list(sources)
        return [src[i % len(src)] for i in range(count)]
    base = ultralytics_sample_images()
    tag = hashlib.sha1(("|".join(map(str, base)) + f"|{count}|{seed}").encode()).hexdigest()[:10]
    folder = Path(out_dir) / f"calib-{tag}"
    paths = [folder / f"calib_{i:04d}.jpg" for i in range(count)]
    if all(p.is_file() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    frames = [read_image(p) for p in base] if base else [synthetic_frame(720, 1280, s) for s in range(4)]
    rng = np.random.default_rng(seed)
    for i, path in enumerate(paths):
        img = frames[i % len(frames)]
        h, w = img.shape[:2]
        ch, cw = int(h * rng.uniform(0.5, 1.0)), int(w * rng.uniform(0.5, 1.0))
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = img[y0 : y0 + ch, x0 : x0 + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        crop = np.clip(crop.astype(np.float32) * rng.uniform(0.6, 1.4), 0, 255).astype(np.uint8)
        cv2.imwrite(str(path), crop)
    return paths
