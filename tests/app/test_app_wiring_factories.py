"""The factories section of `campusguard.app.engine.wiring`: the alerts factory, the store and sinks, readers."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pytest

from campusguard.app.alerts import JsonlSink, StdoutSink, WebhookSink
from campusguard.app.config import parse_config
from campusguard.app.engine.sources import FrameQueue
from campusguard.app.engine.wiring import open_alert_sinks, open_store_and_sinks, reader_for
from campusguard.app.events.recorder import EventRecorder
from campusguard.errors import ConfigError


def config_text(tmp: Path, alerts: str) -> str:
    return f"""\
cameras:
  - id: cam1
    source: {tmp / "missing.mp4"}
    stall_timeout_s: 3
alerts:
{alerts}
storage:
  sqlite: {tmp / "events.db"}
"""


def test_the_alerts_factory_builds_every_section_in_order(tmp_path: Path) -> None:
    alerts = f"""\
  - kind: stdout
  - kind: jsonl
    path: {tmp_path / "alerts.jsonl"}
  - kind: webhook
    url: http://127.0.0.1:9/hook
    retries: 2
"""
    loaded = parse_config(config_text(tmp_path, alerts))
    out = io.StringIO()
    sinks = open_alert_sinks(loaded, out)
    try:
        assert [type(s) for s in sinks] == [StdoutSink, JsonlSink, WebhookSink]
    finally:
        for s in sinks:
            s.close()


def test_a_sink_that_cannot_be_opened_names_its_section(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    alerts = f"  - kind: stdout\n  - kind: jsonl\n    path: {blocker / 'alerts.jsonl'}\n"
    loaded = parse_config(config_text(tmp_path, alerts), "watch.yaml")
    with pytest.raises(ConfigError, match=r"^watch\.yaml:7: alerts\[1\]: "):
        open_alert_sinks(loaded)


def test_the_store_and_sinks_open_together(tmp_path: Path) -> None:
    loaded = parse_config(config_text(tmp_path, "  - kind: stdout\n"))
    store, sinks = open_store_and_sinks(loaded, io.StringIO())
    try:
        assert isinstance(store, EventRecorder) and [type(s) for s in sinks] == [StdoutSink]
    finally:
        store.close()


def test_a_reader_takes_the_cameras_settings(tmp_path: Path) -> None:
    loaded = parse_config(config_text(tmp_path, "  []\n").replace("alerts:\n  []", "alerts: []"))
    cam = loaded.config.cameras[0]
    reader = reader_for(cam, FrameQueue(2, True), threading.Event())
    assert (reader.camera_id, reader.live, reader.stall_timeout_s) == ("cam1", False, 3)
