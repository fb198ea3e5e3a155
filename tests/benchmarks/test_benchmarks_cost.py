"""benchmarks/cost.py: the per-round ratios and the report from known numbers, and one short app run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import cost  # noqa: E402


def _row(scene: str, contender: str, rnd: int, cpu_s: float, wall_s: float) -> dict:
    row = {"scene": scene, "contender": contender, "round": rnd, "cpu_s": cpu_s, "wall_s": wall_s, "frames": 100}
    if contender not in cost.ANCHORS:
        row |= {"startup_cpu_s": 1.0, "f1": 1.0, "tp": 2, "fp": 0, "fn": 0, "detector_images": 25}
        row |= {"frames_skipped": 75, "frames_gate_busy": 0, "gate_ms_per_frame": 0.2, "precision_log": "int8"}
    return row


def test_ratios_are_taken_within_each_round_then_their_median(tmp_path: Path) -> None:
    scenes = {"idle": {"seed": 14, "seconds": 10.0, "idle_fraction": 0.75, "frames": 100, "incidents": 2}}
    rows = [
        _row("idle", "ultralytics", 0, cpu_s=8.0, wall_s=4.0),
        _row("idle", "app-defaults", 0, cpu_s=1.0, wall_s=1.0),
        _row("idle", "ultralytics", 1, cpu_s=16.0, wall_s=8.0),  # a slower round: the ratio is the same
        _row("idle", "app-defaults", 1, cpu_s=2.0, wall_s=2.0),
        _row("idle", "ultralytics", 2, cpu_s=8.0, wall_s=4.0),
        _row("idle", "app-defaults", 2, cpu_s=4.0, wall_s=1.0),
    ]
    res = cost.summarise(rows, scenes)["idle"]
    r = res["ratios"]["app-defaults"]
    assert r["cpu_saving_vs_ultralytics"] == [8.0, 8.0, 2.0] and r["cpu_saving_vs_ultralytics_median"] == 8.0
    assert r["fps_vs_ultralytics"] == [4.0, 4.0, 4.0]
    c = res["contenders"]["app-defaults"]
    assert c["core_s_per_camera_hour"] == pytest.approx(2.0 / 10 * 3600)  # the median run's 2 s over 10 s of video
    assert c["detector_images_per_frame"] == 0.25 and c["f1"] == [1.0, 1.0, 1.0]
    doc = {"command": "x", "created_utc": "t", "cpu": "CPU", "logical_cores": 2, "load_average": 1.0, "notes": None}
    doc |= {"scenes": scenes, "results": {"idle": res}}
    cost.write_markdown(doc, tmp_path / "c.md")
    text = (tmp_path / "c.md").read_text()
    assert "| app-defaults | **4.00** (4.0, 4.0, 4.0) | **8.00** (8.0, 8.0, 2.0) |" in text


@pytest.mark.slow
def test_one_app_run_is_measured_and_scored(tmp_path: Path) -> None:
    from campusguard.data.synth.video import generate_video

    truth = generate_video(2, tmp_path, size_wh=(320, 180), seconds=8, fps=5, name="v")
    out = cost.run_app(tmp_path / truth.video, tmp_path / "v.json", tmp_path, "int8", True)
    assert out["frames"] == truth.num_frames and out["clean"]
    assert out["cpu_s"] > 0 and out["wall_s"] > 0 and out["startup_cpu_s"] > 0
    assert 0 < out["detector_images"] <= out["frames"] and out["gate_ms_per_frame"] is not None
    assert "int8" in (out["precision_log"] or "")
    json.dumps(out)


def test_ratios_against_both_of_ultralytics_loops() -> None:
    scenes = {"busy": {"seed": 12, "seconds": 10.0, "idle_fraction": 0.0, "frames": 100, "incidents": 2}}
    rows = [
        _row("busy", "ultralytics", 0, cpu_s=8.0, wall_s=4.0),
        _row("busy", "ultralytics-openvino", 0, cpu_s=4.0, wall_s=2.0),
        _row("busy", "app-defaults", 0, cpu_s=2.0, wall_s=1.0),
    ]
    r = cost.summarise(rows, scenes)["busy"]["ratios"]
    assert r["app-defaults"]["fps_vs_ultralytics_median"] == 4.0
    assert r["app-defaults"]["fps_vs_ultralytics_openvino_median"] == 2.0
    assert r["app-defaults"]["cpu_saving_vs_ultralytics_openvino_median"] == 2.0
    assert r["ultralytics-openvino"]["fps_vs_ultralytics_median"] == 2.0  # the anchors against each other


def test_an_app_contender_is_compared_with_its_run_on_the_code_before(tmp_path: Path) -> None:
    scenes = {"idle": {"seed": 14, "seconds": 10.0, "idle_fraction": 0.75, "frames": 100, "incidents": 2}}
    rows = []
    for rnd, (before_cpu, after_cpu) in enumerate(((3.0, 2.0), (4.0, 2.0))):
        rows += [
            _row("idle", "ultralytics", rnd, cpu_s=16.0, wall_s=4.0),
            _row("idle", "app-defaults@before", rnd, cpu_s=before_cpu, wall_s=1.0),
            _row("idle", "app-defaults", rnd, cpu_s=after_cpu, wall_s=1.0),
        ]
    res = cost.summarise(rows, scenes)["idle"]
    r = res["ratios"]
    assert (
        r["app-defaults"]["cpu_saving_vs_before"] == [1.5, 2.0]
        and r["app-defaults"]["cpu_saving_vs_before_median"] == 1.75
    )
    assert r["app-defaults"]["cpu_saving_vs_ultralytics"] == [8.0, 8.0]
    assert r["app-defaults@before"]["cpu_saving_vs_ultralytics"] == [5.33, 4.0]  # the code before, against the anchor
    assert "cpu_saving_vs_before" not in r["app-defaults@before"]
    assert cost.variant_of("app-defaults@before") == "app-defaults"
    doc = {"command": "x", "created_utc": "t", "cpu": "CPU", "logical_cores": 2, "load_average": 1.0, "notes": None}
    doc |= {"scenes": scenes, "results": {"idle": res}, "before": "abc1234"}
    cost.write_markdown(doc, tmp_path / "c.md")
    text = (tmp_path / "c.md").read_text()
    assert "| against the same at `abc1234` | fps / before (per round) | CPU saving x (per round) |" in text
    assert "| app-defaults | **1.00** (1.0, 1.0) | **1.75** (1.5, 2.0) |" in text


def test_the_sources_of_a_revision_are_exported(tmp_path: Path) -> None:
    src = cost.export_sources(cost.resolve_rev("HEAD"), tmp_path)
    assert (src / "campusguard" / "__init__.py").is_file()
    model = src / "campusguard" / "models" / "assets" / "campusguard-default.onnx"
    here = Path(cost.__file__).resolve().parents[1] / cost.ASSETS / model.name
    assert model.resolve() == here.resolve()  # the same model files: one precision trial for both sides
    with pytest.raises(SystemExit, match="not a commit"):
        cost.resolve_rev("no-such-revision-here")


@pytest.mark.torch
@pytest.mark.skipif(importlib.util.find_spec("openvino") is None, reason="needs the openvino extra")
def test_ultralytics_openvino_loop_runs_on_the_bundled_model(tmp_path: Path) -> None:
    from campusguard.data.synth.video import generate_video

    truth = generate_video(2, tmp_path, size_wh=(320, 180), seconds=4, fps=5, name="v")
    out = cost.run_ultralytics(tmp_path / truth.video, tmp_path, openvino=True)
    assert out["frames"] == truth.num_frames and out["cpu_s"] > 0
    folder = tmp_path / "campusguard-default_openvino_model"
    assert (folder / "campusguard-default.xml").is_file() and "names" in (folder / "metadata.yaml").read_text()
    # the loop ran the app's input for these 320x180 frames at imgsz 480, not the ONNX file's training size (320)
    assert cost.app_input_hw(cost.frame_hw(tmp_path / truth.video)) == (288, 480)
    import openvino as ov

    shape = ov.Core().read_model(str(folder / "campusguard-default.xml")).inputs[0].get_partial_shape()
    assert shape.to_shape() == [1, 3, 288, 480]
