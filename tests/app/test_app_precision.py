"""`detector.precision` in the app: which model file `watch` loads, and `doctor`'s advice."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import campusguard.doctor
from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import EngineChoice, choose_engine, default_detector_factory, model_for_precision
from campusguard.errors import ModelLoadError
from campusguard.models.resolve import DEFAULT_MODEL

INT8 = DEFAULT_MODEL.with_name("campusguard-default-int8.onnx")


def test_the_config_takes_auto_fp32_bf16_int8_only() -> None:
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


def test_auto_loads_the_engine_and_precision_the_trial_chose_and_measures_only_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from campusguard.detector import Detector
    from campusguard.precision import trial_candidates
    from campusguard.precision_cache import cached_calibrations

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))
    monkeypatch.setattr(campusguard.doctor, "cpu_flags", lambda: ["avx2"])  # no VNNI: the flags decide nothing
    built: list[tuple[Path, str | None, str | None]] = []

    def build(path: Path, backend: str | None = None, precision: str | None = None) -> Detector:
        built.append((path, backend, precision))
        return Detector(path, device="cpu", imgsz=224, threads=1, backend=backend, precision=precision)

    candidates = trial_candidates(DEFAULT_MODEL)  # ONNX Runtime FP32 and INT8, and OpenVINO's where installed
    with caplog.at_level("INFO", logger="campusguard.app.engine.wiring"):
        first = choose_engine(None, "cpu", "auto", imgsz=224, build=build)
    (calibration,) = cached_calibrations()
    chosen = calibration.result
    assert len(built) == len(candidates) >= 2
    assert first.model == (None if Path(chosen.model) == DEFAULT_MODEL else chosen.model)
    assert first.backend == (None if chosen.backend == "onnxruntime" else chosen.backend)
    assert first.precision == (
        chosen.precision if chosen.backend != "onnxruntime" and chosen.precision != "int8ov" else None
    )
    (line,) = [r.getMessage() for r in caplog.records if "precision auto" in r.getMessage()]
    assert f"{chosen.chosen.upper()} (" in line and "fp32 " in line and " ms" in line and "measured now" in line
    detector = build(Path(first.model) if first.model else DEFAULT_MODEL, first.backend, first.precision)
    assert detector.provider.startswith("OpenVINO:") == (chosen.backend == "openvino")
    caplog.clear()
    with caplog.at_level("INFO", logger="campusguard.app.engine.wiring"):
        assert choose_engine(None, "cpu", "auto", imgsz=224, build=build) == first
    assert len(built) == len(candidates) + 1 and any("cached" in r.getMessage() for r in caplog.records)  # no 2nd trial
    assert choose_engine(None, "cuda:0", "auto", imgsz=224, build=build).model is None  # the trial is a CPU choice
    assert len(built) == len(candidates) + 1


def test_auto_on_a_model_without_variants_loads_it_without_a_trial(tmp_path: Path) -> None:
    lone = tmp_path / "lone.onnx"
    lone.write_bytes(DEFAULT_MODEL.read_bytes())

    from campusguard.detector import Detector

    def build(path: Path, **_: object) -> Detector:
        raise AssertionError("no trial for a model with nothing to compare")

    # ONNX Runtime forced: one candidate (the model has no INT8 file), nothing to time
    assert choose_engine(str(lone), "cpu", "auto", backend="onnxruntime", build=build).model == str(lone)


def test_a_forced_backend_and_precision_load_as_asked(tmp_path: Path) -> None:
    assert choose_engine(None, "cpu", "bf16", backend="openvino") == EngineChoice(None, "openvino", "bf16")
    assert choose_engine(None, "cpu", "fp32", backend="openvino") == EngineChoice(None, "openvino", "fp32")
    with pytest.raises(ModelLoadError, match="not one the onnxruntime backend runs"):
        choose_engine(None, "cpu", "bf16")
    shipped_ir = DEFAULT_MODEL.with_name("campusguard-default-int8ov.xml")
    assert choose_engine(None, "cpu", "int8", backend="openvino") == EngineChoice(str(shipped_ir), "openvino")
    bare = tmp_path / "bare.onnx"  # a model with no IR next to it
    shutil.copyfile(DEFAULT_MODEL, bare)
    with pytest.raises(ModelLoadError, match="no openvino INT8 variant .*int8ov.xml"):
        choose_engine(str(bare), "cpu", "int8", backend="openvino")


def test_doctor_shows_the_instruction_sets_as_information_and_no_trial_when_none_is_cached(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "doctor", "--json", "--no-torch"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "CAMPUSGUARD_CACHE": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    advice = json.loads(proc.stdout)["precision"]
    vnni = campusguard.doctor.cpu_flags()
    fast = bool({"avx512_vnni", "avx_vnni", "amx_int8"} & set(vnni))
    assert advice["instruction_sets"]["int8_instructions"] is fast and advice["instruction_sets"]["reason"]
    assert advice["calibrations"] == []


def test_doctor_calibrate_measures_stores_and_doctor_then_shows_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from campusguard.cli.main import main as cli_main

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))
    monkeypatch.setenv("COLUMNS", "250")  # doctor's table on one line per row, whatever the terminal
    assert cli_main(["doctor", "--calibrate", "--imgsz", "224", "--budget", "1"]) == 0
    out = capsys.readouterr().out
    assert "precision trial: campusguard-default.onnx at 128x224" in out
    fp32_ms = re.search(r"fp32\s+([\d.]+) ms per frame \(median of (\d+)\)", out)
    int8_ms = re.search(r"int8\s+([\d.]+) ms per frame \(median of (\d+)\)", out)
    assert fp32_ms and int8_ms and int(fp32_ms.group(2)) >= 3, out
    assert "[parity on 6 image(s)" in out
    chosen = re.search(r"chosen: (FP32|INT8|OPENVINO-FP32|OPENVINO-BF16|OPENVINO-INT8OV) \((\S+)\)", out)
    files = {"INT8": INT8.name, "OPENVINO-INT8OV": "campusguard-default-int8ov.xml"}
    assert chosen and chosen.group(2) == files.get(chosen.group(1), DEFAULT_MODEL.name), out
    assert f"stored in {tmp_path}" in out

    assert cli_main(["doctor", "--json", "--no-torch"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["precision"]["calibrations"]
    assert shown["chosen"] == chosen.group(1).lower() and shown["input_hw"] == [128, 224]
    assert shown["ms"]["fp32"] == pytest.approx(float(fp32_ms.group(1)), abs=0.06)
    assert shown["ms"]["int8"] == pytest.approx(float(int8_ms.group(1)), abs=0.06)
    assert shown["measured_at"].startswith("20")
    assert cli_main(["doctor", "--no-torch"]) == 0
    table = capsys.readouterr().out
    assert "information only" in table and f"{shown['chosen'].upper()} for campusguard-default.onnx" in table

    # two older trials of the same model and shape (files or versions since replaced): one row, counted
    import dataclasses

    from campusguard.precision_cache import cached_calibrations, store_calibration

    (current,) = cached_calibrations()
    for n, version in enumerate(("0.0.1", "0.0.2")):
        older_key = dataclasses.replace(current.key, onnxruntime=version)
        store_calibration(dataclasses.replace(current, key=older_key, measured_at=f"2020-01-0{n + 1}T00:00:00+00:00"))
    assert cli_main(["doctor", "--json", "--no-torch"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["precision"]["calibrations"]
    assert row["measured_at"] == shown["measured_at"] and row["older_trials"] == 2
    assert cli_main(["doctor", "--no-torch"]) == 0
    table = capsys.readouterr().out
    assert table.count("for campusguard-default.onnx at 128x224") == 1 and "2 older trials replaced" in table


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--calibrate", "--model", "yolov8n.pt"], "not an ONNX file"),
        (["--model", "m.onnx"], "go with --calibrate"),
        (["--calibrate", "--imgsz", "33"], "--imgsz"),
    ],
)
def test_doctor_calibrate_refuses_bad_input_in_one_line(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from campusguard.cli.main import main as cli_main

    assert cli_main(["doctor", *args]) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_doctor_calibrate_says_when_a_model_has_nothing_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from campusguard.cli.main import main as cli_main

    real = importlib.util.find_spec  # no other engine installed: ONNX Runtime FP32 alone has nothing to compare
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    lone = tmp_path / "lone.onnx"
    lone.write_bytes(DEFAULT_MODEL.read_bytes())
    assert cli_main(["doctor", "--calibrate", "--model", str(lone)]) != 0
    assert "has no INT8 variant next to it" in capsys.readouterr().err


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


@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs the openvino extra")
def test_the_app_builds_its_detectors_for_throughput(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The watch/serve composition asks for CPU per frame first (`LoadOptions.throughput`)."""
    import campusguard.detector as detector_module

    seen: list[bool] = []
    real = detector_module.Detector

    class Recording(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            seen.append(kwargs.get("throughput", False))
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(detector_module, "Detector", Recording)
    loaded = parse_config(
        "detector: {backend: openvino, precision: fp32}\ncameras: [{id: c, source: x.mp4}]\n", str(tmp_path / "w.yaml")
    )
    default_detector_factory(loaded)(None, "cpu", (288, 480))
    assert seen == [True]
