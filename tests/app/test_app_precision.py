"""`detector.precision` in the app: which model file `watch` loads, and `doctor`'s advice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import campusguard.doctor
from campusguard.app.config import parse_config
from campusguard.app.service import model_for_precision
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
        model_for_precision("yolov8n", "cpu", "int8")


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
