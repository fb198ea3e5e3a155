"""The harness on a tiny real ONNX model: ok, skipped and failed combinations, scenarios, accuracy wiring."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from fakes_bench import write_tiny_dataset

from campusguard.backends.devices import DeviceSpec
from campusguard.bench import harness
from campusguard.bench.harness import (
    BenchSettings,
    Combination,
    bench_combination,
    build_result,
    plan_matrix,
    run_matrix,
)
from campusguard.bench.inputs import calibration_images, stream_frames, synthetic_frame
from campusguard.bench.prepare import skip_reason
from campusguard.bench.results import validate_result
from campusguard.errors import InvalidInputError
from campusguard.models.resolve import parse_model_ref
from factories import build_tiny_detector_onnx

NEEDS_OPENVINO = pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs the openvino extra")
SETTINGS = BenchSettings(imgsz_hw=(64, 64), device="cpu", warmup=1, iters=3, min_seconds=0.0, repeat=2)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_detector_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx"))


@pytest.fixture(scope="module")
def frames() -> list:
    return [synthetic_frame(64, 64, s) for s in range(3)]


def test_matrix_records_ok_skipped_and_failed_and_validates(tiny: str, frames: list) -> None:
    combos = plan_matrix(
        [tiny], ["onnxruntime", "torch"], ["fp32", "fp16", "int8"], [1, 2], ["single-stream", "offline"]
    )
    records = run_matrix(combos, SETTINGS, frames, calibration=None)
    by = {(r["backend"], r["precision"], r["batch"]): r for r in records}
    assert len(records) == 12
    ok = by[("onnxruntime", "fp32", 1)]
    assert ok["status"] == "ok" and ok["reason"] is None
    assert ok["iterations"] == 6 and len(ok["repeats"]) == 2  # 3 iterations x 2 repeats
    assert ok["latency_ms"]["n"] == 6
    assert ok["first_inference_ms"]["total_ms"] == pytest.approx(
        ok["first_inference_ms"]["load_ms"] + ok["first_inference_ms"]["first_run_ms"]
    )
    assert set(ok["stages_ms"]) == {"preprocess", "inference", "postprocess"}
    assert ok["memory"]["host_rss_peak_mb"] > 0 and ok["memory"]["samples"] >= 2
    assert ok["contention"]["cpu_ms_per_image"] >= 0
    assert 0 <= ok["contention"]["other_processes_cpu_share"] <= 1
    assert all("other_processes_cpu_share" in r for r in ok["repeats"])
    assert ok["accuracy"]["status"] == "skipped" and "no --data" in ok["accuracy"]["reason"]
    assert ok["repeat_agree"] in (True, False)
    assert by[("onnxruntime", "fp32", 2)]["model_batch"] == 1  # a batch-1 model is called per image
    assert by[("onnxruntime", "fp16", 1)]["status"] == "skipped"
    assert "GPU provider" in by[("onnxruntime", "fp16", 1)]["reason"]
    assert by[("onnxruntime", "int8", 1)]["status"] == "failed"
    assert "calibration images" in by[("onnxruntime", "int8", 1)]["reason"]
    assert by[("torch", "fp32", 1)]["status"] == "skipped"
    assert ".onnx" in by[("torch", "fp32", 1)]["reason"]
    result = build_result(
        records,
        SETTINGS,
        {
            "models": [tiny],
            "backends": ["onnxruntime", "torch"],
            "precisions": ["fp32", "fp16", "int8"],
            "batch": [1, 2],
        },
        "cpu-test",
        "cmd",
        {},
        0.001,
    )
    validate_result(result)
    scen = {(s["scenario"], s["batch"]) for s in result["scenarios"]}
    assert ("single-stream", 1) in scen and ("offline", 1) in scen or ("offline", 2) in scen


def test_unexpected_exception_is_recorded_as_failed(tiny: str, frames: list, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(harness, "prepare_onnx", boom)
    rec = bench_combination(Combination(tiny, "onnxruntime", "fp32", 1), SETTINGS, frames, DeviceSpec("cpu"))
    assert rec["status"] == "failed"
    assert rec["reason"] == "RuntimeError: kernel exploded"


def test_multi_stream_sends_one_frame_per_source(tiny: str, frames: list) -> None:
    rec = bench_combination(
        Combination(tiny, "onnxruntime", "fp32", 3, "multi-stream"), SETTINGS, frames, DeviceSpec("cpu")
    )
    assert rec["status"] == "ok" and rec["streams"] == 3
    # three frames per query: throughput counts images, latency counts frame sets
    assert rec["throughput_ips"] == pytest.approx(3 * rec["iterations"] / rec["seconds"])
    sources = stream_frames(frames, 3)
    assert [s[0].shape[:2] for s in sources] == [(720, 1280), (1080, 1920), (480, 640)]


def test_onnxruntime_device_variant_runs_beside_the_host_path(tiny: str, frames: list) -> None:
    recs = {
        b: bench_combination(Combination(tiny, b, "fp32", 2), SETTINGS, frames, DeviceSpec("cpu"))
        for b in ("onnxruntime", "onnxruntime-device")
    }
    assert [r["status"] for r in recs.values()] == ["ok", "ok"], [r["reason"] for r in recs.values()]
    assert recs["onnxruntime"]["provider"] == "CPUExecutionProvider"
    assert recs["onnxruntime-device"]["provider"] == "ort-device:CPUExecutionProvider"
    assert recs["onnxruntime-device"]["export"] == recs["onnxruntime"]["export"]
    config = {"models": [tiny], "backends": list(recs), "precisions": ["fp32"], "batch": [2]}
    validate_result(build_result(list(recs.values()), SETTINGS, config, "cpu-test", "cmd", {}, 0.001))


def test_accuracy_is_measured_for_trained_models(tiny: str, frames: list, tmp_path: Path) -> None:
    from campusguard.eval import load_yolo_dataset

    # the tiny model always answers one class-0 box at the image centre, 20x20 px; the labels say so
    ds = load_yolo_dataset(write_tiny_dataset(tmp_path), "val")
    rec = bench_combination(Combination(tiny, "onnxruntime", "fp32", 1), SETTINGS, frames, DeviceSpec("cpu"), ds)
    assert rec["accuracy"]["status"] == "ok"
    assert rec["accuracy"]["map50_95"] == pytest.approx(1.0)
    assert rec["accuracy"]["images"] == 3


def test_random_weight_models_skip_accuracy_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tiny: str, frames: list, tmp_path: Path
) -> None:
    from campusguard.backends.onnxruntime_backend import OnnxRuntimeBackend
    from campusguard.eval import load_yolo_dataset
    from campusguard.models.info import ModelInfo

    real = OnnxRuntimeBackend._model_info

    def random_info(self: OnnxRuntimeBackend) -> ModelInfo:
        info = real(self)
        return ModelInfo(**{**info.__dict__, "random_weights": True})

    monkeypatch.setattr(OnnxRuntimeBackend, "_model_info", random_info)
    ds = load_yolo_dataset(write_tiny_dataset(tmp_path), "val")
    rec = bench_combination(Combination(tiny, "onnxruntime", "fp32", 1), SETTINGS, frames, DeviceSpec("cpu"), ds)
    assert rec["random_weights"] is True
    assert rec["accuracy"]["status"] == "skipped" and "random-weight" in rec["accuracy"]["reason"]


@pytest.mark.parametrize(
    ("backend", "precision", "device", "expected"),
    [
        ("onnxruntime", "fp32", "cpu", None),
        ("onnxruntime", "fp16", "cpu", "GPU provider"),
        ("onnxruntime", "fp32", "cuda", "install onnxruntime-gpu"),  # this CPU-only build
        ("onnxruntime", "int8", "cpu", None),
        ("onnxruntime-device", "fp32", "cpu", None),
        ("onnxruntime-device", "fp16", "cpu", "GPU provider"),
        ("onnxruntime-device", "fp32", "cuda", "install onnxruntime-gpu"),
        ("torch", "int8", "cpu", "runs fp32, fp16, not int8"),
        ("torch", "fp16", "cpu", "needs a GPU"),
        ("torch", "fp16", "cuda", None),
        ("torch-device", "fp32", "cpu", None),
        ("torch-device", "fp16", "cpu", "needs a GPU"),
        ("torch-device", "int8", "cpu", "runs fp32, fp16, not int8"),
        ("torch-graphs", "fp32", "cpu", "CUDA graphs need"),
        ("torch-graphs", "fp16", "cuda", None),
        ("onnxruntime", "bf16", "cpu", "runs fp32, fp16, int8, not bf16"),
        pytest.param(*("openvino", "fp32", "cpu", None), marks=NEEDS_OPENVINO),
        pytest.param(*("openvino", "bf16", "cpu", None), marks=NEEDS_OPENVINO),
        pytest.param(*("openvino", "int8", "cpu", None), marks=NEEDS_OPENVINO),
        pytest.param(*("openvino", "fp16", "cpu", "runs fp32, bf16, int8, not fp16"), marks=NEEDS_OPENVINO),
        pytest.param(*("openvino", "fp32", "cuda", "runs on auto, cpu, gpu, npu, not cuda"), marks=NEEDS_OPENVINO),
    ],
)
def test_skip_rules(backend: str, precision: str, device: str, expected: str | None) -> None:
    reason = skip_reason(parse_model_ref("yolov8n.yaml"), backend, precision, device)
    assert reason is None if expected is None else expected in (reason or "")


def test_int8_on_a_gpu_provider_is_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxruntime as ort

    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert "QOperator" in (skip_reason(parse_model_ref("yolov8n.yaml"), "onnxruntime", "int8", "cuda") or "")
    assert skip_reason(parse_model_ref("yolov8n.yaml"), "onnxruntime", "fp16", "cuda") is None


def test_torch_missing_is_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert "pip install 'campusguard[torch]'" in (skip_reason(parse_model_ref("yolov8n.yaml"), "torch", "fp32", "cpu") or "")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": ["yolov8q"]}, "unknown model 'yolov8q'"),
        ({"models": []}, "at least one model"),
        ({"batches": [0]}, "batch size 0 must be at least 1"),
        ({"batches": []}, "at least one batch size"),
        ({"backends": ["tensorflow"]}, "unknown backend"),
        ({"precisions": ["int4"]}, "unknown precision"),
        ({"scenarios": ["server"]}, "unknown scenario"),
        ({"streams": 0}, "streams=0"),
    ],
)
def test_plan_matrix_rejects_bad_input(kwargs: dict, message: str) -> None:
    args = {
        "models": ["yolov8n.yaml"],
        "backends": ["onnxruntime"],
        "precisions": ["fp32"],
        "batches": [1],
        "scenarios": ["offline"],
        "streams": 4,
    }
    args.update(kwargs)
    with pytest.raises(InvalidInputError, match=message):
        plan_matrix(**args)


def test_plan_matrix_adds_batch_1_for_single_stream_and_multi_stream_runs() -> None:
    combos = plan_matrix(
        ["yolov8n.yaml"], ["onnxruntime"], ["fp32"], [8, 8], ["single-stream", "offline", "multi-stream"], 4
    )
    assert [(c.batch, c.scenario) for c in combos] == [(1, "batch"), (8, "batch"), (4, "multi-stream")]


def test_calibration_images_are_written_once_and_reused(tmp_path: Path) -> None:
    first = calibration_images(tmp_path, 5)
    again = calibration_images(tmp_path, 5)
    assert first == again and len(first) == 5 and all(p.is_file() for p in first)
    assert calibration_images(tmp_path, 3, sources=[Path("a.jpg")]) == [Path("a.jpg")] * 3
    with pytest.raises(InvalidInputError):
        calibration_images(tmp_path, 0)


def test_fix_input_shape_makes_a_dynamic_model_static(
    tiny: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnx
    import onnxruntime as ort

    from campusguard.bench.prepare import fix_input_shape

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    model = onnx.load(tiny)
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim, ["batch", "c", "h", "w"], strict=True):
        if name != "c":
            dim.dim_param = name
    dynamic = tmp_path / "dynamic.onnx"
    onnx.save(model, str(dynamic))
    fixed = fix_input_shape(dynamic, 2, (64, 64))
    assert fixed != dynamic and fixed.parent == tmp_path / "cache"
    assert ort.InferenceSession(str(fixed)).get_inputs()[0].shape == [2, 3, 64, 64]
    assert fix_input_shape(Path(tiny), 1, (64, 64)) == Path(tiny)  # already static: unchanged


@pytest.mark.torch
def test_torch_host_and_device_paths_are_bench_variants(frames: list) -> None:
    combos = plan_matrix(["yolov8n.yaml"], ["torch", "torch-device", "torch-graphs"], ["fp32"], [2], ["offline"])
    records = run_matrix(combos, SETTINGS, frames, calibration=None)
    by = {r["backend"]: r for r in records}
    assert by["torch"]["status"] == by["torch-device"]["status"] == "ok"
    assert by["torch"]["provider"] == "torch:cpu" and by["torch-device"]["provider"] == "torch-device:cpu"
    assert by["torch-device"]["throughput_ips"] > 0 and by["torch-device"]["export"] is None
    assert by["torch-graphs"]["status"] == "skipped" and "CUDA graphs" in by["torch-graphs"]["reason"]
    settings = {"models": ["yolov8n.yaml"], "backends": list(by), "precisions": ["fp32"], "batch": [2]}
    validate_result(build_result(records, SETTINGS, settings, "cpu-test", "cmd", {}, 0.001))


@NEEDS_OPENVINO
def test_openvino_fp32_and_bf16_are_bench_variants_and_their_results_validate(tiny: str, frames: list) -> None:
    from campusguard.precision import cpu_has_bf16

    precisions = ["fp32", "bf16"] if cpu_has_bf16() else ["fp32"]
    recs = [
        bench_combination(Combination(tiny, "openvino", p, 1), SETTINGS, frames, DeviceSpec("cpu")) for p in precisions
    ]
    assert [r["status"] for r in recs] == ["ok"] * len(recs), [r["reason"] for r in recs]
    assert [r["provider"] for r in recs] == [f"OpenVINO:CPU:{p}" for p in precisions]  # the precision really run
    config = {"models": [tiny], "backends": ["openvino"], "precisions": precisions, "batch": [1]}
    validate_result(build_result(recs, SETTINGS, config, "cpu-test", "cmd", {}, 0.001))
