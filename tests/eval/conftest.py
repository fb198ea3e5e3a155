"""Fixtures: small YOLO-format data sets written to a temporary folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

WriteDataset = Callable[..., Path]


@pytest.fixture
def write_dataset(tmp_path: Path) -> WriteDataset:
    """Return ``write(labels_by_split, names=..., size_wh=(64, 48)) -> data.yaml path``.

    ``labels_by_split`` maps a split name to ``{image_stem: label_text}``; every image is a
    grey ``size_wh`` JPEG. A label text of ``None`` writes the image without a label file.
    """

    def write(
        labels_by_split: dict[str, dict[str, str | None]],
        names: list[str] | None = None,
        size_wh: tuple[int, int] = (64, 48),
        extra: dict | None = None,
    ) -> Path:
        root = tmp_path / "ds"
        for split, labels in labels_by_split.items():
            (root / "images" / split).mkdir(parents=True, exist_ok=True)
            (root / "labels" / split).mkdir(parents=True, exist_ok=True)
            for stem, text in labels.items():
                img = np.full((size_wh[1], size_wh[0], 3), 127, np.uint8)
                cv2.imwrite(str(root / "images" / split / f"{stem}.jpg"), img)
                if text is not None:
                    (root / "labels" / split / f"{stem}.txt").write_text(text)
        data = {"path": str(root), "names": names or ["person", "car"]}
        data.update({s: f"images/{s}" for s in labels_by_split})
        data.update(extra or {})
        yaml_path = root / "data.yaml"
        yaml_path.write_text(yaml.safe_dump(data))
        return yaml_path

    return write
