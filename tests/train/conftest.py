"""Fixtures: a tiny drawn YOLO data set (filled rectangles = class 0, discs = class 1)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml


def draw_toy_dataset(root: Path, n_train: int = 16, n_val: int = 8, size: int = 128, seed: int = 0) -> Path:
    """Write ``root/data.yaml`` and images/labels for train and val; return the yaml path.

    Each ``size x size`` image holds 1-3 objects on a noisy background: red rectangles
    (class 0, "box") and green discs (class 1, "disc"), at least 20% of the image wide.
    """
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("val", n_val)):
        (root / "images" / split).mkdir(parents=True, exist_ok=True)
        (root / "labels" / split).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            img = rng.integers(0, 60, (size, size, 3), dtype=np.uint8)
            lines = []
            for _ in range(int(rng.integers(1, 4))):
                cls = int(rng.integers(0, 2))
                w, h = rng.integers(size // 5, size // 2, 2)
                x1, y1 = rng.integers(0, size - w), rng.integers(0, size - h)
                if cls == 0:
                    cv2.rectangle(img, (int(x1), int(y1)), (int(x1 + w - 1), int(y1 + h - 1)), (40, 40, 230), -1)
                else:
                    cv2.ellipse(
                        img, (int(x1 + w / 2), int(y1 + h / 2)), (int(w / 2), int(h / 2)), 0, 0, 360, (40, 220, 40), -1
                    )
                lines.append(f"{cls} {(x1 + w / 2) / size:.6f} {(y1 + h / 2) / size:.6f} {w / size:.6f} {h / size:.6f}")
            cv2.imwrite(str(root / "images" / split / f"{i:04d}.png"), img)
            (root / "labels" / split / f"{i:04d}.txt").write_text("\n".join(lines) + "\n")
    yaml_path = root / "data.yaml"
    yaml_path.write_text(
        yaml.safe_dump(
            {"path": str(root), "train": "images/train", "val": "images/val", "names": {0: "box", 1: "disc"}}
        )
    )
    return yaml_path


@pytest.fixture
def toy_dataset(tmp_path: Path) -> Path:
    return draw_toy_dataset(tmp_path / "toy")


@pytest.fixture
def draw_dataset():
    """The `draw_toy_dataset` function, for tests that need other sizes."""
    return draw_toy_dataset
