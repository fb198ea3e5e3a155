"""Result files: the JSON Schema, version checks and the CSV beside the JSON."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import jsonschema
import pytest
from fakes_bench import record, result_doc

from campusguard.bench.results import (
    CSV_COLUMNS,
    SCHEMA_VERSION,
    find_result_files,
    flatten_combination,
    load_result,
    load_schema,
    validate_result,
    write_csv,
    write_result,
)
from campusguard.errors import InvalidInputError


def test_schema_file_is_a_valid_draft_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(load_schema())


def test_valid_document_with_ok_skipped_and_failed_records_passes(tmp_path: Path) -> None:
    doc = result_doc(
        "cpu-a",
        [
            record(),
            record(precision="fp16", status="skipped", reason="FP16 needs a GPU provider"),
            record(precision="int8", status="failed", reason="RuntimeError: boom"),
        ],
    )
    path = write_result(doc, tmp_path / "r.json")
    assert load_result(path)["results"][1]["reason"] == "FP16 needs a GPU provider"


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        (lambda d: d.pop("machine"), "machine"),
        (lambda d: d["results"][0].update(status="maybe"), "results/0/status"),
        (lambda d: d["results"][0].update(precision="int4"), "results/0/precision"),
        (lambda d: d["results"][0].pop("latency_ms"), "results/0"),  # ok records need their figures
        (lambda d: d["results"][0].update(status="skipped", reason=None), "results/0/reason"),  # skips need a reason
        (lambda d: d["config"].update(batch=[0]), "config/batch/0"),
    ],
)
def test_invalid_documents_are_refused_naming_the_place(mutate, where: str) -> None:  # type: ignore[no-untyped-def]
    doc = result_doc("cpu-a", [record()])
    mutate(doc)
    with pytest.raises(InvalidInputError, match="not a valid bench result") as exc:
        validate_result(doc, "r.json")
    assert where.split("/")[0] in str(exc.value)
    assert "\n" not in str(exc.value)


def test_newer_schema_version_is_a_one_line_error(tmp_path: Path) -> None:
    doc = result_doc("cpu-a", [record()])
    doc["schema_version"] = SCHEMA_VERSION + 1
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InvalidInputError, match=r"newer than the \d+ this campusguard reads; upgrade") as exc:
        load_result(path)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "not JSON"), ('{"a": 1}', "no integer schema_version"), ("[]", "no integer schema_version")],
)
def test_unreadable_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=message):
        load_result(path)


def test_missing_files_and_empty_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="result file not found"):
        load_result(tmp_path / "none.json")
    with pytest.raises(InvalidInputError, match="no bench result files"):
        find_result_files([tmp_path])
    with pytest.raises(InvalidInputError, match="no such result file"):
        find_result_files([tmp_path / "nowhere"])


def test_find_result_files_skips_other_json(tmp_path: Path) -> None:
    write_result(result_doc("cpu-a", [record()]), tmp_path / "sub" / "a.json")
    (tmp_path / "other.json").write_text('{"hello": 1}')
    assert [p.name for p in find_result_files([tmp_path])] == ["a.json"]


def test_csv_has_one_row_per_record_with_the_figures(tmp_path: Path) -> None:
    recs = [record(fps=123.456789, p50=8.0), record(precision="fp16", status="skipped", reason="no GPU")]
    path = write_csv([flatten_combination("cpu-a", r) for r in recs], tmp_path / "r.csv")
    rows = list(csv.DictReader(path.open()))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert rows[0]["throughput_ips"] == "123.4568"
    assert rows[0]["p50_ms"] == "8.0"
    assert rows[1]["status"] == "skipped" and rows[1]["reason"] == "no GPU" and rows[1]["p50_ms"] == ""


def test_validation_does_not_modify_the_document() -> None:
    doc = result_doc("cpu-a", [record()])
    before = copy.deepcopy(doc)
    validate_result(doc)
    assert doc == before
