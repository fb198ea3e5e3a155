"""ONNX Runtime backend: the MIGraphX compiled-program cache, built per model, and missing providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from campusguard.backends.devices import DeviceSpec
from campusguard.backends.onnxruntime_backend import (
    migraphx_cache_dir,
    migraphx_cache_root,
    migraphx_provider_options,
    model_signature,
    providers_for,
)
from campusguard.errors import DeviceError


def _model(path: Path, shape: list[int | str], fp16: bool = False) -> Path:
    import onnx
    from onnx import TensorProto, helper

    kind = TensorProto.FLOAT16 if fp16 else TensorProto.FLOAT
    graph = helper.make_graph(
        [helper.make_node("Identity", ["images"], ["out"])],
        "m",
        [helper.make_tensor_value_info("images", kind, shape)],
        [helper.make_tensor_value_info("out", kind, shape)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_model_signature_reads_shape_and_precision(tmp_path):
    static = _model(tmp_path / "a.onnx", [1, 3, 640, 640])
    dynamic = _model(tmp_path / "b.onnx", ["batch", 3, "h", "w"], fp16=True)
    assert model_signature(static) == ([1, 3, 640, 640], "fp32")
    assert model_signature(dynamic) == (["dyn", 3, "dyn", "dyn"], "fp16")
    assert model_signature(static.read_bytes()) == ([1, 3, 640, 640], "fp32")


def test_migraphx_cache_is_per_model_shape_and_precision(tmp_path):
    a = _model(tmp_path / "a.onnx", [1, 3, 640, 640])
    (tmp_path / "b").mkdir()
    b = _model(tmp_path / "b" / "a.onnx", [8, 3, 640, 640])
    root = tmp_path / "cache"
    first = migraphx_cache_dir(a, [1, 3, 640, 640], "fp32", root)
    assert first == migraphx_cache_dir(a, [1, 3, 640, 640], "fp32", root)  # a restart finds the same directory
    assert first.parent == root and first.name.startswith("a-") and first.name.endswith("-1x3x640x640-fp32")
    others = {
        migraphx_cache_dir(b, [8, 3, 640, 640], "fp32", root),  # same file name, other model bytes
        migraphx_cache_dir(a, [1, 3, 320, 320], "fp32", root),
        migraphx_cache_dir(a, [1, 3, 640, 640], "fp16", root),
        migraphx_cache_dir(a.read_bytes() + b"x", [1, 3, 640, 640], "fp32", root),
    }
    assert first not in others and len(others) == 4
    assert migraphx_cache_dir(a.read_bytes(), [1], "fp32", root).name.startswith("graph-")


def test_migraphx_cache_root_defaults_under_the_campusguard_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))
    monkeypatch.setattr("campusguard.backends.onnxruntime_backend._MIGRAPHX_ROOT", None)
    assert migraphx_cache_root() == tmp_path / "migraphx"
    monkeypatch.setattr("campusguard.backends.onnxruntime_backend._MIGRAPHX_ROOT", "/srv/mxr")
    assert migraphx_cache_root() == Path("/srv/mxr")


def test_migraphx_provider_options_name_the_device_and_cache(tmp_path):
    opts = migraphx_provider_options(2, tmp_path / "m")
    assert opts == {"device_id": "2", "migraphx_model_cache_dir": str(tmp_path / "m")}
    assert all(isinstance(v, str) for v in opts.values())  # ONNX Runtime takes provider options as strings


@pytest.mark.parametrize("kind", ["rocm", "cuda"])
def test_missing_gpu_provider_is_a_one_line_device_error(kind):
    with pytest.raises(DeviceError) as info:
        providers_for(DeviceSpec(kind, 0), ["CPUExecutionProvider"])  # type: ignore[arg-type]
    msg = str(info.value)
    assert "\n" not in msg and ("onnxruntime-migraphx" if kind == "rocm" else "onnxruntime-gpu") in msg


def test_doctor_says_where_the_migraphx_cache_is(tmp_path, monkeypatch):
    from campusguard.doctor import collect_environment

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))
    monkeypatch.setattr("campusguard.backends.onnxruntime_backend._MIGRAPHX_ROOT", None)
    assert collect_environment(include_torch=False)["onnxruntime"]["migraphx_cache"] == str(tmp_path / "migraphx")
