"""The OpenVINO backend: box parity with ONNX Runtime, devices, precisions, the compiled-model cache, NNCF INT8."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path

import numpy as np
import pytest

from campusguard.detector import Detector
from campusguard.errors import DeviceError, InvalidInputError, MissingDependencyError
from campusguard.models.parity import PARITY_THRESHOLDS, compare_detections, match_detections
from campusguard.models.resolve import DEFAULT_MODEL
from campusguard.precision import cpu_has_bf16, trial_frames

pytestmark = pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs the openvino extra")

SYNTH_HW = (288, 480)  # the example config's size for 16:9 cameras


@pytest.fixture(autouse=True)
def own_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def synthetic() -> list[np.ndarray]:
    """Seven frames of the synthetic campus scene (people, bicycles, vehicles), 720x1280."""
    return trial_frames(count=7)


def _precisions() -> list[str]:
    return ["fp32", "bf16"] if cpu_has_bf16() else ["fp32"]


def _parity(pairs: list[tuple[Detector, Detector, list[np.ndarray]]]) -> tuple[int, int, float]:
    """Images whose box counts differ, images compared, and the median IoU of the matched boxes."""
    differ = images = 0
    ious: list[float] = []
    for reference, candidate, frames in pairs:
        for frame in frames:
            r, c = reference(frame), candidate(frame)
            images += 1
            differ += len(r) != len(c)
            ious.extend(match_detections(r, c, min_iou=0.5)[2].tolist())
    return differ, images, statistics.median(ious)


@pytest.mark.torch
@pytest.mark.parametrize("precision", _precisions())
def test_openvino_keeps_onnxruntime_boxes_on_real_photos_and_synthetic_frames(
    precision: str, assets_dir: Path, fall_onnx_dynamic: Path, synthetic: list[np.ndarray]
) -> None:
    """Target 3: of 9 images (bus.jpg and zidane.jpg through the real YOLOv8s, 7 synthetic frames through the
    bundled model) none with a different box count, median IoU >= 0.98, at the same thresholds."""
    from campusguard.io.images import read_image

    photos = [read_image(assets_dir / n) for n in ("bus.jpg", "zidane.jpg")]
    ov_real = Detector(fall_onnx_dynamic, device="cpu", imgsz=640, backend="openvino", precision=precision)
    ov_synth = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW, backend="openvino", precision=precision)
    assert ov_real.provider == f"OpenVINO:CPU:{precision}"  # what the CPU plugin really runs, read back
    pairs = [
        (Detector(fall_onnx_dynamic, device="cpu", imgsz=640), ov_real, photos),
        (Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW), ov_synth, synthetic),
    ]
    differ, images, median_iou = _parity(pairs)
    assert images == 9
    assert differ == 0
    assert median_iou >= (0.9999 if precision == "fp32" else 0.98)


def test_openvino_fp32_matches_onnxruntime_numerically_on_the_bundled_model(synthetic: list[np.ndarray]) -> None:
    from campusguard.ops.preprocess import letterbox, make_batch

    ort = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW)
    ov = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW, backend="openvino", precision="fp32")
    x = make_batch([letterbox(synthetic[0], SYNTH_HW)[0]])
    np.testing.assert_allclose(ov.backend.infer(x), ort.backend.infer(x), atol=2e-2, rtol=1e-3)


def test_the_uint8_frames_give_the_float_tensors_output(synthetic: list[np.ndarray]) -> None:
    """The detector hands OpenVINO the letterboxed uint8 BGR frames (its graph swaps, casts and scales them):
    at FP32 the head output is the float tensor's, to rounding."""
    from campusguard.backends.base import takes_bgr_uint8
    from campusguard.ops.preprocess import letterbox, make_batch

    ov = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW, backend="openvino", precision="fp32")
    assert takes_bgr_uint8(ov.backend) and not takes_bgr_uint8(Detector(DEFAULT_MODEL, device="cpu").backend)
    frames = [letterbox(f, SYNTH_HW)[0] for f in synthetic[:2]]
    from_float = ov.backend.infer(make_batch(frames))
    from_uint8 = ov.backend.infer(np.stack(frames))
    assert from_uint8.shape == from_float.shape
    np.testing.assert_allclose(from_uint8, from_float, atol=2e-2, rtol=1e-3)


def test_the_compiled_model_is_cached_per_model_shape_and_precision(own_cache: Path) -> None:
    from campusguard.backends.openvino_backend import OpenVinoBackend

    x = np.zeros((1, 3, 160, 256), np.float32)
    first = OpenVinoBackend(DEFAULT_MODEL, device="cpu", precision="fp32")
    first.infer(x)
    assert first.cache is not None and first.cache.parent == own_cache / "openvino"
    assert "1x3x160x256" in first.cache.name and first.cache.name.endswith("cpu-fp32")
    assert any(first.cache.iterdir())  # OpenVINO wrote the compiled blob
    again = OpenVinoBackend(DEFAULT_MODEL, device="cpu", precision="fp32")
    again.infer(x)
    assert again.cache == first.cache  # a restart finds it
    other = OpenVinoBackend(DEFAULT_MODEL, device="cpu", precision="fp32")
    other.infer(np.zeros((1, 3, 192, 320), np.float32))
    assert other.cache != first.cache  # another shape, another cache


@pytest.mark.parametrize(
    ("device", "message"),
    [("cuda:0", "OpenVINO runs on cpu, gpu"), ("rocm:1", "OpenVINO runs on cpu, gpu"), ("tpu", "OpenVINO runs on")],
)
def test_a_device_openvino_has_no_name_for_is_a_one_line_error(device: str, message: str) -> None:
    with pytest.raises(DeviceError, match=message):
        Detector(DEFAULT_MODEL, device=device, backend="openvino")


def test_a_missing_device_is_an_error_unless_the_cpu_fallback_is_allowed() -> None:
    import openvino as ov

    if "NPU" in ov.Core().available_devices:
        pytest.skip("this machine has an NPU")
    with pytest.raises(DeviceError, match="npu requested but OpenVINO sees only"):
        Detector(DEFAULT_MODEL, device="npu", backend="openvino")
    det = Detector(DEFAULT_MODEL, device="npu", backend="openvino", allow_cpu_fallback=True, imgsz=SYNTH_HW)
    assert det.provider.startswith("OpenVINO:CPU:")


def test_bad_precisions_are_one_line_errors() -> None:
    with pytest.raises(InvalidInputError, match="runs fp32, bf16, int8, not 'fp16'"):
        Detector(DEFAULT_MODEL, device="cpu", backend="openvino", precision="fp16")
    with pytest.raises(InvalidInputError, match="runs fp32, fp16, int8, not 'bf16'"):
        Detector(DEFAULT_MODEL, device="cpu", precision="bf16")  # ONNX Runtime has no BF16


def test_without_the_extra_loading_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name, *a))
    with pytest.raises(MissingDependencyError, match=r"pip install 'campusguard\[openvino\]'"):
        Detector(DEFAULT_MODEL, device="cpu", backend="openvino")


@pytest.mark.skipif(importlib.util.find_spec("nncf") is None, reason="needs nncf (the openvino extra)")
def test_nncf_int8_is_an_openvino_ir_within_the_int8_bar(tmp_path: Path, synthetic: list[np.ndarray]) -> None:
    import cv2
    import openvino as ov

    from campusguard.backends.openvino_backend import quantize_int8_nncf

    calib = []
    for i, frame in enumerate(trial_frames(count=8, seed=1)):
        calib.append(tmp_path / f"c{i}.jpg")
        cv2.imwrite(str(calib[-1]), frame)
    out = quantize_int8_nncf(DEFAULT_MODEL, tmp_path / "m.int8ov.xml", calib, calib_hw=SYNTH_HW)
    assert out.with_suffix(".bin").is_file()
    ops = {op.get_type_name() for op in ov.Core().read_model(str(out)).get_ops()}
    assert "FakeQuantize" in ops
    assert not unfused_silus(out)  # each Conv's SiLU is a Swish the CPU plugin fuses into the INT8 convolution
    reference = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW)
    on_ov = Detector(out, device="cpu", imgsz=SYNTH_HW)  # an .xml goes to OpenVINO by itself
    assert on_ov.provider.startswith("OpenVINO:CPU:")
    assert on_ov.info.precision == "int8" and on_ov.info.names == reference.info.names  # metadata kept
    report = compare_detections(reference.predict_batch(synthetic), on_ov.predict_batch(synthetic))
    assert PARITY_THRESHOLDS["int8ov"].failure(report) is None, report.line()
    with pytest.raises(InvalidInputError, match="runs an .onnx file|needs an .onnx file"):
        Detector(out, device="cpu", backend="onnxruntime")


def unfused_silus(ir: Path) -> list[str]:
    """The Sigmoid ops of an IR outside the detection head's float decode: each is a SiLU left as Sigmoid and
    Multiply with FakeQuantize between them, which the CPU plugin cannot fuse into the convolution before it.
    Quantising the ONNX graph as read (a bias Add of ShapeOf and Broadcast, no Swish) left 57 of them in the first
    shipped IR; on the AMD EPYC with VNNI they ran as separate BF16 subgraphs, 38% of its time."""
    import openvino as ov

    from campusguard.models.export import head_float_nodes

    head = set(head_float_nodes(DEFAULT_MODEL))
    model = ov.Core().read_model(str(ir))
    return [
        op.get_friendly_name()
        for op in model.get_ops()
        if op.get_type_name() == "Sigmoid" and op.get_friendly_name() not in head
    ]


def test_the_bundled_int8_ir_has_every_silu_fused() -> None:
    assert not unfused_silus(DEFAULT_MODEL.with_name("campusguard-default-int8ov.xml"))


def test_the_bundled_int8_ir_is_a_trial_candidate_that_loads_and_keeps_the_boxes(synthetic: list[np.ndarray]) -> None:
    """The shipped NNCF IR (`campusguard-default-int8ov.xml`) is in the engine trial, built from its file (INT8 is
    the IR, not a compiled precision: the trial used to ask the backend for precision ``int8ov`` and refuse it)."""
    from campusguard.precision import run_trial, trial_candidates

    variants = trial_candidates(DEFAULT_MODEL)
    assert variants["openvino-int8ov"] == DEFAULT_MODEL.with_name("campusguard-default-int8ov.xml")

    def make(path: Path, backend: str | None = None, precision: str | None = None) -> Detector:
        return Detector(path, device="cpu", imgsz=SYNTH_HW, backend=backend, precision=precision)

    result = run_trial(
        {"fp32": variants["fp32"], "openvino-int8ov": variants["openvino-int8ov"]},
        make,
        synthetic[:4],
        budget_s=0.1,
        min_rounds=1,
        max_rounds=1,
    )
    (timing,) = [t for t in result.variants if t.precision == "openvino-int8ov"]
    assert timing.runs == 1 and timing.accepted and not timing.note, result.line()


@pytest.mark.parametrize("name", ["campusguard-default.onnx", "campusguard-default-int8ov.xml"])
def test_a_batch_runs_on_the_throughput_streams_with_the_boxes_of_one_frame_at_a_time(
    name: str, synthetic: list[np.ndarray]
) -> None:
    """Several frames go one per request on OpenVINO's THROUGHPUT streams (`OpenVinoBackend.start`); each frame's
    boxes are those it gets alone (the latency-compiled request), in the batch's order, batch 5 over 2 streams."""
    det = Detector(DEFAULT_MODEL.with_name(name), device="cpu", imgsz=SYNTH_HW, backend="openvino")
    frames = synthetic[:5]
    alone = [det(f) for f in frames]
    together = det.predict_batch(frames)
    backend = det.backend
    assert backend._streams and all(len(reqs) >= 1 for _, reqs in backend._streams.values())  # type: ignore[attr-defined]
    for a, b in zip(alone, together, strict=True):
        assert len(a) == len(b) and len(a) > 0
        matched = match_detections(a, b, min_iou=0.5)[2]
        assert len(matched) == len(a) and float(matched.min()) > 0.98


def test_two_submissions_in_flight_come_back_in_order_with_the_boxes_of_each(synthetic: list[np.ndarray]) -> None:
    """`Detector.submit` on the service's OpenVINO detector returns while the streams run (``running``); a second
    batch started before the first is collected queues behind it, and each collects its own frames' boxes."""
    det = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW, backend="openvino", throughput=True)
    first, second = synthetic[:3], synthetic[3:5]
    alone = [det(f) for f in synthetic[:5]]
    p1, p2 = det.submit(first), det.submit(second)
    assert p1.running and p2.running
    got = det.collect(p1) + det.collect(p2)
    assert not p1.running and det.collect(p1) == got[:3]  # collected once, kept
    for a, b in zip(alone, got, strict=True):
        matched = match_detections(a, b, min_iou=0.5)[2]
        assert len(a) == len(b) > 0 and len(matched) == len(a) and float(matched.min()) > 0.98
    # every request went back to the pool: one per stream at first, more made while both batches held them
    ((compiled, idle),) = det.backend._streams.values()  # type: ignore[attr-defined]
    assert len(idle) == max(5, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")))


def test_an_onnxruntime_submission_has_finished_when_submit_returns(synthetic: list[np.ndarray]) -> None:
    det = Detector(DEFAULT_MODEL, device="cpu", imgsz=SYNTH_HW)
    pending = det.submit(synthetic[:2])
    assert not pending.running
    assert [len(d) for d in det.collect(pending)] == [len(d) for d in det.predict_batch(synthetic[:2])]


@pytest.mark.skipif(importlib.util.find_spec("nncf") is None, reason="needs NNCF")
def test_the_int8_export_sends_no_telemetry() -> None:
    """NNCF sends usage events to Google Analytics by default outside pytest; the export imports it with its
    telemetry swapped for the stub. Run in a fresh interpreter without pytest (pytest itself silences NNCF)."""
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('NNCF_CI', None); os.environ.pop('NNCF_DEV', None)\n"
        "from campusguard.backends.openvino_backend import import_nncf_quietly\n"
        "import_nncf_quietly()\n"
        "from nncf.telemetry.wrapper import telemetry\n"
        "print(type(telemetry).__name__)\n"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout.strip().splitlines()[-1] == "MagicMock"  # NNCF's stub (`NNCFTelemetryStub = MagicMock`)
    plain = (
        "import os; os.environ.pop('NNCF_CI', None)\n"
        "from nncf.telemetry.wrapper import telemetry\n"
        "print(type(telemetry).__name__)"
    )
    loud = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=300)
    assert loud.stdout.strip().splitlines()[-1] == "NNCFTelemetry"  # what the export would have used


def test_a_service_detector_runs_even_one_frame_on_a_stream(synthetic: list[np.ndarray]) -> None:
    """``throughput=True`` (what the app's wiring asks for): a single frame goes to one THROUGHPUT stream
    (one thread, less CPU), never to the latency-compiled request; its boxes are the latency path's."""
    path = DEFAULT_MODEL.with_name("campusguard-default-int8ov.xml")
    lean = Detector(path, device="cpu", imgsz=SYNTH_HW, backend="openvino", throughput=True)
    quick = Detector(path, device="cpu", imgsz=SYNTH_HW, backend="openvino")
    for frame in synthetic[:3]:
        a, b = lean(frame), quick(frame)
        matched = match_detections(a, b, min_iou=0.5)[2]
        assert len(a) == len(b) == len(matched) > 0 and float(matched.min()) > 0.98
    assert lean.backend._streams and not lean.backend._compiled  # type: ignore[attr-defined]
    assert quick.backend._compiled and not quick.backend._streams  # type: ignore[attr-defined]


def test_warm_up_compiles_what_a_cameras_frames_will_run() -> None:
    """`Detector.warm_up` at a 640x360 camera's size: the service's one-frame stream model for the uint8 288x480
    input is compiled before the first frame, and that frame finds it."""
    det = Detector(DEFAULT_MODEL, device="cpu", imgsz=480, backend="openvino", throughput=True)
    assert not det.backend._streams  # type: ignore[attr-defined]
    det.warm_up((360, 640))
    assert set(det.backend._streams) == {(1, 288, 480, 3)}  # type: ignore[attr-defined]
    det(np.zeros((360, 640, 3), np.uint8))
    assert set(det.backend._streams) == {(1, 288, 480, 3)}  # type: ignore[attr-defined]


def test_a_compile_error_carries_openvinos_whole_reason(tmp_path: Path) -> None:
    """Issue 41: OpenVINO's text starts with the source locations it passed through (``core.cpp:117:``) and ends
    with the reason; the error kept only its first line, a location. A real compile failure (a performance hint
    OpenVINO refuses) now names the reason, on one line, without the locations."""
    from campusguard.backends.openvino_backend import OpenVinoBackend
    from campusguard.errors import ModelLoadError

    backend = OpenVinoBackend(DEFAULT_MODEL, device="cpu", cache_root=tmp_path / "ov")
    with pytest.raises(ModelLoadError) as caught:
        backend._compile((1, 3, 64, 64), hint="BOGUS")
    message = str(caught.value)
    assert "Wrong value BOGUS" in message and "PERFORMANCE_HINT" in message, message
    assert "core.cpp" not in message and "\n" not in message
    assert message.startswith(f"{DEFAULT_MODEL}: OpenVINO cannot compile this model for CPU (")
    assert "core.cpp:117" in str(caught.value.__cause__)  # OpenVINO's own text began with the location


def test_a_compile_waits_for_another_process_compiling_into_its_cache(tmp_path: Path) -> None:
    """Two processes loading one model (two camera groups on one node) compile into one cache directory one at a
    time: while this process holds ``<cache>.lock``, a second one's compile waits, and finishes once it is let go."""
    import fcntl
    import subprocess
    import sys
    import time

    from campusguard.backends.openvino_backend import _file_digest, compiled_cache_dir

    cache = compiled_cache_dir(
        _file_digest(DEFAULT_MODEL), DEFAULT_MODEL.stem, (1, 3, 320, 320), "cpu-default", tmp_path
    )
    code = (
        "import sys; from pathlib import Path; import numpy as np\n"
        "from campusguard.backends.openvino_backend import OpenVinoBackend\n"
        "b = OpenVinoBackend(Path(sys.argv[1]), device='cpu', cache_root=Path(sys.argv[2]))\n"
        "b.infer(np.zeros((1, 3, 320, 320), np.float32)); print(b.cache)\n"
    )
    cache.parent.mkdir(parents=True, exist_ok=True)
    with open(cache.with_name(cache.name + ".lock"), "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = subprocess.Popen(
            [sys.executable, "-c", code, str(DEFAULT_MODEL), str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        time.sleep(8)  # long enough to read the model and reach the compile (about 2 s on a busy 2-core machine)
        waiting = proc.poll() is None and not any(cache.glob("*.blob"))
        fcntl.flock(held, fcntl.LOCK_UN)
    out = proc.communicate(timeout=300)[0].strip()
    assert waiting, "the second compile did not wait for the lock"
    assert proc.returncode == 0 and Path(out) == cache and any(cache.glob("*.blob"))
