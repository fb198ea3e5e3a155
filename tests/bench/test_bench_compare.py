"""`compare`: two machines with known deltas, baseline choice, conclusions and the report files."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
from fakes_bench import record, result_doc

from campusguard.bench.compare import compare, conclusions
from campusguard.bench.report import write_report
from campusguard.bench.results import write_result
from campusguard.errors import InvalidInputError


@pytest.fixture
def two_machines(tmp_path: Path) -> Path:
    cpu = [
        record(fps=100.0, p50=10.0, rss=500.0, map50_95=0.40, price=1.0),
        record(precision="int8", fps=130.0, p50=7.7, rss=400.0, map50_95=0.39, price=1.0, spread=0.03),
        record(backend="torch", fps=50.0, p50=20.0, price=1.0),
        record(precision="fp16", status="skipped", reason="FP16 needs a GPU provider"),
    ]
    gpu = [
        record(fps=400.0, p50=2.5, rss=600.0, map50_95=0.40, price=4.0),
        record(backend="torch", fps=150.0, p50=8.0, price=4.0, spread=0.25),
        record(backend="torch", precision="fp16", fps=300.0, p50=4.0, price=4.0),
    ]
    write_result(result_doc("cpu-box", cpu, price=1.0), tmp_path / "cpu" / "r.json")
    write_result(result_doc("gpu-box", gpu, price=4.0), tmp_path / "gpu" / "r.json")
    return tmp_path


def _row(cmp, machine: str, backend: str, precision: str):  # type: ignore[no-untyped-def]
    return next(r for r in cmp.rows if (r.machine, r.backend, r.precision) == (machine, backend, precision))


def test_deltas_against_the_baseline_machine(two_machines: Path) -> None:
    cmp = compare([two_machines], baseline="cpu-box")
    assert cmp.machines == ["cpu-box", "gpu-box"]
    g = _row(cmp, "gpu-box", "onnxruntime", "fp32")
    assert g.deltas["fps"] == pytest.approx(3.0)  # 400 vs 100 img/s
    assert g.deltas["p50_ms"] == pytest.approx(-0.75)  # 2.5 vs 10 ms
    assert g.deltas["rss_peak_mb"] == pytest.approx(0.2)
    assert g.deltas["map50_95_points"] == pytest.approx(0.0)
    # cost per image: $4/h at 400 img/s against $1/h at 100 img/s is the same
    assert g.deltas["cost_per_million"] == pytest.approx(0.0)
    assert _row(cmp, "gpu-box", "torch", "fp32").deltas["fps"] == pytest.approx(2.0)
    assert _row(cmp, "gpu-box", "torch", "fp16").deltas == {}  # nothing to compare with on the baseline
    assert _row(cmp, "cpu-box", "onnxruntime", "fp32").deltas == {}  # the baseline itself


def test_baseline_switch_inverts_the_delta(two_machines: Path) -> None:
    cmp = compare([two_machines], baseline="gpu-box")
    assert _row(cmp, "cpu-box", "onnxruntime", "fp32").deltas["fps"] == pytest.approx(-0.75)


def test_unknown_baseline_names_the_machines(two_machines: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"baseline 'tpu' is not a machine.*cpu-box, gpu-box"):
        compare([two_machines], baseline="tpu")


def test_later_run_of_the_same_machine_wins(tmp_path: Path) -> None:
    write_result(result_doc("m", [record(fps=10.0)], created="2026-01-01T00:00:00+00:00"), tmp_path / "a.json")
    write_result(result_doc("m", [record(fps=20.0)], created="2026-02-01T00:00:00+00:00"), tmp_path / "b.json")
    cmp = compare([tmp_path])
    assert [r.fps for r in cmp.rows] == [20.0]


def test_conclusions_state_the_measured_numbers(two_machines: Path) -> None:
    text = "\n".join(conclusions(compare([two_machines], baseline="cpu-box")))
    assert (
        "gpu-box vs cpu-box on yolov8n (onnxruntime fp32, batch 1, like for like): FPS +300%, p50 latency -75%" in text
    )
    assert "INT8 against FP32 on cpu-box (onnxruntime): 1.30x to 1.30x the throughput (yolov8n b1 1.30x)" in text
    assert "mAP50-95 -1.0 points (yolov8n)" in text
    assert "by CPU time per image" not in text  # not measured in these records: not claimed
    assert "ONNX Runtime against PyTorch on cpu-box: 2.0x to 2.0x PyTorch's throughput (yolov8n fp32 b1 2.0x)" in text
    assert "FP16 against FP32 on gpu-box (torch): 2.00x to 2.00x the throughput (yolov8n b1 2.00x)" in text
    assert "Where the time goes on cpu-box at batch 1: the network call is 74% to 90% of each call (the network" in text
    assert "Repeatability: 1 of 2 repeated combinations agree within 10%" in text
    assert (
        "1 combination(s) did not run: 1 on cpu-box skipped (FP16 needs a GPU provider: yolov8n onnxruntime fp16)"
        in text
    )


def test_report_files_are_self_contained(two_machines: Path, tmp_path: Path) -> None:
    files = write_report(compare([two_machines], baseline="cpu-box"), tmp_path / "report")
    html = files["html"].read_text()
    md = files["markdown"].read_text()
    assert {"throughput", "latency", "stages", "per_dollar"} <= set(files)
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 4
    assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http://" not in html and "https://" not in html  # nothing fetched when opened
    assert "400.0 (+300%)" in md and "FP16 needs a GPU provider" in md
    assert "![Throughput by model](plots/throughput.png)" in md
    assert "campusguard bench --machine gpu-box" in md


def test_one_machine_report_has_no_cross_machine_sentences(tmp_path: Path) -> None:
    write_result(result_doc("solo", [record(), record(precision="int8", fps=125.0)]), tmp_path / "r.json")
    cmp = compare([tmp_path])
    sentences = conclusions(cmp)
    assert cmp.baseline == "solo"
    assert not any(" vs solo" in s for s in sentences)
    assert any("1.25x" in s for s in sentences)
    assert not any(s.startswith("Batching") for s in sentences)  # one batch size: nothing to say


def test_run_to_run_agreement_on_known_medians() -> None:
    from campusguard.bench.compare import run_to_run

    first = result_doc("m", [record(p50=10.0), record(precision="int8", p50=5.0), record(batch=8, p50=80.0)])
    second = result_doc("m", [record(p50=10.5), record(precision="int8", p50=6.0)])
    rows = {r["label"]: r for r in run_to_run(first, second, tolerance=0.10)}
    assert set(rows) == {"yolov8n onnxruntime fp32 b1", "yolov8n onnxruntime int8 b1"}  # b8 ran once only
    assert rows["yolov8n onnxruntime fp32 b1"]["spread"] == pytest.approx(0.05)
    assert rows["yolov8n onnxruntime fp32 b1"]["agree"] is True
    assert rows["yolov8n onnxruntime int8 b1"]["spread"] == pytest.approx(0.20)
    assert rows["yolov8n onnxruntime int8 b1"]["agree"] is False


def test_leak_needs_growth_not_only_a_slope(tmp_path: Path) -> None:
    steady = record(fps=10.0)
    steady["memory"].update(host_rss_start_mb=500.0, host_rss_end_mb=500.5, host_rss_slope_mb_per_s=3.0)
    leaking = record(precision="int8", fps=12.0)
    leaking["memory"].update(host_rss_start_mb=500.0, host_rss_end_mb=560.0, host_rss_slope_mb_per_s=6.0)
    write_result(result_doc("m", [steady]), tmp_path / "a" / "r.json")
    assert any(s.startswith("No leak on m") for s in conclusions(compare([tmp_path / "a"])))
    write_result(result_doc("m", [steady, leaking]), tmp_path / "b" / "r.json")
    text = "\n".join(conclusions(compare([tmp_path / "b"])))
    assert "Host memory grew by 60 MiB (6.0 MiB/s) during m yolov8n onnxruntime int8 b1: look for a leak." in text
