"""Model names as Ultralytics reads them: ``yolov8n`` / ``yolov8n.pt`` are the official trained weights,
``yolov8n.yaml`` the bare architecture with random weights, and a local file of the name wins.

No test downloads: the cache is an empty folder and CAMPUSGUARD_OFFLINE is set, so a trained name
that is not cached must give the one-line offline error naming ``campusguard models pull``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.families import (
    ARCHITECTURES,
    architecture_config,
    find_architecture,
    head_end_to_end,
    official_weights_name,
)
from campusguard.models.resolve import ModelRef, parse_model_ref

CHECKPOINT = Path(__file__).parents[1] / "data" / "models" / "yolo26n-campus.pt"


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, offline; the working folder holds no checkpoint."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(cache))
    monkeypatch.setenv("CAMPUSGUARD_OFFLINE", "1")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


@pytest.mark.parametrize(
    ("text", "official", "config"),
    [
        ("yolov8n", "yolov8n", None),
        ("yolov8m.pt", "yolov8m", None),
        ("YOLO11s.PT", "yolo11s", None),
        (" yolo26x ", "yolo26x", None),
        ("yolo26n.yaml", None, "yolo26n"),
        ("YOLOv8n.yaml", None, "yolov8n"),
        ("weights/yolov8n.pt", None, None),  # a path is a file, never a name
        ("configs/yolo26n.yaml", None, None),
        ("yolov9c.pt", None, None),
        ("yolo26n.onnx", None, None),
    ],
)
def test_what_a_name_means(text: str, official: str | None, config: str | None) -> None:
    assert official_weights_name(text) == official
    arch = architecture_config(text)
    assert (arch.name if arch else None) == config


def test_every_family_and_size_has_official_weights_and_a_config() -> None:
    for name, arch in ARCHITECTURES.items():
        assert official_weights_name(name) == official_weights_name(f"{name}.pt") == name
        assert architecture_config(arch.yaml) is arch
        assert find_architecture(name) is arch  # training reads the family table by bare name


def test_a_yaml_name_is_the_random_architecture_and_says_so() -> None:
    ref = parse_model_ref("yolo11s.yaml")
    assert ref == ModelRef("arch", name="yolo11s")
    assert str(ref) == "yolo11s.yaml"


@pytest.mark.parametrize("model", ["yolov8m.pt", "yolov8n", "YOLO26s"])
def test_a_trained_name_offline_and_not_cached_is_one_line_naming_the_pull(offline: Path, model: str) -> None:
    from campusguard.detector import Detector

    name = model.lower().removesuffix(".pt")
    with pytest.raises(ModelLoadError) as caught:
        Detector(model, device="cpu")
    message = str(caught.value)
    assert "\n" not in message
    assert "not found" not in message  # not "model file not found": the name means official weights
    assert f"campusguard models pull {name}" in message and "--from" in message
    assert f"{name}.pt" in message  # the URL tried


def test_the_yolo_offline_switch_is_honoured_too(offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAMPUSGUARD_OFFLINE")
    monkeypatch.setenv("YOLO_OFFLINE", "1")  # what CI sets
    with pytest.raises(ModelLoadError, match="campusguard models pull yolo11n"):
        parse_model_ref("yolo11n.pt")


def test_predict_cli_offline_is_one_error_line(offline: Path, assets_dir: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "predict", "yolov8n", str(assets_dir / "bus.jpg")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "campusguard models pull yolov8n" in lines[0]


def test_a_local_file_of_the_name_wins(offline: Path) -> None:
    shutil.copy(CHECKPOINT, offline / "yolov8m.pt")
    assert parse_model_ref("yolov8m.pt") == ModelRef("pt", Path("yolov8m.pt"))
    assert parse_model_ref("yolov8m") == ModelRef("pt", Path("yolov8m.pt"))  # the stem gets .pt, as in Ultralytics
    with pytest.raises(ModelLoadError, match="campusguard models pull yolov8s"):
        parse_model_ref("yolov8s.pt")  # only that name is local


@pytest.mark.torch
def test_the_local_file_is_what_runs(offline: Path) -> None:
    from campusguard.detector import Detector

    shutil.copy(CHECKPOINT, offline / "yolov8m.pt")
    det = Detector("yolov8m.pt", backend="torch", device="cpu")
    assert not det.random_weights and det.info.head == "end2end"  # the YOLO26 under that name, not a download
    assert det.info.source == "yolov8m.pt"


def test_head_choices() -> None:
    assert [head_end_to_end(h) for h in (None, "end2end", "classic")] == [None, True, False]
    with pytest.raises(InvalidInputError, match="end2end, classic"):
        head_end_to_end("one2many")


@pytest.mark.torch
def test_an_onnx_file_keeps_the_head_it_was_exported_with(tmp_path: Path) -> None:
    from campusguard.detector import Detector
    from campusguard.models.export import export_onnx

    assert Detector("yolov8n.yaml", backend="torch", device="cpu", head="classic").info.head == "classic"
    onnx = export_onnx(ModelRef("pt", CHECKPOINT), tmp_path / "e2e.onnx", imgsz_hw=(320, 320))
    with pytest.raises(InvalidInputError, match="fixed at export; export it again with --head classic"):
        Detector(onnx, device="cpu", head="classic")
    assert Detector(onnx, device="cpu", head="end2end").info.head == "end2end"


@pytest.mark.torch
def test_predict_says_which_head_runs(tmp_path: Path, assets_dir: Path) -> None:
    pt = Path(shutil.copy(CHECKPOINT, tmp_path / "y26.pt"))  # its ONNX export is written beside it

    def predict(*extra: str) -> subprocess.CompletedProcess[str]:
        args = [str(pt), str(assets_dir / "bus.jpg"), "--imgsz", "320", "--device", "cpu", *extra]
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "campusguard.cli.main",
                "predict",
                *args,
                "--out",
                str(tmp_path / "out"),
                "--no-save-media",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )

    own = predict()
    assert own.returncode == 0, own.stderr
    assert "head: end2end (NMS-free" in own.stderr and "--head classic" in own.stderr
    classic = predict("--head", "classic", "--backend", "torch")
    assert classic.returncode == 0, classic.stderr
    assert "head: classic (NMS in CampusGuard)" in classic.stderr
    bad = predict("--head", "both")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "error: head 'both' must be one of end2end, classic"


def test_export_refuses_an_unknown_head_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "export", "yolo26n.yaml", "--head", "x", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0 and proc.stderr.strip() == "error: head 'x' must be one of end2end, classic"
