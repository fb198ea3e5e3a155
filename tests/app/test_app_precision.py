"""`detector.precision` in the app: which model file `watch` loads, and `doctor`'s advice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import campusguard.doctor
from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import model_for_precision
from campusguard.errors import ModelLoadError
from campusguard.models.resolve import DEFAULT_MODEL

INT8 = DEFAULT_MODEL.with_name("campusguard-default-int8.onnx")


def test_the_config_takes_auto_fp32_int8_only() -> None:
    assert (
        parse_config(
            "detector: {precision: int8}\ncameras: [{id: c, source: a.mp4}]", "w.yaml"
        ).config.detector.precision
        == "int8"
    )
    with pytest.raises(Exception, match=r"detector\.precision"):
        parse_config("detector: {precision: int4}\ncameras: [{id: c, source: a.mp4}]", "w.yaml")


def test_int8_loads_the_bundled_variant_and_fp32_the_model(tmp_path: Path) -> None:
    assert model_for_precision(None, "cpu", "int8") == str(INT8)
    assert model_for_precision(None, "cpu", "fp32") is None
    assert model_for_precision(str(DEFAULT_MODEL), "cpu", "int8") == str(INT8)
    lone = tmp_path / "lone.onnx"
    lone.write_bytes(DEFAULT_MODEL.read_bytes())
    with pytest.raises(ModelLoadError, match="no INT8 variant"):
        model_for_precision(str(lone), "cpu", "int8")
    with pytest.raises(ModelLoadError, match="needs an ONNX model"):
        model_for_precision("yolov8n.yaml", "cpu", "int8")


@pytest.mark.parametrize(("flags", "expected"), [(["avx2", "avx512_vnni"], str(INT8)), (["avx2"], None)])
def test_auto_follows_the_cpu_flags(monkeypatch: pytest.MonkeyPatch, flags: list[str], expected: str | None) -> None:
    monkeypatch.setattr(campusguard.doctor, "cpu_flags", lambda: flags)
    assert model_for_precision(None, "cpu", "auto") == expected
    assert model_for_precision(None, "cuda:0", "auto") is None  # INT8 is a CPU choice


def test_doctor_says_which_precision_this_cpu_should_use() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "doctor", "--json", "--no-torch"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    advice = json.loads(proc.stdout)["precision"]
    vnni = campusguard.doctor.cpu_flags()
    assert advice["recommended"] == ("int8" if {"avx512_vnni", "avx_vnni", "amx_int8"} & set(vnni) else "fp32")
    assert advice["model"] in (DEFAULT_MODEL.name, INT8.name) and advice["reason"]


def test_the_bundled_int8_variant_runs_aspect_matched_and_keeps_fp32_boxes() -> None:
    """The INT8 file keeps the dynamic input, so a 16:9 camera runs it at 192x320, not 320x320."""
    from campusguard.data.synth.video import SynthVideo
    from campusguard.detector import Detector
    from campusguard.models.parity import compare_detections

    frames = [SynthVideo(seed, (1280, 720), 20.0, 10).frame(i)[0] for seed in (0, 2) for i in range(0, 200, 25)]
    fp32 = Detector(DEFAULT_MODEL, device="cpu", imgsz=320)
    int8 = Detector(INT8, device="cpu", imgsz=320)
    assert int8.input_hw((720, 1280)) == fp32.input_hw((720, 1280)) == (192, 320)
    report = compare_detections(fp32.predict_batch(frames), int8.predict_batch(frames))
    assert report.reference_boxes > 50
    assert report.kept_share >= 0.95 and report.mean_iou >= 0.9, report.line()


def test_quantising_a_dynamic_model_needs_a_calibration_size(tmp_path: Path) -> None:
    from campusguard.errors import InvalidInputError
    from campusguard.models.export import quantize_int8

    image = tmp_path / "a.jpg"
    import cv2
    import numpy as np

    cv2.imwrite(str(image), np.full((64, 64, 3), 128, np.uint8))
    with pytest.raises(InvalidInputError, match="dynamic; give the calibration size"):
        quantize_int8(DEFAULT_MODEL, tmp_path / "q.onnx", [image])


@pytest.mark.parametrize("per_channel", [True, False])
def test_export_int8_per_channel_gives_each_output_channel_its_weight_scale(tmp_path: Path, per_channel: bool) -> None:
    import onnx
    from onnx import numpy_helper

    from campusguard.cli.main import main as cli_main
    from campusguard.data.synth import generate_dataset

    data = generate_dataset(tmp_path / "calib", images=4, seed=2000, imgsz=320, val_fraction=0.0)
    flag = "--int8-per-channel" if per_channel else "--int8-per-tensor"
    args = ["export", str(DEFAULT_MODEL), "--int8", flag, "--data", str(data.out_dir / "images" / "train")]
    assert cli_main([*args, "--calib-images", "4", "--imgsz", "320", "--out", str(tmp_path / "out")]) == 0
    (path,) = (tmp_path / "out").glob("*.int8.onnx")
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    conv_weight_scales = [
        inits[n.input[4]] for n in model.graph.node if n.op_type == "QLinearConv" and n.input[4] in inits
    ]
    assert len(conv_weight_scales) > 20
    channels = [s.size for s in conv_weight_scales]
    if per_channel:
        assert min(channels) > 1  # one scale for each output channel of every quantised convolution
    else:
        assert max(channels) == 1
