"""Choosing FP32 or the INT8 variant of a model from the CPU's flags, and the bundled INT8 variant itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from campusguard.detector import Detector
from campusguard.errors import ModelLoadError
from campusguard.models.resolve import DEFAULT_MODEL
from campusguard.precision import choose_precision, cpu_prefers_int8, int8_variant

VNNI = ["avx2", "avx512_vnni", "fma"]
AVX2 = ["avx2", "fma"]


def test_cpu_prefers_int8_only_with_vnni_or_amx() -> None:
    assert cpu_prefers_int8(VNNI) and cpu_prefers_int8(["avx_vnni"]) and cpu_prefers_int8(["amx_int8"])
    assert not cpu_prefers_int8(AVX2) and not cpu_prefers_int8([])


def test_variants_are_found_next_to_the_model(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    assert int8_variant(model) is None
    (tmp_path / "m.int8.onnx").write_bytes(b"x")
    assert int8_variant(model) == tmp_path / "m.int8.onnx"
    (tmp_path / "m-int8.onnx").write_bytes(b"x")
    assert int8_variant(model) == tmp_path / "m-int8.onnx"
    assert int8_variant(tmp_path / "m.pt") is None


def test_auto_picks_int8_only_with_vnni_and_a_variant(tmp_path: Path) -> None:
    assert choose_precision(DEFAULT_MODEL, "auto", VNNI).precision == "int8"
    assert choose_precision(DEFAULT_MODEL, "auto", AVX2).model == DEFAULT_MODEL
    lone = tmp_path / "lone.onnx"
    lone.write_bytes(b"x")
    assert "no INT8 variant" in choose_precision(lone, "auto", VNNI).reason
    assert choose_precision(DEFAULT_MODEL, "int8", AVX2).model.name == "campusguard-default-int8.onnx"
    assert choose_precision(DEFAULT_MODEL, "fp32", VNNI).model == DEFAULT_MODEL
    with pytest.raises(ModelLoadError, match="no INT8 variant"):
        choose_precision(lone, "int8", VNNI)


def test_the_bundled_int8_variant_finds_what_the_fp32_model_finds() -> None:
    from campusguard.data.synth.images import render_image
    from campusguard.ops.boxes import box_iou

    int8 = choose_precision(DEFAULT_MODEL, "int8", AVX2).model
    fp32_det, int8_det = Detector(model=DEFAULT_MODEL, imgsz=320), Detector(model=int8, imgsz=320)
    frames = [render_image(4242, i, 640).image for i in range(4)]
    kept = total = 0
    for ref, got in zip(fp32_det.predict_batch(frames), int8_det.predict_batch(frames), strict=True):
        total += len(ref)
        if len(ref) and len(got):
            iou = box_iou(ref.xyxy, got.xyxy)
            same_class = ref.class_id[:, None] == got.class_id[None, :]
            kept += int(((iou > 0.7) & same_class).any(axis=1).sum())
    assert total >= 10 and kept >= 0.85 * total
