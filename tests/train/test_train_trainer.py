"""Training through Ultralytics: input checks before anything runs, and a one-epoch smoke run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from campusguard.cli.main import main
from campusguard.errors import DeviceError, InvalidInputError
from campusguard.train import oom_message, parse_train_device, resolve_model_spec, train
from campusguard.train.trainer import export_best_onnx, metrics_from_results_csv


@pytest.mark.parametrize(
    ("device", "gpus", "expected"),
    [
        ("cpu", [], None),
        ("auto", [], None),
        ("auto", ["A"], [0]),
        ("0", ["A"], [0]),
        ("0,1", ["A", "B"], [0, 1]),
        ("cuda:1", ["A", "B"], [1]),
    ],
)
def test_parse_train_device(device, gpus, expected) -> None:
    assert parse_train_device(device, gpus=gpus) == expected


@pytest.mark.parametrize(
    ("device", "gpus", "error", "message"),
    [
        ("0,1", [], DeviceError, r"names GPU 0, 1 but PyTorch sees: none \(CPU only\)"),
        ("0,3", ["MI300X", "MI300X"], DeviceError, r"names GPU 3 but PyTorch sees: 0 \(MI300X\), 1 \(MI300X\)"),
        ("0,0", ["A"], InvalidInputError, "repeats a GPU"),
        ("gpu0", ["A"], InvalidInputError, "is not cpu, auto"),
    ],
)
def test_bad_device_lists(device, gpus, error, message) -> None:
    with pytest.raises(error, match=message):
        parse_train_device(device, gpus=gpus)


def test_train_names_mean_the_official_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``yolov8n`` / ``yolov8n.pt`` fine-tune the official trained weights (a local file wins, else the
    cache); offline and not cached, one line names the pull command."""
    from campusguard.errors import ModelLoadError

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CAMPUSGUARD_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match="campusguard models pull yolov8n") as exc:
        resolve_model_spec("yolov8n")
    assert "\n" not in str(exc.value)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolov8n.pt").write_bytes(b"0")
    assert resolve_model_spec("yolov8n") == (str((tmp_path / "yolov8n.pt").resolve()), True)
    assert resolve_model_spec("yolov8n.pt") == (str((tmp_path / "yolov8n.pt").resolve()), True)


def test_resolve_model_spec(tmp_path: Path) -> None:
    assert resolve_model_spec("yolov8n.yaml") == ("yolov8n.yaml", False)
    assert resolve_model_spec("yolov8s.yaml") == ("yolov8s.yaml", False)
    pt = tmp_path / "x.pt"
    pt.write_bytes(b"0")
    assert resolve_model_spec(str(pt)) == (str(pt.resolve()), True)
    onnx = tmp_path / "x.onnx"
    onnx.write_bytes(b"0")
    assert resolve_model_spec(str(onnx)) == (str(onnx.resolve()), True)  # rebuilt for fine-tuning by train()
    from campusguard.models.resolve import DEFAULT_MODEL

    assert resolve_model_spec("default") == (str(DEFAULT_MODEL), True)
    with pytest.raises(InvalidInputError, match="do not exist"):
        resolve_model_spec(str(tmp_path / "missing.pt"))
    with pytest.raises(InvalidInputError, match="is not one of yolov8n"):
        resolve_model_spec("resnet50")


def test_oom_message_offers_same_effective_batch() -> None:
    msg = oom_message("0", batch=32, accumulate=2, imgsz=640, amp=False)
    assert "--batch 16 --accumulate 4 (same effective batch 64)" in msg
    assert "--imgsz 320" in msg and "--amp" in msg


def _break(yaml_path: Path, how: str) -> None:
    root = yaml_path.parent
    if how == "missing image":
        (root / "images" / "train" / "0000.png").unlink()
    elif how == "malformed label":
        (root / "labels" / "val" / "0001.txt").write_text("0 0.5 0.5\n")
    elif how == "class out of range":
        (root / "labels" / "train" / "0002.txt").write_text("7 0.5 0.5 0.2 0.2\n")
    elif how == "empty split":
        for p in (root / "images" / "val").glob("*.png"):
            p.unlink()
        for p in (root / "labels" / "val").glob("*.txt"):
            p.unlink()


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("missing image", r"label file .*0000\.txt has no image"),
        ("malformed label", r"0001\.txt:1: expected 'class cx cy w h'"),
        ("class out of range", r"0002\.txt:1: class id 7 out of range 0\.\.1"),
        ("empty split", r"val split of .* is empty"),
    ],
)
def test_bad_data_set_fails_before_training(toy_dataset: Path, tmp_path: Path, how: str, message: str) -> None:
    _break(toy_dataset, how)
    out = tmp_path / "run"
    with pytest.raises(InvalidInputError, match=message):
        train("yolov8n.yaml", toy_dataset, epochs=1, imgsz=64, batch=2, device="cpu", out=out)
    assert not out.exists()  # nothing was started or written


def test_cli_missing_gpus_is_one_line_error(toy_dataset: Path, tmp_path: Path, capsys) -> None:
    code = main(
        ["train", "--data", str(toy_dataset), "--device", "0,1", "--out", str(tmp_path / "run"), "--epochs", "1"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and "names GPU" in err
    assert not (tmp_path / "run").exists()


def test_cli_bad_numbers(toy_dataset: Path, capsys) -> None:
    assert main(["train", "--data", str(toy_dataset), "--imgsz", "100", "--device", "cpu"]) == 2
    assert "multiple of 32" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.torch
def test_one_epoch_smoke_run_loss_falls_and_exports(tmp_path: Path, draw_dataset, capsys) -> None:
    pytest.importorskip("ultralytics")
    from campusguard.eval.validate import validate_model

    data = draw_dataset(tmp_path / "toy", n_train=96, n_val=8, size=128)
    losses: list[float] = []
    accumulate: list[int] = []
    amp: list[bool] = []

    def on_batch_end(tr) -> None:
        losses.append(float(tr.loss.detach()))
        accumulate.append(int(tr.accumulate))
        amp.append(bool(tr.amp))

    result = train(
        "yolov8n.yaml",
        data,
        epochs=1,
        imgsz=128,
        batch=4,
        accumulate=2,
        device="cpu",
        workers=0,
        out=tmp_path / "run",
        overrides={"mosaic": 0.0, "optimizer": "SGD", "lr0": 0.01},
        callbacks={"on_train_batch_end": on_batch_end},
    )
    assert len(losses) == 24
    assert set(accumulate) == {2}  # Ultralytics steps every max(round(nbs / batch), 1) = 2 batches
    assert set(amp) == {False}  # --amp is for GPUs: no bfloat16 autocast on the CPU
    first, last = np.mean(losses[:6]), np.mean(losses[-6:])
    assert last < 0.9 * first, losses
    assert result.best_pt.is_file() and result.onnx is not None and result.onnx.is_file()
    assert yaml.safe_load((result.save_dir / "args.yaml").read_text())["nbs"] == 8  # batch x accumulate
    v = validate_model(result.onnx, data, imgsz=128, device="cpu")  # the export runs in CampusGuard's pipeline
    assert v.metrics.num_images == 8 and 0.0 <= v.metrics.map50_95 <= 1.0
    assert main(["val", "--model", str(result.onnx), "--data", str(data), "--imgsz", "128", "--device", "cpu"]) == 0
    assert "mAP50-95" in capsys.readouterr().out

    other = yaml.safe_load(data.read_text()) | {"names": {0: "person", 1: "car"}}
    (data.parent / "other.yaml").write_text(yaml.safe_dump(other))
    with pytest.raises(InvalidInputError, match="model classes .* do not match the data set classes"):
        validate_model(result.onnx, data.parent / "other.yaml", imgsz=128, device="cpu")


@pytest.mark.torch
@pytest.mark.parametrize(("arch", "nms", "output"), [("yolo26n", "in-model", [1, 300, 6]), ("yolov8n", "campusguard", None)])
def test_export_after_training_keeps_the_models_own_head(tmp_path: Path, arch: str, nms: str, output) -> None:
    """A trained YOLO26 is exported with its NMS-free head (Ultralytics' default export, ``nms=None``,
    would write its classic head); a YOLOv8 keeps its raw head for CampusGuard's NMS."""
    import onnxruntime as ort
    import torch

    from campusguard.detector import Detector
    from campusguard.models.ultralytics_net import build_architecture

    pt = tmp_path / f"{arch}.pt"
    torch.save({"model": build_architecture(arch), "train_args": {}, "date": None, "version": "campusguard"}, pt)
    onnx = export_best_onnx(pt, imgsz=160)  # 525 anchors at 160: top-k keeps max_det = 300
    assert Detector(onnx, device="cpu").info.nms == nms
    session = ort.InferenceSession(str(onnx), providers=["CPUExecutionProvider"])
    out = session.run(None, {session.get_inputs()[0].name: np.zeros((1, 3, 128, 192), np.float32)})[0]
    assert output is None or list(out.shape) == output  # dynamic export: any input size


def test_resume_without_last_checkpoint(toy_dataset: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"--resume: there is no .*last\.pt to continue"):
        train("yolov8n.yaml", toy_dataset, epochs=1, imgsz=64, batch=2, device="cpu", out=tmp_path / "run", resume=True)


def test_best_epoch_metrics_from_results_csv(tmp_path: Path) -> None:
    csv = tmp_path / "results.csv"
    head = "epoch,time,metrics/precision(B),metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B)"
    # epoch 2 has the best fitness (0.9 mAP50-95 + 0.1 mAP50) although epoch 3 has the best mAP50
    csv.write_text(f"{head}\n1,10,0.5,0.4,0.60,0.30\n2,20,0.8,0.7,0.80,0.55\n3,30,0.7,0.7,0.95,0.50\n")
    metrics, epochs = metrics_from_results_csv(csv)
    assert epochs == 3
    assert metrics == {"map50_95": 0.55, "map50": 0.80, "precision": 0.8, "recall": 0.7}
    assert metrics_from_results_csv(tmp_path / "missing.csv") == ({}, 0)
