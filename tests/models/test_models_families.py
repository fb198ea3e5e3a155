"""The one table of model families: names, yaml names, end-to-end flags, read by resolution and training."""

from __future__ import annotations

import pytest

from campusguard.errors import InvalidInputError
from campusguard.models.families import ARCHITECTURES, FAMILIES, find_architecture
from campusguard.models.resolve import parse_model_ref
from campusguard.train.trainer import resolve_model_spec


def test_table_has_every_family_at_every_size():
    assert [f.title for f in FAMILIES] == ["YOLOv8", "YOLO11", "YOLO26"]
    assert len(ARCHITECTURES) == 15
    assert [a.name for a in ARCHITECTURES.values() if a.end_to_end] == [f"yolo26{s}" for s in "nsmlx"]
    assert ARCHITECTURES["yolo11m"].yaml == "yolo11m.yaml"


@pytest.mark.parametrize("text", ["yolo26n", "YOLO26n", "yolo26n.yaml", " yolo26n "])
def test_names_and_yaml_names_find_the_architecture(text):
    arch = find_architecture(text)
    assert arch is not None and arch.name == "yolo26n" and arch.end_to_end


@pytest.mark.parametrize("text", ["yolo27n", "yolo26", "configs/yolo26n.yaml", "yolo26n.pt"])
def test_other_text_is_no_architecture(text):
    assert find_architecture(text) is None


@pytest.mark.parametrize("text", ["yolo26n.yaml", "yolo11x.yaml", "yolov8s.yaml"])
def test_model_resolution_reads_the_table(text):
    ref = parse_model_ref(text)
    assert ref.kind == "arch" and ref.name == text.removesuffix(".yaml")


def test_unknown_model_names_the_families():
    with pytest.raises(InvalidInputError, match="yolo26n"):
        parse_model_ref("yolo27n")


@pytest.mark.parametrize(("text", "spec"), [("yolo26n.yaml", "yolo26n.yaml"), ("YOLO11s.yaml", "yolo11s.yaml")])
def test_training_reads_the_table(text, spec):
    assert resolve_model_spec(text) == (spec, False)


def test_training_prefers_a_real_yaml_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "yolo26n.yaml").write_text("nc: 2\n")
    assert resolve_model_spec("yolo26n.yaml") == (str(tmp_path / "yolo26n.yaml"), False)


@pytest.mark.torch
@pytest.mark.parametrize(
    ("name", "end_to_end"), [("yolov8n.yaml", False), ("yolo11n.yaml", False), ("yolo26n.yaml", True)]
)
def test_every_family_builds_with_its_head(name, end_to_end):
    from campusguard.models.resolve import read_model_info

    info = read_model_info(parse_model_ref(name))
    assert info.random_weights
    assert info.end_to_end is end_to_end
    assert info.nms == ("in-model" if end_to_end else "campusguard")


@pytest.mark.torch
def test_asking_a_classic_family_for_an_end_to_end_head_is_one_line():
    from campusguard.detector import Detector

    with pytest.raises(InvalidInputError, match="no end-to-end"):
        Detector("yolov8n.yaml", backend="torch", device="cpu", head="end2end")
