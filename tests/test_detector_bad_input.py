"""Bad input: a typed exception from the API, one line and a non-zero exit from the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from campusguard.detector import Detector
from campusguard.errors import DeviceError, ImageReadError, InvalidInputError, ModelLoadError
from campusguard.io.images import read_image
from factories import build_tiny_detector_onnx


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", *args], capture_output=True, text=True, timeout=300
    )


def assert_one_line_error(proc: subprocess.CompletedProcess, pattern: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    assert pattern in lines[0], lines[0]


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory) -> Path:
    return build_tiny_detector_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx")


@pytest.fixture(scope="module")
def classifier_onnx(tmp_path_factory) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    g = helper.make_graph([helper.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)], "cls", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    path = tmp_path_factory.mktemp("cls") / "classifier.onnx"
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, assets_dir) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bad")
    (d / "empty.jpg").write_bytes(b"")
    data = (assets_dir / "bus.jpg").read_bytes()
    (d / "truncated.jpg").write_bytes(data[: len(data) // 3])
    (d / "text.png").write_text("not an image at all")
    (d / "notyolo.pt").write_bytes(b"\x80\x04K\x01.")  # a pickled int, not a checkpoint
    (d / "garbage.onnx").write_bytes(b"\x00garbage" * 10)
    return {p.name: p for p in d.iterdir()}


@pytest.mark.parametrize("name", ["empty.jpg", "truncated.jpg", "text.png"])
def test_bad_images_raise_typed_errors(bad_files, name):
    with pytest.raises(ImageReadError):
        read_image(bad_files[name])


def test_missing_and_unreadable_paths(tmp_path):
    with pytest.raises(ImageReadError, match="no such file"):
        read_image(tmp_path / "nope.jpg")
    with pytest.raises(ImageReadError, match="directory"):
        read_image(tmp_path)


def test_classifier_onnx_is_not_a_detector(classifier_onnx):
    with pytest.raises(ModelLoadError, match="detector|not"):
        Detector(classifier_onnx, device="cpu")


def test_garbage_onnx(bad_files):
    with pytest.raises(ModelLoadError, match="cannot load ONNX"):
        Detector(bad_files["garbage.onnx"], device="cpu")


@pytest.mark.torch
def test_pt_that_is_not_a_yolo_checkpoint(bad_files):
    with pytest.raises(ModelLoadError, match="not an Ultralytics"):
        Detector(bad_files["notyolo.pt"], backend="torch", device="cpu")


@pytest.mark.parametrize("device", ["cuda:9", "rocm:0"])
def test_missing_gpu_is_a_device_error(tiny_onnx, device):
    from campusguard.backends.devices import list_gpus

    if list_gpus():
        pytest.skip("this machine has GPUs; the ordinal may exist")
    with pytest.raises(DeviceError, match="available: cpu|no usable GPU"):
        Detector(tiny_onnx, device=device)


def test_allow_cpu_fallback_warns_and_runs(tiny_onnx, caplog):
    from campusguard.backends.devices import list_gpus

    if list_gpus():
        pytest.skip("this machine has GPUs")
    det = Detector(tiny_onnx, device="cuda:0", allow_cpu_fallback=True, imgsz=64)
    assert det.provider == "CPUExecutionProvider"
    assert "FALLING BACK TO CPU" in caplog.text


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"imgsz": 100}, "multiple of 32"),
        ({"conf": 1.5}, "outside 0..1"),
        ({"iou": -0.1}, "outside 0..1"),
        ({"device": "tpu:0"}, "device"),
    ],
)
def test_bad_arguments(tiny_onnx, kwargs, pattern):
    with pytest.raises(InvalidInputError, match=pattern):
        Detector(tiny_onnx, **kwargs)


def test_unknown_model_name():
    with pytest.raises(InvalidInputError, match="unknown model"):
        Detector("yolov99z")


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["predict", "{tiny}", "{bad}/empty.jpg"], "empty"),
        (["predict", "{tiny}", "/nonexistent/x.jpg"], "no such file"),
        (["predict", "{classifier}", "{bad}/empty.jpg"], "not"),
        (["predict", "{tiny}", "{bad}/text.png", "--imgsz", "100"], "multiple of 32"),
        (["predict", "{tiny}", "{bad}/text.png", "--conf", "2"], "outside 0..1"),
        (["predict", "{tiny}", "{bad}/text.png", "--device", "cuda:9"], "cuda:9"),
        (["predict", "{tiny}", "{bad}/text.png", "--device", "rocm:0"], "rocm:0"),
        (["predict", "{bad}/garbage.onnx", "{bad}/text.png"], "cannot load ONNX"),
    ],
)
def test_cli_bad_input_is_one_line(args, pattern, tiny_onnx, classifier_onnx, bad_files):
    from campusguard.backends.devices import list_gpus

    if "--device" in args and list_gpus():
        pytest.skip("this machine has GPUs")
    bad = bad_files["empty.jpg"].parent
    filled = [a.format(tiny=tiny_onnx, bad=bad, classifier=classifier_onnx) for a in args]
    if "empty" in pattern:
        proc = run_cli(*filled, "--out", str(bad / "out"))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert "skipped:" in proc.stderr and "empty file" in proc.stderr
        return
    assert_one_line_error(run_cli(*filled, "--out", str(bad / "out")), pattern)


@pytest.mark.torch
def test_cli_pt_not_a_checkpoint(bad_files, assets_dir):
    proc = run_cli(
        "predict",
        str(bad_files["notyolo.pt"]),
        str(assets_dir / "bus.jpg"),
        "--backend",
        "torch",
        "--out",
        str(bad_files["notyolo.pt"].parent / "o"),
    )
    assert_one_line_error(proc, "not an Ultralytics")


def test_folder_with_a_bad_file_processes_the_rest(tmp_path, tiny_onnx):
    import cv2

    cv2.imwrite(str(tmp_path / "a.png"), np.full((64, 64, 3), 50, np.uint8))
    cv2.imwrite(str(tmp_path / "b.png"), np.full((64, 64, 3), 90, np.uint8))
    (tmp_path / "c.jpg").write_bytes(b"junk")
    proc = run_cli("predict", str(tiny_onnx), str(tmp_path), "--imgsz", "64", "--out", str(tmp_path / "out"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.count("skipped:") == 1 and "c.jpg" in proc.stderr
    assert (tmp_path / "out" / "a.jpg").exists() and (tmp_path / "out" / "b.jpg").exists()
    import json

    recs = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert [Path(r["file"]).name for r in recs] == ["a.png", "b.png"]
    assert all(len(r["detections"]) == 1 for r in recs)
    assert (tmp_path / "out" / "labels" / "a.txt").read_text().startswith("0 0.5")
