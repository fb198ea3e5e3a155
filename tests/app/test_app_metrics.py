"""Per-camera metrics: rates between reports, totals at the end, JSON lines."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from campusguard.app.engine.metrics import CameraMetrics, MetricsReporter


def test_reporter_gives_rates_since_last_report_and_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 10.0, 20.0])
    monkeypatch.setattr("campusguard.app.engine.metrics.time.monotonic", lambda: next(clock))
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


def test_the_metrics_lines_and_the_console_rates_are_one_computation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same counters over the same seconds: the `[metrics]` line and the console's `/metrics` gauges
    (`FrameRates`) give the same frames per second (they once computed them two ways)."""
    from campusguard.app.engine import metrics as metrics_module
    from campusguard.app.engine.metrics import FrameRates

    clock = iter([100.0, 103.0])
    monkeypatch.setattr(metrics_module.time, "monotonic", lambda: next(clock))
    m = CameraMetrics("c")
    reporter = MetricsReporter([m], threading.Event(), 0, io.StringIO())
    rates = FrameRates(window_s=10.0)
    rates.add("c", 100.0, m.frames_in, m.frames_processed)
    m.frames_in, m.frames_processed = 31, 20
    rates.add("c", 103.0, m.frames_in, m.frames_processed)
    (snap,) = reporter.report()
    assert (snap.input_fps, snap.processed_fps) == rates.fps("c") == (10.33, 6.67)


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ([], (0.0, 0.0)),
        ([(0.0, 5, 5)], (0.0, 0.0)),  # one sample: no rate yet
        ([(0.0, 0, 0), (2.0, 20, 10)], (10.0, 5.0)),
        (
            [(0.0, 0, 0), (1.0, 100, 100), (7.0, 130, 130), (8.0, 140, 140)],
            (10.0, 10.0),
        ),  # samples older than 5 s dropped
        ([(1.0, 0, 0), (1.0, 9, 9)], (0.0, 0.0)),  # no time between
    ],
)
def test_frame_rates_over_a_window(samples, expected) -> None:
    from campusguard.app.engine.metrics import FrameRates

    rates = FrameRates(window_s=5.0)
    for t, frames_in, processed in samples:
        rates.add("c", t, frames_in, processed)
    assert rates.fps("c") == expected
