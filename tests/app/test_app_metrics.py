"""Per-camera metrics: rates between reports, totals at the end, JSON lines."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from campusguard.app.metrics import CameraMetrics, MetricsReporter


def test_reporter_gives_rates_since_last_report_and_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 10.0, 20.0])
    monkeypatch.setattr("campusguard.app.metrics.time.monotonic", lambda: next(clock))
    m = CameraMetrics("gate", queue_depth=lambda: 3)
    out = io.StringIO()
    rep = MetricsReporter([m], threading.Event(), 5.0, out, jsonl_path=str(tmp_path / "m.jsonl"))
    m.frames_in, m.frames_processed, m.frames_detected, m.inference_ms_total, m.frames_dropped = 100, 90, 90, 900.0, 10
    first = rep.report()[0]  # t = 10
    assert (first.input_fps, first.processed_fps, first.inference_ms, first.queue_depth, first.dropped) == (
        10.0,
        9.0,
        10.0,
        3,
        10,
    )
    m.frames_in, m.frames_processed, m.frames_detected, m.inference_ms_total = 150, 140, 140, 1400.0
    final = rep.final()[0]  # t = 20, whole run
    assert (final.input_fps, final.processed_fps, final.inference_ms) == (7.5, 7.0, 10.0)
    assert out.getvalue().count("[metrics] gate: ") == 2
    lines = [json.loads(x) for x in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [x["final"] for x in lines] == [False, True] and lines[1]["frames_processed"] == 140
