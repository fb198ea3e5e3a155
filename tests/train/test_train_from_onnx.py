"""Fine-tuning an exported model: trainable weights rebuilt from an Ultralytics ONNX export."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pytest

from campusguard.cli.main import main
from campusguard.cli.train import parse_settings
from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.resolve import DEFAULT_MODEL

pytestmark = pytest.mark.torch


def _synth_batch(n: int, imgsz: int) -> np.ndarray:
    """``(n, 3, imgsz, imgsz)`` float32 RGB campus images from the still-image generator."""
    from campusguard.data.synth.images import render_image
    from campusguard.ops.preprocess import make_batch

    return make_batch([render_image(7, i, imgsz=imgsz).image for i in range(n)])


def _onnx_outputs(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def test_rebuilt_model_computes_what_the_onnx_file_computes_and_trains_close_to_it() -> None:
    pytest.importorskip("ultralytics")
    import torch

    from campusguard.train.from_onnx import detection_model_from_onnx, recalibrate_batch_norms

    model, arch, names = detection_model_from_onnx(DEFAULT_MODEL)
    assert arch.name == "yolov8n" and names[0] == "person"
    calib, test = _synth_batch(24, 320), _synth_batch(40, 320)[24:]
    ref = _onnx_outputs(DEFAULT_MODEL, test)

    def eval_out(m: torch.nn.Module) -> np.ndarray:
        m.eval()
        with torch.no_grad():
            return m(torch.from_numpy(test))[0].numpy()

    def train_vs_eval_box_error(m: torch.nn.Module) -> float:
        m = copy.deepcopy(m)  # a forward in train mode moves the batch norms' running statistics
        m.eval()
        with torch.no_grad():
            e = m(torch.from_numpy(test))[1]["boxes"]
        m.train()
        with torch.no_grad():
            t = m(torch.from_numpy(test))["boxes"]
        return float((e - t).abs().mean() / e.abs().mean())

    scale = np.abs(ref).max()
    assert np.abs(eval_out(model) - ref).max() < 1e-5 * scale * 10  # 534 px at most: float32 rounding
    identity_error = train_vs_eval_box_error(model)
    assert recalibrate_batch_norms(model, calib) == 57
    assert np.abs(eval_out(model) - ref).max() < 1e-5 * scale * 10  # the same function after recalibration
    calibrated_error = train_vs_eval_box_error(model)
    assert calibrated_error < 0.6 * identity_error, (calibrated_error, identity_error)  # measured 0.24 vs 0.45 on 8


@pytest.mark.slow
def test_a_yolo11_export_is_rebuilt_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random weights: the exporter merges the identical zero biases into one constant, so the
    biases are found through the graph's Conv nodes, not by name."""
    pytest.importorskip("ultralytics")
    import torch
    from ultralytics import YOLO

    from campusguard.models.ultralytics_env import offline_ultralytics
    from campusguard.train.from_onnx import detection_model_from_onnx

    offline_ultralytics()
    monkeypatch.chdir(tmp_path)
    path = Path(YOLO("yolo11n.yaml").export(format="onnx", imgsz=320, dynamic=True, simplify=True))
    model, arch, _ = detection_model_from_onnx(path)
    assert arch.name == "yolo11n"
    x = _synth_batch(2, 320)
    ref = _onnx_outputs(path, x)
    model.eval()
    with torch.no_grad():
        out = model(torch.from_numpy(x))[0].numpy()
    assert np.abs(out - ref).max() < 1e-4 * np.abs(ref).max()


def test_an_end_to_end_or_foreign_onnx_is_refused_in_one_line(tmp_path: Path) -> None:
    pytest.importorskip("ultralytics")
    from campusguard.train.from_onnx import checkpoint_from_onnx, detection_model_from_onnx

    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not onnx")
    with pytest.raises(ModelLoadError, match="not a readable ONNX file"):
        detection_model_from_onnx(junk)
    with pytest.raises(InvalidInputError, match="must end in .pt"):
        checkpoint_from_onnx(DEFAULT_MODEL, tmp_path / "x.onnx")


@pytest.mark.slow
def test_fine_tuning_the_bundled_onnx_starts_from_its_weights(tmp_path: Path) -> None:
    """`campusguard train --model default` fine-tunes the bundled weights (and a .pt is no longer
    trained from random weights: Ultralytics' ``pretrained=False`` used to drop them)."""
    pytest.importorskip("ultralytics")
    import torch

    from campusguard.data.synth.dataset import generate_dataset
    from campusguard.train.trainer import train

    data = generate_dataset(tmp_path / "ds", images=12, imgsz=128, val_fraction=0.25).data_yaml
    seen: dict[str, float] = {}

    def at_start(trainer) -> None:  # noqa: ANN001  (Ultralytics' trainer)
        ckpt = torch.load(trainer.save_dir / "init-from-onnx.pt", weights_only=False)["model"]
        first = trainer.model.model[0].conv.weight.detach()
        seen["same_first_conv"] = float(torch.equal(first, ckpt.model[0].conv.weight.detach()))
        seen["threads"] = torch.get_num_threads()

    train(
        "default",
        data,
        epochs=1,
        imgsz=128,
        batch=4,
        device="cpu",
        workers=0,
        out=tmp_path / "run",
        export_onnx=False,
        threads=1,
        overrides={"warmup_epochs": 0},
        callbacks={"on_pretrain_routine_end": at_start},
    )
    assert seen == {"same_first_conv": 1.0, "threads": 1}


def test_set_options_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_settings(["close_mosaic=2", "lr0=0.0004", "optimizer=AdamW", "cos_lr=true"]) == {
        "close_mosaic": 2,
        "lr0": 0.0004,
        "optimizer": "AdamW",
        "cos_lr": True,
    }
    with pytest.raises(InvalidInputError, match="KEY=VALUE"):
        parse_settings(["close_mosaic"])
    with pytest.raises(InvalidInputError, match="use the --epochs option"):
        parse_settings(["epochs=3"])
    assert main(["train", "--data", "x.yaml", "--set", "nonsense"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --set 'nonsense' must look like KEY=VALUE")
