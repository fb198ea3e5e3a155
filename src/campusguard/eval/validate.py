"""Validation: run CampusGuard's own `Detector` over a YOLO data set split and score it.

This is what ``campusguard val`` does; any backend, device and precision the `Detector`
supports can be scored the same way, which is what makes cross-backend accuracy comparable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from campusguard.detections import Detections
from campusguard.errors import InvalidInputError
from campusguard.eval.dataset import YoloDataset, load_yolo_dataset
from campusguard.eval.metrics import DetectionMetrics, evaluate_detections

__all__ = ["ValidationResult", "predict_dataset", "validate_model"]


@dataclass(frozen=True)
class ValidationResult:
    """Metrics plus what produced them."""

    metrics: DetectionMetrics
    dataset: YoloDataset
    model: str
    provider: str
    imgsz: tuple[int, int]
    seconds: float


class BatchPredictor(Protocol):
    """What `predict_dataset` needs of a detector: `campusguard.detector.Detector` is one."""

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]: ...


def _batches(items: Sequence[Path], size: int) -> Iterator[Sequence[Path]]:
    for k in range(0, len(items), size):
        yield items[k : k + size]


def predict_dataset(
    detector: BatchPredictor,
    image_paths: Sequence[Path],
    *,
    batch: int = 1,
    progress: Callable[[int], None] | None = None,
) -> list[Detections]:
    """Run ``detector.predict_batch`` over image files, ``batch`` images per call.

    Args:
        detector: a `campusguard.detector.Detector` (anything with ``predict_batch``).
        image_paths: images to read (BGR, OpenCV).
        batch: images per call.
        progress: called with the number of images done after each call.

    Returns:
        one `Detections` per image, boxes in that image's pixels.
    """
    from campusguard.io.images import read_image

    if batch < 1:
        raise InvalidInputError(f"batch={batch} must be at least 1")
    out: list[Detections] = []
    for chunk in _batches(image_paths, batch):
        out += detector.predict_batch([read_image(p) for p in chunk])
        if progress is not None:
            progress(len(out))
    return out


def validate_model(
    model: str | os.PathLike[str] | None,
    data: str | os.PathLike[str],
    *,
    split: str = "val",
    imgsz: int | tuple[int, int] | None = None,
    conf: float = 0.001,
    iou: float = 0.7,
    max_det: int = 300,
    device: str = "auto",
    backend: str | None = None,
    batch: int = 1,
    half: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> ValidationResult:
    """Score a model on a data set split through CampusGuard's own pipeline.

    Defaults follow Ultralytics' ``val``: ``conf=0.001``, ``iou=0.7``, ``max_det=300``.

    Args:
        model: anything `Detector` accepts (``None``: the bundled default model).
        data: ``data.yaml`` of a YOLO-format data set.
        split: split to score.
        imgsz: network input size (int or ``(h, w)``); frames are letterboxed to it
            (rectangular, stride-aligned, for dynamic-shape models). ``None``: the size the
            model was trained at (Ultralytics ``imgsz`` metadata), else 640.
        conf: confidence threshold before NMS (0..1).
        iou: NMS IoU threshold (0..1).
        max_det: detections kept per image.
        device, backend, half: passed to `Detector`.
        batch: images per backend call.
        progress: called with ``(done, total)`` images.

    Raises:
        InvalidInputError: a bad data set (before the model is loaded) or thresholds;
        the `Detector`'s errors for the model and device.
    """
    import time

    from campusguard.detector import Detector

    if batch < 1:
        raise InvalidInputError(f"batch={batch} must be at least 1")
    ds = load_yolo_dataset(data, split)
    detector = Detector(
        None if model is None else str(model),
        device=device,
        imgsz=imgsz,
        conf=conf,
        iou=iou,
        max_det=max_det,
        backend=backend,
        half=half,
        dynamic=True,
    )
    missing = sorted(set(ds.names) - set(detector.names))
    if missing or any(detector.names[k] != v for k, v in ds.names.items()):
        raise InvalidInputError(
            f"model classes {detector.names} do not match the data set classes {ds.names} of {ds.data_yaml}"
        )
    t0 = time.perf_counter()
    preds = predict_dataset(
        detector, ds.image_paths, batch=batch, progress=None if progress is None else (lambda n: progress(n, len(ds)))
    )
    seconds = time.perf_counter() - t0
    keep = np.asarray(sorted(ds.names), np.int64)  # a COCO model also predicts classes the data set lacks
    preds = [p[np.isin(p.class_id, keep)] for p in preds]
    metrics = evaluate_detections(preds, ds.truths, ds.names, max_det=max_det)
    return ValidationResult(
        metrics=metrics,
        dataset=ds,
        model=str(detector.info.source),
        provider=detector.provider,
        imgsz=detector.imgsz_hw,
        seconds=seconds,
    )
