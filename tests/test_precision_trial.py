"""`precision: auto` by measurement: the timed trial of a model's variants, its accuracy guard and its cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.detector import Detector
from campusguard.errors import InvalidInputError
from campusguard.models.resolve import DEFAULT_MODEL
from campusguard.precision import run_trial, shipped_variants, trial_frames
from campusguard.precision_cache import cached_calibrations, calibrate, calibration_file, load_calibration, trial_key

IMGSZ = (224, 224)  # small, so the trial is quick; the 16:9 trial frames run at 128x224


class CountingBuilds:
    """The real detector factory, counting the detectors (ONNX Runtime sessions) it builds."""

    def __init__(self, imgsz: tuple[int, int] = IMGSZ) -> None:
        self.imgsz = imgsz
        self.built: list[Path] = []

    def __call__(self, path: Path) -> Detector:
        self.built.append(path)
        return Detector(path, device="cpu", imgsz=self.imgsz, threads=1)


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(root))
    return root


def _consistent(result, min_gain: float = 0.05) -> None:
    """The choice follows from the figures: the fastest accepted variant when it beats FP32 by ``min_gain``."""
    by = {v.precision: v for v in result.variants}
    assert all(v.ms > 0 and v.runs >= 3 for v in result.variants)
    accepted = [v for v in result.variants if v.accepted and v.precision != "fp32"]
    best = min(accepted, key=lambda v: v.ms, default=None)
    if best is not None and best.ms <= by["fp32"].ms * (1 - min_gain):
        assert result.chosen == best.precision
    else:
        assert result.chosen == "fp32"
    assert result.model == by[result.chosen].model


def test_the_trial_picks_a_variant_and_a_second_start_reads_it_without_building_anything(own_cache: Path) -> None:
    variants = shipped_variants(DEFAULT_MODEL, "cpu")
    assert set(variants) == {"fp32", "int8"}  # the bundled model ships its INT8 file; FP16 is for GPUs
    builds = CountingBuilds()
    first, cached = calibrate(variants, builds, imgsz=IMGSZ, budget_s=1.0)
    assert not cached and sorted(p.name for p in builds.built) == sorted(p.name for p in variants.values())
    _consistent(first.result)
    assert first.result.input_hw == (128, 224)
    assert first.result.variants[1].parity.startswith("parity on 6 image(s)")  # INT8 checked against FP32
    path = calibration_file(first.key)
    assert path.parent.parent == own_cache and json.loads(path.read_text())["result"]["chosen"] == first.result.chosen

    again, cached = calibrate(variants, builds, imgsz=IMGSZ, budget_s=1.0)
    assert cached and len(builds.built) == 2  # no detector built: no session, no timing
    assert again == first
    assert cached_calibrations() == [first]


def test_the_key_follows_the_files_the_shape_and_the_provider(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(DEFAULT_MODEL.read_bytes())
    (tmp_path / "m.int8.onnx").write_bytes(b"int8")
    variants = shipped_variants(model, "cpu")
    key = trial_key(variants, imgsz=IMGSZ)
    assert key == trial_key(variants, imgsz=IMGSZ) and key.digest() == trial_key(variants, imgsz=IMGSZ).digest()
    assert trial_key(variants, imgsz=(320, 320)) != key
    assert trial_key(variants, imgsz=IMGSZ, provider="OpenVINOExecutionProvider") != key
    os.utime(tmp_path / "m.int8.onnx", ns=(1, 1))  # a replaced INT8 file is measured again
    assert trial_key(variants, imgsz=IMGSZ) != key
    assert key.cpu and key.onnxruntime


@pytest.mark.parametrize("content", ["{not json", '{"version": 1, "key": {}}', "[]"])
def test_a_corrupt_cache_file_is_ignored_and_rewritten(content: str) -> None:
    variants = shipped_variants(DEFAULT_MODEL, "cpu")
    key = trial_key(variants, imgsz=IMGSZ)
    path = calibration_file(key)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert load_calibration(key) is None
    builds = CountingBuilds()
    calibration, cached = calibrate(variants, builds, imgsz=IMGSZ, budget_s=0.5)
    assert not cached and len(builds.built) == 2
    assert load_calibration(key) == calibration  # rewritten whole


def test_a_stored_trial_for_another_key_is_not_used() -> None:
    variants = shipped_variants(DEFAULT_MODEL, "cpu")
    other, _ = calibrate(variants, CountingBuilds((160, 160)), imgsz=(160, 160), budget_s=0.5)
    key = trial_key(variants, imgsz=IMGSZ)
    calibration_file(key).write_text(calibration_file(other.key).read_text())  # right name, wrong content
    assert load_calibration(key) is None


def test_the_accuracy_guard_refuses_an_int8_file_whose_boxes_disagree(tmp_path: Path) -> None:
    """A real quantisation with bad settings: calibrated on one black image, full-range weights."""
    from campusguard.models.export import quantize_int8

    black = tmp_path / "black.png"
    cv2.imwrite(str(black), np.zeros((64, 64, 3), np.uint8))
    bad = quantize_int8(DEFAULT_MODEL, tmp_path / "bad.int8.onnx", [black], calib_hw=(160, 160), reduce_range=False)
    result = run_trial(
        {"fp32": DEFAULT_MODEL, "int8": bad},
        CountingBuilds((320, 320)),
        trial_frames((360, 640), 6),
        budget_s=0.5,
    )
    int8 = result.variants[1]
    assert not int8.accepted and "of FP32's boxes" in int8.note, int8
    assert result.chosen == "fp32" and result.model == str(DEFAULT_MODEL)
    assert "INT8 refused" in result.reason and "(refused)" in result.line()


def test_the_trial_needs_the_fp32_reference_and_frames() -> None:
    frames = trial_frames((360, 640), 1)
    with pytest.raises(InvalidInputError, match="FP32 model as its reference"):
        run_trial({"int8": DEFAULT_MODEL}, CountingBuilds(), frames)
    with pytest.raises(InvalidInputError, match="needs frames"):
        run_trial({"fp32": DEFAULT_MODEL}, CountingBuilds(), [])
    with pytest.raises(InvalidInputError, match="trial frames"):
        trial_frames((8, 8), 1)


def test_a_model_with_one_variant_keeps_fp32_and_says_so() -> None:
    result = run_trial({"fp32": DEFAULT_MODEL}, CountingBuilds((160, 160)), trial_frames((360, 640), 2), budget_s=0.2)
    assert result.chosen == "fp32" and "no other variant" in result.reason
    assert [v.precision for v in result.variants] == ["fp32"] and result.variants[0].runs >= 3


def test_the_export_bar_passes_fails_and_says_when_too_few_boxes_to_tell() -> None:
    from campusguard.models.parity import PARITY_THRESHOLDS, ParityReport

    bar = PARITY_THRESHOLDS["int8"]

    def report(ref: int, matched: int, iou: float) -> ParityReport:
        return ParityReport(
            images=4, reference_boxes=ref, candidate_boxes=matched, matched=matched, mean_iou=iou,
            kept_share=matched / ref if ref else 1.0, max_conf_diff=0.1,
        )  # fmt: skip

    assert bar.failure(report(50, 45, 0.95)) is None
    assert "keeps 70.0%" in str(bar.failure(report(50, 35, 0.95)))
    assert "mean matched IoU 0.850" in str(bar.failure(report(50, 45, 0.85)))
    assert not bar.conclusive(report(10, 10, 1.0)) and "fewer than the 20" in str(bar.failure(report(10, 10, 1.0)))
    assert PARITY_THRESHOLDS["fp16"].min_kept > bar.min_kept


def test_a_variant_file_that_does_not_load_is_refused_and_fp32_runs(tmp_path: Path) -> None:
    broken = tmp_path / "m.int8.onnx"
    broken.write_bytes(b"not an onnx model")
    builds = CountingBuilds((160, 160))
    result = run_trial({"fp32": DEFAULT_MODEL, "int8": broken}, builds, trial_frames((360, 640), 2), budget_s=0.2)
    int8 = result.variants[1]
    assert result.chosen == "fp32" and not int8.accepted and int8.runs == 0
    assert int8.note.startswith("cannot load:") and "INT8 refused: cannot load" in result.reason
    assert "int8 not run (refused)" in result.line()


# the engine trial: every backend and precision, chosen by the same timing and accuracy bar ---------
class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeDetector:
    """Takes ``ms`` of the fake clock per frame and finds ``boxes`` (the same for every frame)."""

    def __init__(self, clock: FakeClock, ms: float, boxes) -> None:
        self.clock, self.ms, self.boxes = clock, ms, boxes

    def predict_batch(self, images: list[np.ndarray]) -> list:
        self.clock.t += self.ms / 1000 * len(images)
        return [self.boxes] * len(images)

    def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
        return (128, 224)


def _boxes(make_detections, shift: float = 0.0):
    xy = np.array([[10 + 30 * i, 10, 30 + 30 * i, 50] for i in range(25)], np.float32) + shift
    return make_detections(xyxy=xy, confidence=np.full(25, 0.9, np.float32), class_id=np.zeros(25, np.int64))


def _engine_trial(make_detections, ms: dict[str, float], wrong: tuple[str, ...] = (), among=None):
    clock = FakeClock()
    good, bad = _boxes(make_detections), _boxes(make_detections, shift=15.0)

    def make(path: Path, backend: str | None = None, precision: str | None = None) -> FakeDetector:
        label = (
            "fp32"
            if backend is None and path == DEFAULT_MODEL
            else (path.name if backend is None else f"{backend}-{precision}")
        )
        return FakeDetector(clock, ms[label], bad if label in wrong else good)

    variants = {label: (DEFAULT_MODEL if label == "fp32" or "-" in label else Path(label)) for label in ms}
    return run_trial(variants, make, trial_frames((360, 640), 2), budget_s=10.0, clock=clock, among=among)


@pytest.mark.parametrize(
    ("ms", "wrong", "chosen"),
    [
        ({"fp32": 20.0, "int8": 14.0, "openvino-fp32": 25.0, "openvino-bf16": 22.0}, (), "int8"),  # OV slower: never
        ({"fp32": 20.0, "int8": 14.0, "openvino-fp32": 15.0, "openvino-bf16": 14.5}, (), "int8"),  # not faster: no
        ({"fp32": 20.0, "openvino-bf16": 19.4}, (), "fp32"),  # 3% faster is not the 5% a switch needs
        ({"fp32": 20.0, "int8": 14.0, "openvino-bf16": 6.3}, (), "openvino-bf16"),  # where it wins, it is chosen
        ({"fp32": 20.0, "int8": 14.0, "openvino-bf16": 6.3}, ("openvino-bf16",), "int8"),  # but not with wrong boxes
    ],
)
def test_the_engine_trial_picks_openvino_only_where_it_is_faster_and_keeps_the_boxes(
    make_detections, ms: dict[str, float], wrong: tuple[str, ...], chosen: str
) -> None:
    """Target 2: on a CPU where OpenVINO is not faster, `auto` never picks it."""
    result = _engine_trial(make_detections, ms, wrong)
    assert result.chosen == chosen, result.line()
    assert all(v.runs >= 3 for v in result.variants)
    fastest_ok = min(ms[v.precision] for v in result.variants if v.accepted)
    assert ms[chosen] <= max(fastest_ok, ms["fp32"]) * 1.05  # never more than 5% slower than the best accepted
    assert (result.backend, result.precision) == (
        ("openvino", "bf16") if chosen == "openvino-bf16" else ("onnxruntime", chosen)
    )


def test_a_forced_backend_chooses_among_its_own_variants_with_fp32_as_the_reference(make_detections) -> None:
    ms = {"fp32": 10.0, "openvino-fp32": 30.0, "openvino-bf16": 20.0}
    assert _engine_trial(make_detections, ms, among=["openvino-fp32", "openvino-bf16"]).chosen == "openvino-bf16"
    refused = _engine_trial(make_detections, ms, ("openvino-bf16",), among=["openvino-fp32", "openvino-bf16"])
    assert refused.chosen == "openvino-fp32" and not refused.variants[2].accepted


def test_the_candidates_are_every_installed_backend_and_precision(tmp_path: Path) -> None:
    import importlib.util

    from campusguard.precision import trial_candidates

    model = tmp_path / "m.onnx"
    model.write_bytes(DEFAULT_MODEL.read_bytes())
    (tmp_path / "m.int8.onnx").write_bytes(b"int8")
    (tmp_path / "m.int8ov.xml").write_bytes(b"<net/>")
    has_ov = importlib.util.find_spec("openvino") is not None
    expected = {"fp32": model, "int8": tmp_path / "m.int8.onnx"}
    if has_ov:
        expected |= {"openvino-fp32": model, "openvino-bf16": model, "openvino-int8ov": tmp_path / "m.int8ov.xml"}
    assert trial_candidates(model, flags=["avx512_bf16"]) == expected
    assert "openvino-bf16" not in trial_candidates(model, flags=["avx2"])  # no BF16 instructions, no BF16 candidate
    assert set(trial_candidates(model, backend="onnxruntime")) == {"fp32", "int8"}


def test_the_trial_times_two_frames_a_call_per_frame(make_detections) -> None:
    """The timed rounds call each variant with two frames (the service's busy batch path) and report
    milliseconds per frame, so a fake taking 10 ms a frame reads 10 ms, not 20."""
    clock = FakeClock()
    calls: list[int] = []

    class Recording(FakeDetector):
        def predict_batch(self, images: list[np.ndarray]) -> list:
            calls.append(len(images))
            return super().predict_batch(images)

    boxes = _boxes(make_detections)
    result = run_trial(
        {"fp32": DEFAULT_MODEL, "int8": Path("int8.onnx")},
        lambda path, **_: Recording(clock, 10.0 if path == DEFAULT_MODEL else 7.0, boxes),
        trial_frames((360, 640), 3),
        budget_s=10.0,
        clock=clock,
    )
    warm_up = 2 * 3  # each variant sees every frame alone first (its boxes for the accuracy check)
    assert calls[:warm_up] == [1] * warm_up and set(calls[warm_up:]) == {2}
    assert [v.ms for v in result.variants] == [pytest.approx(10.0), pytest.approx(7.0)]
    with pytest.raises(InvalidInputError, match="batch 0"):
        run_trial({"fp32": DEFAULT_MODEL}, lambda p, **_: Recording(clock, 1.0, boxes), [np.zeros((8, 8, 3))], batch=0)
