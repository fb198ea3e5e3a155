"""Model references resolved in one place, and a model's `ModelInfo` read before anything is exported."""

from __future__ import annotations

from pathlib import Path

import pytest

from campusguard.backends.onnxruntime_backend import OnnxRuntimeBackend
from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.resolve import DEFAULT_MODEL, ModelRef, parse_model_ref, read_model_info
from factories import build_tiny_checkpoint, build_tiny_detector_onnx


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [("yolov8n.yaml", "arch", "yolov8n"), ("YOLO11s.yaml", "arch", "yolo11s")],
)
def test_architecture_names(text: str, kind: str, name: str) -> None:
    assert parse_model_ref(text) == ModelRef(kind, name=name)


def test_default_and_passthrough() -> None:
    ref = parse_model_ref(None)
    assert ref == ModelRef("onnx", DEFAULT_MODEL)
    assert parse_model_ref(ref) is ref


@pytest.mark.parametrize(
    ("name", "content", "error", "message"),
    [
        ("model.tflite", b"x", InvalidInputError, "unknown model"),
        ("missing.onnx", None, ModelLoadError, "not found"),
        ("empty.pt", b"", ModelLoadError, "empty"),
    ],
)
def test_bad_references(tmp_path: Path, name: str, content: bytes | None, error: type, message: str) -> None:
    if content is not None:
        (tmp_path / name).write_bytes(content)
    with pytest.raises(error, match=message):
        parse_model_ref(tmp_path / name)


@pytest.mark.parametrize("model", ["tiny", "default"])
def test_onnx_info_read_from_the_file_matches_the_loaded_session(tmp_path: Path, model: str) -> None:
    path = build_tiny_detector_onnx(tmp_path / "tiny.onnx") if model == "tiny" else DEFAULT_MODEL
    assert read_model_info(parse_model_ref(path)) == OnnxRuntimeBackend(path, device="cpu").info


def test_corrupt_onnx_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "bad.onnx").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ModelLoadError, match="cannot load ONNX model"):
        read_model_info(parse_model_ref(tmp_path / "bad.onnx"))


@pytest.mark.torch
def test_checkpoint_info_has_its_trained_size(tmp_path: Path) -> None:
    info = read_model_info(parse_model_ref(build_tiny_checkpoint(tmp_path / "t.pt", imgsz=320)))
    assert (info.imgsz_hw, info.names, info.input_hw, info.task, info.random_weights) == (
        (320, 320),
        {0: "c0", 1: "c1"},
        None,
        "detect",
        False,
    )
