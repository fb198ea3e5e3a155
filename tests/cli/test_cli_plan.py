"""`campusguard plan` against the committed bench results in docs/results."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from campusguard.cli.main import main

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"


def test_plan_a_1000_camera_campus_on_the_committed_results(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["plan", "--cameras", "1000", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS), "--json"]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["deployment"]["frames_per_day"] == 1000 * 10 * 86_400
    by = {m["machine"]: m for m in out["machines"]}
    assert set(by) == {"cpu-amd-epyc-2vcpu", "nvidia-h200"}
    gpu = by["nvidia-h200"]
    # watch's batch 4: batch 8 (162.0 images/s) is closer than 1 by ratio; 640x640 is all the H200 has
    assert (gpu["unit"], gpu["backend"], gpu["batch"], gpu["input_shape"]) == ("GPU", "torch", 8, "square")
    assert gpu["measured_ips"] == pytest.approx(162.0, abs=0.1)
    assert gpu["units"] == math.ceil(10_000 / (gpu["measured_ips"] * 0.942 * 0.8))
    assert gpu["cost_per_day"] == pytest.approx(gpu["units"] * 4.0 * 24)  # the H200 run's price_per_hour
    cpu = by["cpu-amd-epyc-2vcpu"]
    assert cpu["source"].endswith("cpu-2026-11-30-quiet/bench-20261130T013111Z-cpu-amd-epyc-2vcpu.json")  # latest run
    assert (cpu["scenario"], cpu["batch"], cpu["unit"]) == ("multi-stream", 4, "machine")


def test_plan_prints_a_table_and_its_assumptions(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["plan", "--cameras", "116", "--fps", "1", "--resolution", "1280x720", "--active-fraction", "0.5",
         "--results", str(RESULTS / "nvidia-h200")]
    )  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "capacity plan" in out and "nvidia-h200" in out and "1 GPU " in out
    assert "user-given" in out and "watch-throughput-cpu.md" in out and "(watch detector.batch_size)" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cameras", "0"], "error: --cameras must be at least 1, got 0"),
        (["--resolution", "720p"], "error: --resolution '720p' must be WIDTHxHEIGHT"),
        (["--model", "yolov9c"], "error: no result for model 'yolov9c'"),
        (["--precision", "fp8"], "error: --precision 'fp8' must be one of fp32, fp16, int8"),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    base = {"--cameras": "10", "--fps": "10", "--resolution": "1280x720", "--results": str(RESULTS)}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["plan"] + [x for kv in base.items() for x in kv]
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)
    if "--model" in args:
        assert "available: cpu-amd-epyc-2vcpu: " in err[0] and "yolov8n torch fp16" in err[0]


def test_an_empty_results_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--cameras", "10", "--fps", "10", "--resolution", "1280x720", "--results", str(tmp_path)]
    assert main(argv) != 0
    assert capsys.readouterr().err.strip() == f"error: no bench result files in {tmp_path}"


HOST_COST = RESULTS / "host-cost-cpu.json"


def test_plan_with_measured_host_work_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--cameras", "1000", "--fps", "10", "--resolution", "1280x720", "--active-fraction", "0.4",
            "--results", str(RESULTS / "cpu-2026-12-02-xeon-amx"), "--model", "campusguard-default",
            "--precision", "int8", "--host-cost", str(HOST_COST), "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    stages = json.loads(HOST_COST.read_text())["stages_ms"]
    host_ms = sum(stages.values())  # gated: every stage counts
    assert out["host"]["counted"] is True and out["host"]["ms_per_frame"] == pytest.approx(host_ms)
    assert out["host"]["source"].startswith(f"measured: {HOST_COST} (")
    m = out["machines"][0]
    assert (m["unit"], m["host_cores"], m["efficiency"]) == ("machine", 2.0, 1.0)  # the Xeon record: 2 logical cores
    detector_ms = 2 * 1000 / m["measured_ips"]
    assert m["detector_core_ms"] == pytest.approx(detector_ms)
    per_camera = 10 * (host_ms + 0.4 * detector_ms)  # core-ms per second
    assert m["cameras_per_unit"] == pytest.approx(2000 * 0.8 / per_camera)
    assert m["units"] == math.ceil(1000 / m["cameras_per_unit"])
    assert m["bottleneck"] == ("host" if host_ms > 0.4 * detector_ms else "detector")


def test_plan_says_when_host_work_is_not_counted(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "plan",
        "--cameras",
        "10",
        "--fps",
        "10",
        "--resolution",
        "1280x720",
        "--results",
        str(RESULTS / "nvidia-h200"),
    ]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "host work per frame: not counted" in out and "figures for CPU machines are optimistic" in out
    assert "detector only" in out


def test_plan_prints_host_work_and_the_bottleneck(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--cameras", "100", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS),
            "--host-ms-per-frame", "5", "--host-cores", "2"]  # fmt: skip
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "host work per frame: 5.00 core-ms (user-given (--host-ms-per-frame))" in out
    assert "CPU cores per GPU for host work: 2 (user-given (--host-cores))" in out
    # the EPYC: 2 cores x 1000 / 36.3 images/s = 55 detector core-ms per frame against 5 of host work
    assert "│ detector 92% │" in out


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"schema_version": 1, "kind": "campusguard-host-cost"}', "not a valid host-cost file at (top level)"),
        (None, "not a host-cost file: its kind is 'campusguard-bench'"),
    ],
)
def test_a_bad_host_cost_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    path = next((RESULTS / "nvidia-h200").glob("bench-*.json")) if content is None else tmp_path / "host.json"
    if content is not None:
        path.write_text(content)
    argv = ["plan", "--cameras", "10", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS),
            "--host-cost", str(path)]  # fmt: skip
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {path}: ") and message in err[0]


def test_host_cost_and_host_ms_are_not_both_taken(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "--cameras", "10", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS),
            "--host-cost", str(HOST_COST), "--host-ms-per-frame", "4"]  # fmt: skip
    assert main(argv) != 0
    assert capsys.readouterr().err.strip() == "error: give --host-cost FILE or --host-ms-per-frame X, not both"


def test_plan_reads_host_work_from_a_cost_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    section = json.loads(HOST_COST.read_text())
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"schema_version": 1, "kind": "campusguard-cost", "results": {}, "host_cost": section}))
    argv = ["plan", "--cameras", "10", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS),
            "--precision", "int8", "--host-cost", str(cost), "--json"]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    stages = section["stages_ms"]
    # ungated (active fraction 1): motion analysis does not count
    assert out["host"]["ms_per_frame"] == pytest.approx(sum(v for k, v in stages.items() if k != "motion"))
    assert out["host"]["source"].startswith(f"measured: {cost} (host_cost) (")


def test_a_cost_file_without_host_work_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"schema_version": 1, "kind": "campusguard-cost", "results": {}}))
    argv = ["plan", "--cameras", "10", "--fps", "10", "--resolution", "1280x720", "--results", str(RESULTS),
            "--host-cost", str(cost)]  # fmt: skip
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a cost file without a host_cost section" in err[0]
