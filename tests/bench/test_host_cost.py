"""Host-cost files: what `campusguard plan --host-cost` reads, validated with one-line errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fakes_bench import host_cost_doc, record, result_doc

from campusguard.bench.host_cost import HOST_COST_SCHEMA_VERSION, HostCost, load_host_cost, write_host_cost
from campusguard.bench.results import find_result_files, write_result
from campusguard.errors import InvalidInputError


def test_a_written_file_reads_back(tmp_path: Path) -> None:
    path = write_host_cost(host_cost_doc(decode=3.05, motion=1.7), tmp_path / "sub" / "host.json")
    cost = load_host_cost(path)
    assert cost.source == str(path) and cost.cpu == "Test CPU" and cost.resolution_wh == (1280, 720)
    assert cost.stages_ms == {"decode": 3.05, "motion": 1.7, "tracking_rules": 0.4, "events": 0.1}


def test_motion_counts_only_with_gating() -> None:
    cost = HostCost.from_document(host_cost_doc(decode=3.0, motion=1.5, tracking_rules=0.4, events=0.1), "h.json")
    gated, parts = cost.ms_per_frame((1280, 720), gated=True)
    assert gated == pytest.approx(5.0)
    assert parts == "decode 3.00 + motion 1.50 + tracking and rules 0.40 + events 0.10"
    ungated, parts = cost.ms_per_frame((1280, 720), gated=False)
    assert ungated == pytest.approx(3.5)
    assert "motion not run (no gating)" in parts


def test_decode_scales_with_the_cameras_pixels() -> None:
    cost = HostCost.from_document(host_cost_doc(decode=3.0, motion=1.5, tracking_rules=0.4, events=0.1), "h.json")
    ms, parts = cost.ms_per_frame((1920, 1080), gated=False)  # 2.25x the pixels of 1280x720
    assert ms == pytest.approx(3.0 * 2.25 + 0.4 + 0.1)
    assert "x2.25: pixels against the measured 1280x720" in parts


def _drop_stage(d: dict[str, Any]) -> None:
    del d["stages_ms"]["motion"]


def _negative(d: dict[str, Any]) -> None:
    d["stages_ms"]["decode"] = -1.0


def _extra_stage(d: dict[str, Any]) -> None:
    d["stages_ms"]["detector"] = 10.0


def _bad_resolution(d: dict[str, Any]) -> None:
    d["video"]["resolution_wh"] = [1280]


def _newer(d: dict[str, Any]) -> None:
    d["schema_version"] = HOST_COST_SCHEMA_VERSION + 1


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_drop_stage, r"not a valid host-cost file at stages_ms: 'motion' is a required property"),
        (_negative, r"not a valid host-cost file at stages_ms/decode: -1.0 is less than the minimum of 0"),
        (_extra_stage, r"not a valid host-cost file at stages_ms: Additional properties are not allowed"),
        (_bad_resolution, r"not a valid host-cost file at video/resolution_wh"),
        (_newer, r"written with host-cost file schema version \d+, newer than the \d+ this campusguard reads"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path: Path, mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    doc = host_cost_doc()
    mutate(doc)
    path = tmp_path / "host.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=message) as exc:
        load_host_cost(path)
    assert str(exc.value).startswith(f"{path}: ") and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "host-cost file not found"),
        ("{not json", r"not JSON \(JSONDecodeError at line 1\)"),
        ("[1, 2]", r"not a campusguard host-cost file \(no integer schema_version\)"),
    ],
)
def test_an_unreadable_file_is_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "host.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(InvalidInputError, match=message) as exc:
        load_host_cost(path)
    assert "\n" not in str(exc.value)


def test_a_bench_result_is_not_a_host_cost_file(tmp_path: Path) -> None:
    path = write_result(result_doc("cpu-a", [record()]), tmp_path / "bench.json")
    with pytest.raises(
        InvalidInputError, match="not a host-cost file: its kind is 'campusguard-bench', not 'campusguard-host-cost'"
    ):
        load_host_cost(path)


def test_a_host_cost_file_is_not_taken_for_a_bench_result(tmp_path: Path) -> None:
    """`plan --results docs/results` searches a folder that holds host-cost files too."""
    write_result(result_doc("cpu-a", [record()]), tmp_path / "bench.json")
    write_host_cost(host_cost_doc(), tmp_path / "host-cost-cpu.json")
    assert [p.name for p in find_result_files([tmp_path])] == ["bench.json"]
