"""A checkpoint opened with ``imgsz=None`` runs at the size it was trained at, on every backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from campusguard.detector import Detector
from factories import build_tiny_checkpoint

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def pt_trained_at_320(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny320.pt", imgsz=320)


@pytest.mark.parametrize("backend", ["onnxruntime", "torch"])
def test_pt_without_imgsz_runs_at_its_trained_size(pt_trained_at_320: Path, backend: str) -> None:
    det = Detector(pt_trained_at_320, backend=backend, device="cpu", rect=False)
    assert det.imgsz_hw == (320, 320)
    assert det.input_hw((480, 640)) == (320, 320)
    assert det.names == {0: "c0", 1: "c1"}


def test_explicit_imgsz_still_wins(pt_trained_at_320: Path) -> None:
    det = Detector(pt_trained_at_320, backend="onnxruntime", device="cpu", imgsz=256, rect=False)
    assert det.imgsz_hw == (256, 256)
