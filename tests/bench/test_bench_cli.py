"""`campusguard bench / compare / profile` end to end on a tiny model, and their one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes_bench import record, result_doc, write_tiny_dataset

from campusguard.bench.results import SCHEMA_VERSION, load_result
from campusguard.cli.main import main
from factories import build_tiny_detector_onnx


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_detector_onnx(tmp_path_factory.mktemp("tiny") / "tiny.onnx"))


def _fast(tiny: str, out: Path) -> list[str]:
    return ["bench", "--models", tiny, "--imgsz", "64", "--device", "cpu", "--warmup", "0", "--iters", "2",
            "--min-seconds", "0", "--out", str(out)]  # fmt: skip


def test_bench_then_compare_then_profile(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_tiny_dataset(tmp_path / "ds")
    args = _fast(tiny, tmp_path / "res") + ["--precisions", "fp32,fp16", "--batch", "1,2", "--repeat", "2",
                                            "--price-per-hour", "1.5", "--data", str(data), "--machine", "cpu-x"]  # fmt: skip
    assert main(args) == 0
    files = sorted((tmp_path / "res").iterdir())
    assert [f.suffix for f in files] == [".csv", ".json"]
    res = load_result(files[1])
    assert res["machine"] == "cpu-x" and res["command"].startswith("campusguard bench")
    statuses = {(r["precision"], r["batch"]): r["status"] for r in res["results"]}
    assert statuses == {("fp32", 1): "ok", ("fp32", 2): "ok", ("fp16", 1): "skipped", ("fp16", 2): "skipped"}
    ok = res["results"][0]
    assert ok["accuracy"]["map50_95"] == pytest.approx(1.0)
    assert ok["cost_per_million_usd"] == pytest.approx(1.5 / (ok["throughput_ips"] * 3600) * 1e6)
    assert res["environment"]["onnxruntime"]["version"] and res["environment"]["packages"]["onnxruntime"]
    assert {s["scenario"] for s in res["scenarios"]} == {"single-stream", "offline"}

    assert main(["compare", str(tmp_path / "res"), "--baseline", "cpu-x", "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "report.html").is_file() and (tmp_path / "rep" / "plots" / "throughput.png").is_file()

    assert (
        main(["profile", tiny, "--imgsz", "64", "--device", "cpu", "--runs", "2", "--out", str(tmp_path / "prof")]) == 0
    )
    prof = json.loads((tmp_path / "prof" / "profile.json").read_text())
    assert {o["op_type"] for o in prof["op_types"]} >= {"ReduceMean"}
    assert sum(o["share"] for o in prof["op_types"]) == pytest.approx(1.0)
    assert (tmp_path / "prof" / "profile.png").is_file()
    assert "verdict:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--models", "yolov8q"], "unknown model 'yolov8q'"),
        (["--batch", "0"], "batch size 0 must be at least 1"),
        (["--batch", "a"], "comma-separated integers"),
        (["--iters", "0"], "--iters 0 must be at least 1"),
        (["--data", "missing.yaml"], "missing.yaml"),
        (["--imgsz", "65"], "multiple of 32"),
        (["--head", "both"], "head 'both' must be one of end2end, classic"),
    ],
)
def test_bench_bad_input_is_one_line(
    tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(_fast(tiny, tmp_path) + extra) != 0
    err = capsys.readouterr().err.strip()
    assert message in err and err.startswith("error:") and "\n" not in err


def test_bad_label_file_is_one_line(tiny: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_tiny_dataset(tmp_path / "ds", label="0 0.5 0.5 oops 0.3\n")
    assert main(_fast(tiny, tmp_path / "out") + ["--data", str(data)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "im0.txt" in err and "\n" not in err


def test_compare_refuses_newer_schema_and_unknown_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = result_doc("cpu-a", [record()])
    (tmp_path / "ok.json").write_text(json.dumps(doc))
    assert main(["compare", str(tmp_path / "ok.json"), "--baseline", "gpu-z", "--out", str(tmp_path / "r")]) != 0
    assert "baseline 'gpu-z' is not a machine" in capsys.readouterr().err
    doc["schema_version"] = SCHEMA_VERSION + 1
    (tmp_path / "new.json").write_text(json.dumps(doc))
    assert main(["compare", str(tmp_path / "new.json"), "--out", str(tmp_path / "r")]) != 0
    err = capsys.readouterr().err.strip()
    assert "newer than" in err and "\n" not in err


@pytest.mark.torch
@pytest.mark.slow
def test_bench_runs_the_families_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """yolov8n.yaml, yolo11n.yaml and yolo26n.yaml (random weights) in one run; the report puts them in one
    table and one plot, and each record says which head ran."""
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    args = ["bench", "--models", "yolov8n.yaml,yolo11n.yaml,yolo26n.yaml", "--imgsz", "128", "--device", "cpu",
            "--warmup", "0", "--iters", "2", "--min-seconds", "0", "--scenarios", "single-stream",
            "--out", str(tmp_path / "res")]  # fmt: skip
    assert main(args) == 0
    res = load_result(next((tmp_path / "res").glob("*.json")))
    got = {r["model"]: (r["status"], r["nms"], r["head"], r["random_weights"]) for r in res["results"]}
    assert got == {
        "yolov8n.yaml": ("ok", "campusguard", "classic", True),
        "yolo11n.yaml": ("ok", "campusguard", "classic", True),
        "yolo26n.yaml": ("ok", "in-model", "end2end", True),
    }
    assert main(["compare", str(tmp_path / "res"), "--out", str(tmp_path / "rep")]) == 0
    table = [line for line in (tmp_path / "rep" / "report.md").read_text().splitlines() if line.startswith("| ")]
    assert "| NMS |" in table[0]
    assert sorted(line.split(" | ")[1:3] for line in table[1:]) == [
        ["yolo11n.yaml", "campusguard"], ["yolo26n.yaml", "in-model"], ["yolov8n.yaml", "campusguard"]
    ]  # fmt: skip
    assert (tmp_path / "rep" / "plots" / "throughput.png").is_file()


@pytest.mark.torch
def test_bench_runs_and_records_the_head_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--head classic`` on YOLO26 (random weights): the torch backend and the classic-head ONNX export both
    run it, every record says so, and the classic export is cached apart."""
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    args = ["bench", "--models", "yolo26n.yaml", "--backends", "onnxruntime,torch", "--imgsz", "64",
            "--device", "cpu", "--warmup", "0", "--iters", "2", "--min-seconds", "0", "--scenarios", "single-stream",
            "--head", "classic", "--out", str(tmp_path / "res")]  # fmt: skip
    assert main(args) == 0
    res = load_result(next((tmp_path / "res").glob("*.json")))
    assert res["config"]["head"] == "classic"
    got = {r["backend"]: (r["status"], r["head"], r["nms"]) for r in res["results"]}
    assert got == {"onnxruntime": ("ok", "classic", "campusguard"), "torch": ("ok", "classic", "campusguard")}
    assert list((tmp_path / "cache").glob("yolo26n-random.64x64-*-classic.onnx"))  # cached apart from the end2end one
