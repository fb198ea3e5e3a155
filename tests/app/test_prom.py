"""`campusguard.app.console.prom`: the pipeline's counters as Prometheus families, gating counters included."""

from __future__ import annotations

import io

import pytest

from campusguard.app.console.prom import CameraSample, PipelineSample, build_registry
from campusguard.app.engine.metrics import LatencyHistogram

prometheus_client = pytest.importorskip("prometheus_client")


def test_motion_gating_counters_are_exported_per_camera() -> None:
    gated = CameraSample(
        camera="gate",
        frames_read=100,
        frames_processed=100,
        frames_dropped=0,
        reconnects=0,
        input_fps=10.0,
        processed_fps=10.0,
        queue_depth=0,
        inference_seconds=LatencyHistogram(),
        detector_images=37,
        frames_skipped=70,
        frames_regions=12,
    )
    text = prometheus_client.generate_latest(build_registry(lambda: PipelineSample([gated]))).decode()
    assert 'campusguard_detector_images_total{camera="gate"} 37.0' in text
    assert 'campusguard_frames_skipped_total{camera="gate"} 70.0' in text
    assert 'campusguard_frames_regions_total{camera="gate"} 12.0' in text


def test_the_motion_gates_own_work_is_a_histogram_per_gated_camera() -> None:
    from campusguard.app.engine.metrics import CameraMetrics

    m = CameraMetrics("gate")
    for seconds, busy in ((0.0003, False), (0.0004, False), (0.00002, True)):
        m.observe_gate(seconds, busy)
    common = {"frames_read": 3, "frames_processed": 3, "frames_dropped": 0, "reconnects": 0, "input_fps": 1.0}
    common |= {"processed_fps": 1.0, "queue_depth": 0, "inference_seconds": LatencyHistogram()}
    gated = CameraSample(camera="gate", frames_gate_busy=m.frames_gate_busy, gate_seconds=m.gate_seconds, **common)
    plain = CameraSample(camera="plain", **common)  # not gated: no gate series
    text = prometheus_client.generate_latest(build_registry(lambda: PipelineSample([gated, plain]))).decode()
    assert 'campusguard_frames_gate_busy_total{camera="gate"} 1.0' in text
    assert 'campusguard_motion_gate_seconds_bucket{camera="gate",le="5e-05"} 1.0' in text
    assert 'campusguard_motion_gate_seconds_bucket{camera="gate",le="0.0005"} 3.0' in text
    assert 'campusguard_motion_gate_seconds_count{camera="gate"} 3.0' in text
    assert 'campusguard_motion_gate_seconds_count{camera="plain"}' not in text
    assert m.gate_ms_total == pytest.approx(0.72)


def test_store_retries_and_spooled_updates_are_exported_without_labels() -> None:
    sample = PipelineSample(store_retries=7, events_spooled=3)
    text = prometheus_client.generate_latest(build_registry(lambda: sample)).decode()
    assert "campusguard_store_retries_total 7.0" in text
    assert "campusguard_events_spooled_total 3.0" in text


def test_retention_metrics_are_exported() -> None:
    from prometheus_client import generate_latest

    from campusguard.app.console.prom import PipelineSample, build_registry

    sample = PipelineSample(
        media_bytes={"snapshots": 1000, "clips": 2000}, free_bytes=5000, files_pruned={"clips": 3}, rows_pruned=4
    )
    text = generate_latest(build_registry(lambda: sample)).decode()
    assert 'campusguard_media_bytes{kind="clips"} 2000.0' in text
    assert 'campusguard_retention_files_pruned_total{kind="clips"} 3.0' in text
    assert "campusguard_retention_rows_pruned_total 4.0" in text and "campusguard_data_free_bytes 5000.0" in text


def test_the_mqtt_connection_is_a_gauge_per_broker() -> None:
    sample = PipelineSample(mqtt_connected={"127.0.0.1:1883": False, "broker:1883": True})
    text = prometheus_client.generate_latest(build_registry(lambda: sample)).decode()
    assert 'campusguard_mqtt_connected{broker="127.0.0.1:1883"} 0.0' in text
    assert 'campusguard_mqtt_connected{broker="broker:1883"} 1.0' in text


def test_the_runtime_names_each_mqtt_broker_and_its_connection(tmp_path) -> None:
    """What ``/readyz`` and the gauge read: each MQTT sink of the running service, connected or not."""
    import socket
    import types

    from campusguard.app.alerts.mqtt import MqttSink
    from campusguard.app.alerts.stdout import StdoutSink
    from campusguard.app.console.runtime import ConsoleRuntime

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    sink = MqttSink("127.0.0.1", port, outbox_path=tmp_path / "o.db", connect_wait_s=0)
    try:
        runtime = ConsoleRuntime.__new__(ConsoleRuntime)
        stdout = StdoutSink(io.StringIO())  # keeps no connection: reports none
        runtime.cameras = types.SimpleNamespace(alert_sinks=lambda: [stdout, sink])  # the backend's sinks
        assert runtime.mqtt_connected() == {f"127.0.0.1:{port}": False}
    finally:
        sink.close(timeout_s=0.1)
