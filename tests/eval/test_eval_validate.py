"""`validate_model` (what `campusguard val` runs) on the bundled default model, against Ultralytics' val."""

from __future__ import annotations

from pathlib import Path

import pytest

from campusguard.errors import InvalidInputError
from campusguard.eval.validate import validate_model
from campusguard.models.resolve import default_model_path


@pytest.fixture(scope="module")
def synth_val(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """96 synthetic campus val images from seed 1000, a seed the default model never saw."""
    from campusguard.data.synth.dataset import generate_dataset

    out = tmp_path_factory.mktemp("synth1000")
    generate_dataset(out, images=192, seed=1000, val_fraction=0.5)
    return out / "data.yaml"


def test_default_model_is_accurate_on_unseen_seed(synth_val: Path) -> None:
    r = validate_model(None, synth_val, device="cpu", batch=4)  # imgsz: the model's training size
    assert r.metrics.num_images == 96
    assert r.imgsz == (320, 320) and r.provider == "CPUExecutionProvider"
    # the full 500-image split gives 0.717 / 0.918 (MODEL_CARD.md); a regression alarm, with margin
    assert r.metrics.map50_95 > 0.6 and r.metrics.map50 > 0.85
    assert set(r.metrics.per_class) <= {0, 1, 2, 3, 5, 7}


@pytest.mark.torch
def test_agrees_with_ultralytics_val_within_half_a_point(synth_val: Path, tmp_path: Path) -> None:
    """Same ONNX file, same images, Ultralytics' val defaults (conf 0.001, IoU 0.7, batch 1).

    Remaining differences: Ultralytics' AP integration, its multi-label val NMS and its
    INTER_AREA resize (see scripts/val_parity.py); with the model retrained on 2026-12-02: -0.11
    points on these 96 images (-0.55 on the 48 used before, -0.24 on the full 500-image split).
    Ultralytics' own predictions scored by CampusGuard's COCO AP land between the two.
    """
    pytest.importorskip("ultralytics")
    from campusguard.eval.ultralytics_val import score_ultralytics_predictions, ultralytics_val
    from campusguard.train.trainer import write_resolved_data_yaml

    ours = validate_model(None, synth_val, imgsz=320, device="cpu").metrics
    resolved = write_resolved_data_yaml(synth_val, tmp_path / "data.yaml")
    ul, predictions = ultralytics_val(default_model_path(), resolved, 320, 1, tmp_path)
    assert abs(ours.map50_95 - ul["map50_95"]) <= 0.005
    assert abs(ours.map50 - ul["map50"]) <= 0.02
    coco = score_ultralytics_predictions(predictions, resolved)
    assert abs(coco["map50_95"] - ul["map50_95"]) <= 0.01


def test_bad_batch_and_missing_data(synth_val: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="batch=0 must be at least 1"):
        validate_model(None, synth_val, imgsz=320, device="cpu", batch=0)
    with pytest.raises(InvalidInputError, match="does not exist"):
        validate_model(None, tmp_path / "none.yaml", imgsz=320, device="cpu")
