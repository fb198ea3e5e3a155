"""Benchmark result files: versioned JSON (schema in ``result.schema.json``) and a CSV beside it.

A result file holds one run on one machine. Readers accept every schema version up to
`SCHEMA_VERSION` and refuse newer ones with a one-line error, so an old campusguard never
misreads a file whose meaning changed.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from campusguard.errors import InvalidInputError

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_PATH",
    "CSV_COLUMNS",
    "load_schema",
    "validate_document",
    "read_json",
    "validate_result",
    "load_result",
    "find_result_files",
    "write_result",
    "write_csv",
    "flatten_combination",
]

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("result.schema.json")

CSV_COLUMNS = (
    "machine",
    "model",
    "backend",
    "precision",
    "batch",
    "scenario",
    "streams",
    "status",
    "reason",
    "device",
    "provider",
    "export",
    "random_weights",
    "nms",
    "load_ms",
    "first_run_ms",
    "mean_ms",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "min_ms",
    "max_ms",
    "std_ms",
    "iterations",
    "per_image_ms",
    "throughput_ips",
    "preprocess_ms",
    "inference_ms",
    "postprocess_ms",
    "harness_overhead_ms",
    "repeat_spread",
    "host_rss_peak_mb",
    "host_rss_slope_mb_per_s",
    "device_peak_mb",
    "map50_95",
    "map50",
    "accuracy_status",
    "accuracy_reason",
    "cost_per_million_usd",
)


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The JSON Schema of result files (draft 2020-12), its backend and precision choices taken from the
    backend registry (`campusguard.backends.registry`: bench variants and precisions), so a new backend's
    results validate without an edit here; the file lists today's."""
    from campusguard.backends.registry import BENCH_VARIANTS, PRECISIONS

    with SCHEMA_PATH.open(encoding="utf-8") as f:
        schema: dict[str, Any] = json.load(f)
    schema["properties"]["config"]["properties"]["precisions"]["items"]["enum"] = list(PRECISIONS)
    combination = schema["$defs"]["combination"]["properties"]
    combination["backend"]["enum"] = list(BENCH_VARIANTS)
    combination["precision"]["enum"] = list(PRECISIONS)
    return schema


def validate_document(
    doc: Any, schema: dict[str, Any], what: str, version: int, source: str, kind: str | None = None
) -> None:
    """Check a versioned campusguard JSON document: its version first (newer: refused), its ``kind`` (when
    given), then its JSON Schema.

    Args:
        doc: the parsed document.
        schema: its JSON Schema (draft 2020-12, with ``required`` at the top level).
        what: what the document is, for messages (``bench result``, ``host-cost file``).
        version: the newest ``schema_version`` this campusguard reads.
        source: the file name (or other label) the messages start with.
        kind: the document's ``kind`` field, checked before the schema so that another kind of
            campusguard file is named as such.

    Raises:
        InvalidInputError: one line naming ``source`` and the first problem found.
    """
    found = doc.get("schema_version") if isinstance(doc, dict) else None
    if not isinstance(found, int):
        raise InvalidInputError(f"{source}: not a campusguard {what} (no integer schema_version)")
    if found > version:
        raise InvalidInputError(
            f"{source}: written with {what} schema version {found}, newer than the {version} this "
            "campusguard reads; upgrade campusguard to read it"
        )
    if kind is not None and doc.get("kind") != kind:
        raise InvalidInputError(f"{source}: not a {what}: its kind is {doc.get('kind')!r}, not {kind!r}")
    try:
        import jsonschema
    except ImportError:  # dev extra missing: the version and key checks above and below still apply
        jsonschema = None
    if jsonschema is None:
        missing = [k for k in schema["required"] if k not in doc]
        if missing:
            raise InvalidInputError(f"{source}: not a valid {what} (missing {', '.join(missing)})")
        return
    validator = jsonschema.Draft202012Validator(schema)
    error = next(iter(sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise InvalidInputError(f"{source}: not a valid {what} at {where}: {error.message[:200]}")


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON of ``path``; a one-line error when it is missing or not JSON."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInputError(f"{path}: {what} not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(
            f"{path}: not JSON ({exc.__class__.__name__} at line {getattr(exc, 'lineno', '?')})"
        ) from exc


def validate_result(result: dict[str, Any], source: str = "result") -> None:
    """Check a result mapping: version first (newer: refused), then the JSON Schema.

    Raises:
        InvalidInputError: one line naming ``source`` and the first problem found.
    """
    validate_document(result, load_schema(), "bench result", SCHEMA_VERSION, source)


def load_result(path: str | Path) -> dict[str, Any]:
    """Read and validate one result JSON file."""
    data: dict[str, Any] = read_json(path, "result file")
    validate_result(data, str(path))
    return data


def find_result_files(paths: Sequence[str | Path]) -> list[Path]:
    """Result JSON files named directly or found (recursively, ``*.json``) in the given folders."""
    found: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*.json")):
                if _looks_like_result(f):
                    found.append(f)
        elif p.is_file():
            found.append(p)
        else:
            raise InvalidInputError(f"{p}: no such result file or folder")
    if not found:
        raise InvalidInputError(f"no bench result files in {', '.join(map(str, paths))}")
    return found


_OTHER_KIND = re.compile(r'"kind"\s*:\s*"campusguard-[a-z-]+"')


def _looks_like_result(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            head = f.read(4096)
    except OSError:
        return False
    if '"campusguard-bench"' in head:
        return True
    if _OTHER_KIND.search(head):  # another campusguard file kind (a host-cost file): not a bench result
        return False
    return '"schema_version"' in head


def write_result(result: dict[str, Any], path: str | Path) -> Path:
    """Validate and write a result as indented JSON."""
    validate_result(result, str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return path


def _get(d: dict[str, Any] | None, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def flatten_combination(machine: str, rec: dict[str, Any]) -> dict[str, Any]:
    """One CSV row (`CSV_COLUMNS`) of a combination record."""
    lat = rec.get("latency_ms") or {}
    return {
        "machine": machine,
        "model": rec.get("model"),
        "backend": rec.get("backend"),
        "precision": rec.get("precision"),
        "batch": rec.get("batch"),
        "scenario": rec.get("scenario"),
        "streams": rec.get("streams"),
        "status": rec.get("status"),
        "reason": rec.get("reason"),
        "device": rec.get("device"),
        "provider": rec.get("provider"),
        "export": rec.get("export"),
        "random_weights": rec.get("random_weights"),
        "nms": rec.get("nms"),
        "load_ms": _get(rec, "first_inference_ms", "load_ms"),
        "first_run_ms": _get(rec, "first_inference_ms", "first_run_ms"),
        "mean_ms": lat.get("mean"),
        "p50_ms": lat.get("p50"),
        "p90_ms": lat.get("p90"),
        "p99_ms": lat.get("p99"),
        "min_ms": lat.get("min"),
        "max_ms": lat.get("max"),
        "std_ms": lat.get("std"),
        "iterations": rec.get("iterations"),
        "per_image_ms": rec.get("per_image_ms"),
        "throughput_ips": rec.get("throughput_ips"),
        "preprocess_ms": _get(rec, "stages_ms", "preprocess"),
        "inference_ms": _get(rec, "stages_ms", "inference"),
        "postprocess_ms": _get(rec, "stages_ms", "postprocess"),
        "harness_overhead_ms": rec.get("harness_overhead_ms"),
        "repeat_spread": rec.get("repeat_spread"),
        "host_rss_peak_mb": _get(rec, "memory", "host_rss_peak_mb"),
        "host_rss_slope_mb_per_s": _get(rec, "memory", "host_rss_slope_mb_per_s"),
        "device_peak_mb": _get(rec, "memory", "device_peak_mb"),
        "map50_95": _get(rec, "accuracy", "map50_95"),
        "map50": _get(rec, "accuracy", "map50"),
        "accuracy_status": _get(rec, "accuracy", "status"),
        "accuracy_reason": _get(rec, "accuracy", "reason"),
        "cost_per_million_usd": rec.get("cost_per_million_usd"),
    }


def write_csv(rows: Iterable[dict[str, Any]], path: str | Path) -> Path:
    """Write flattened combination rows (`flatten_combination`) as CSV; floats rounded to 4 decimals."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    return path
