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
