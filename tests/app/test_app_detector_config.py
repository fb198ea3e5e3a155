"""The detector section reaches the `Detector`: backend, pre/post-processing path, FP16, head."""

from __future__ import annotations

import pytest

from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import default_detector_factory
from campusguard.errors import ConfigError


@pytest.mark.torch
def test_torch_backend_with_the_device_pipeline_from_the_config(fall_pt):
    loaded = parse_config(f"detector: {{model: '{fall_pt}', backend: torch, pipeline: device}}\n")
    det = default_detector_factory(loaded)(str(fall_pt), "cpu", None)
    assert det.pipeline == "device" and det.provider == "torch-device:cpu"  # type: ignore[attr-defined]


def test_defaults_keep_onnx_runtime_on_the_host_path():
    loaded = parse_config("detector: {}\n")
    assert (loaded.config.detector.backend, loaded.config.detector.pipeline) == (None, "auto")
    det = default_detector_factory(loaded)(None, "cpu", None)
    assert det.pipeline == "host"  # type: ignore[attr-defined]


def test_unknown_pipeline_is_a_config_error():
    with pytest.raises(ConfigError, match="pipeline"):
        parse_config("detector: {pipeline: gpu}\n")


@pytest.mark.torch
@pytest.mark.parametrize("head", ["classic", "end2end"])
def test_the_head_reaches_the_detector(head):
    loaded = parse_config(f"detector: {{model: yolo26n.yaml, backend: torch, head: {head}}}\n")
    det = default_detector_factory(loaded)("yolo26n.yaml", "cpu", 64)
    assert det.info.head == head  # type: ignore[attr-defined]


def test_an_unknown_head_is_a_config_error():
    assert parse_config("detector: {}\n").config.detector.head is None  # the model's own head
    with pytest.raises(ConfigError, match="head"):
        parse_config("detector: {head: one2many}\n")
