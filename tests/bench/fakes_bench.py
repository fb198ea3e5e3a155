"""Helpers for the bench tests: tiny data sets and hand-made result documents with known numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np

from campusguard.bench.results import SCHEMA_VERSION


def write_tiny_dataset(root: Path, n: int = 3, label: str = "0 0.5 0.5 0.3125 0.3125\n") -> Path:
    """A YOLO data set of ``n`` 64x64 images, each labelled with ``label``; returns its data.yaml."""
    (root / "images" / "val").mkdir(parents=True)
    (root / "labels" / "val").mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        cv2.imwrite(str(root / "images" / "val" / f"im{i}.png"), rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
        (root / "labels" / "val" / f"im{i}.txt").write_text(label)
    data = root / "data.yaml"
    data.write_text(f"path: {root}\nval: images/val\nnames:\n  0: c0\n  1: c1\n")
    return data


def record(
    model: str = "yolov8n",
    backend: str = "onnxruntime",
    precision: str = "fp32",
    batch: int = 1,
    fps: float = 100.0,
    p50: float = 10.0,
    rss: float = 500.0,
    map50_95: float | None = None,
    price: float | None = None,
    status: str = "ok",
    reason: str | None = None,
    spread: float | None = None,
) -> dict[str, Any]:
    """A combination record with chosen headline numbers (other figures derived from them)."""
    base: dict[str, Any] = {
        "model": model,
        "backend": backend,
        "precision": precision,
        "batch": batch,
        "scenario": "batch",
        "streams": None,
        "status": status,
        "reason": reason,
        "device": "cpu",
    }
    if status != "ok":
        return base
    cost = None if price is None else price / (fps * 3600) * 1e6
    return {
        **base,
        "provider": "CPUExecutionProvider",
        "first_inference_ms": {"load_ms": 50.0, "first_run_ms": 30.0, "total_ms": 80.0},
        "latency_ms": {
            "n": 5,
            "mean": p50,
            "p50": p50,
            "p90": p50 * 1.1,
            "p99": p50 * 1.2,
            "min": p50 * 0.9,
            "max": p50 * 1.3,
            "std": 0.5,
        },
        "per_image_ms": p50 / batch,
        "throughput_ips": fps,
        "stages_ms": {"preprocess": 1.0, "inference": p50 - 2.0, "postprocess": 1.0},
        "harness_overhead_ms": 0.01,
        "iterations": 5,
        "seconds": 1.0,
        "repeats": None
        if spread is None
        else [{"p50_ms": p50, "throughput_ips": fps}, {"p50_ms": p50 * (1 + spread), "throughput_ips": fps}],
        "repeat_spread": spread,
        "repeat_agree": None if spread is None else spread <= 0.1,
        "memory": {"host_rss_peak_mb": rss, "host_rss_slope_mb_per_s": 0.0, "samples": 10, "device_peak_mb": None},
        "accuracy": (
            {"status": "ok", "map50_95": map50_95, "map50": map50_95 + 0.1}
            if map50_95 is not None
            else {"status": "skipped", "reason": "random-weight architecture model"}
        ),
        "cost_per_million_usd": cost,
        "samples_ms": [p50 * 0.9, p50, p50 * 1.1],
    }


def result_doc(
    machine: str, records: list[dict[str, Any]], price: float | None = None, created: str = "2026-11-30T00:00:00+00:00"
) -> dict[str, Any]:
    """A complete, schema-valid result document for ``machine``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "campusguard-bench",
        "run_id": f"x-{machine}",
        "machine": machine,
        "created_utc": created,
        "command": f"campusguard bench --machine {machine}",
        "notes": None,
        "environment": {"cpu": "test"},
        "config": {
            "models": ["yolov8n"],
            "backends": ["onnxruntime"],
            "precisions": ["fp32"],
            "batch": [1],
            "imgsz": [640, 640],
            "device": "cpu",
            "warmup": 1,
            "iters": 5,
            "min_seconds": 0.0,
            "repeat": 1,
            "price_per_hour": price,
        },
        "harness": {"timer_overhead_ms": 0.001},
        "results": records,
        "scenarios": [],
    }


def host_cost_doc(
    decode: float = 3.0,
    motion: float = 1.5,
    tracking_rules: float = 0.4,
    events: float = 0.1,
    resolution_wh: tuple[int, int] = (1280, 720),
) -> dict[str, Any]:
    """A complete, schema-valid host-cost document with chosen core-ms per frame of each stage."""
    from campusguard.bench.host_cost import HOST_COST_KIND, HOST_COST_SCHEMA_VERSION

    return {
        "schema_version": HOST_COST_SCHEMA_VERSION,
        "kind": HOST_COST_KIND,
        "created_utc": "2026-12-02T00:00:00+00:00",
        "command": "python benchmarks/host_cost.py",
        "notes": None,
        "cpu": "Test CPU",
        "logical_cores": 2,
        "load_average": 0.5,
        "video": {"resolution_wh": list(resolution_wh), "fps": 10, "codec": "h264", "frames": 600},
        "stages_ms": {"decode": decode, "motion": motion, "tracking_rules": tracking_rules, "events": events},
    }
