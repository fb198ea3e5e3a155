"""`ConsoleRuntime` on the real pipeline: a synthetic video, the colour-blob detector, the real store.

Checks what the console relies on: camera status and readiness, live frames and snapshots,
events pushed only after their commit, clips that decode, Prometheus metrics, media paths
that cannot leave the media folder, and zone edits applied live and written atomically.
"""

from __future__ import annotations

import io
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parents[1]))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import load_config  # noqa: E402
from campusguard.app.console.runtime import ConsoleRuntime  # noqa: E402
from campusguard.errors import ConfigError  # noqa: E402

prometheus_client = pytest.importorskip("prometheus_client")

GATE_FAR = [[0, 0], [40, 0], [40, 40], [0, 40]]  # the scripted person never goes there
GATE_ON_PATH = [[160, 0], [320, 0], [320, 180], [160, 180]]  # entered from about frame 18 of each loop


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"not true within {timeout} s")


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scene(tmp_path_factory.mktemp("video") / "scene.mp4")


def realtime_config(scene: Path, tmp: Path, loop: bool = False) -> Path:
    text = scene_config(scene, tmp).replace(
        "    source:", f"    realtime: true\n    loop: {str(loop).lower()}\n    source:"
    )
    path = tmp / "watch.yaml"
    path.write_text(text)
    return path


def gate_config(scene: Path, tmp: Path) -> Path:
    path = tmp / "watch.yaml"
    path.write_text(
        f"""\
detector:
  batch_size: 1
tracker:
  min_consecutive_frames: 1
cameras:
  - id: cam1
    source: {scene}
    realtime: true
    loop: true
    zones:
      - name: gate
        polygon: {GATE_FAR}
    rules:
      - kind: intrusion
        name: gate intrusion
        zone: gate
        classes: [person]
        min_seconds: 0.3
alerts: []
storage:
  sqlite: {tmp / "events.db"}
outputs:
  metrics_interval_s: 0
"""
    )
    return path


def new_runtime(config: Path, **kw: Any) -> ConsoleRuntime:
    return ConsoleRuntime(config, detector_factory=lambda *a: BlobDetector(), out=io.StringIO(), **kw)


def test_runtime_status_live_view_events_clips_metrics_and_media(scene: Path, tmp_path: Path) -> None:
    rt = new_runtime(realtime_config(scene, tmp_path), clip_pre_s=1.0, clip_post_s=1.0)
    assert rt.camera_names() == ["cam1"]
    assert rt.camera_status()[0].state == "starting" and not rt.ready()
    assert rt.store.get("nothing") is None  # the store is open before the pipeline starts
    sub = rt.subscribe_events()
    rt.start()
    try:
        with rt.open_viewer("cam1") as viewer:
            jpeg = wait_for(lambda: viewer.get(0.5), timeout=10)
        image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
        assert image.shape == (180, 320, 3)
        status = wait_for(lambda: [s for s in rt.camera_status() if s.state == "live" and s.input_fps > 0])[0]
        assert (status.width, status.height) == (320, 180) and abs(status.last_frame_time - time.time()) < 5
        assert 5 <= status.input_fps <= 15  # a 10 fps file paced in real time
        assert rt.ready()
        snapshot = rt.snapshot_jpeg("cam1")
        assert snapshot is not None and snapshot[:2] == b"\xff\xd8"
        with pytest.raises(KeyError):
            rt.snapshot_jpeg("nope")

        pushed: list[dict[str, Any]] = []

        def intrusion_ended() -> bool:
            while (event := sub.get(0.1)) is not None:
                # pushed only after the commit: the store already holds this state
                stored = rt.event_json(event["id"])
                assert stored is not None and stored["id"] == event["id"]
                pushed.append(event)
            return any(e["kind"] == "intrusion" and e["ended_at"] for e in pushed)

        wait_for(intrusion_ended, timeout=20)
        intrusion = next(e for e in pushed if e["kind"] == "intrusion")
        assert {e["kind"] for e in pushed} >= {"intrusion", "fire_lane"}

        clip = wait_for(lambda: rt.event_media(intrusion["id"], "clip"), timeout=15)
        with av.open(str(clip)) as container:
            stream = container.streams.video[0]
            frames = sum(1 for _ in container.decode(stream))
            duration = float(stream.duration * stream.time_base)
        assert stream.codec_context.name == "h264" and frames == rt.clips.written[intrusion["id"]]
        # 1 s before and after the start at 10 fps: 21 frames, fewer only if a loaded machine made the
        # real-time reader drop some (counted in the camera's dropped frames)
        assert 10 <= frames <= 21 and 1.0 <= duration <= 2.25

        snap = rt.event_media(intrusion["id"], "snapshot")
        assert snap is not None and snap.is_file() and snap.is_relative_to(rt.snapshots_dir.resolve())
        for bad in ("../../etc/passwd", "..", "a/b", "", "x" * 200, intrusion["id"] + "/../x"):
            assert rt.event_media(bad, "snapshot") is None and rt.event_media(bad, "clip") is None

        wait_for(lambda: rt.camera_status()[0].state == "stopped", timeout=15)  # the file ended
        assert not rt.ready()
        text = prometheus_client.generate_latest(rt.registry).decode()
        assert rt.service is not None
        processed, dropped = rt.service.metrics["cam1"].frames_processed, rt.camera_status()[0].dropped_frames
        assert processed + dropped == 60 and processed > 30
        assert 'campusguard_frames_read_total{camera="cam1"} 60.0' in text
        assert f'campusguard_frames_processed_total{{camera="cam1"}} {processed}.0' in text
        assert f'campusguard_frames_dropped_total{{camera="cam1"}} {dropped}.0' in text
        assert f'campusguard_inference_latency_seconds_count{{camera="cam1"}} {processed}.0' in text
        m = rt.service.metrics["cam1"]
        assert m.detector_images >= processed  # a file camera is not gated: one whole frame per processed frame
        assert f'campusguard_detector_images_total{{camera="cam1"}} {m.detector_images}.0' in text
        assert 'campusguard_frames_skipped_total{camera="cam1"} 0.0' in text
        assert re.search(r'campusguard_events_total\{camera="cam1",kind="intrusion",rule="[^"]+"\} 1\.0', text)
        for name in (
            "campusguard_reconnects_total",
            "campusguard_input_fps",
            "campusguard_processed_fps",
            "campusguard_queue_depth",
        ):
            assert f'{name}{{camera="cam1"}}' in text
    finally:
        rt.stop()
    assert rt.camera_status()[0].state == "stopped"
    assert sub.closed


def test_zones_put_is_applied_live_and_written_atomically_with_a_backup(scene: Path, tmp_path: Path) -> None:
    config = gate_config(scene, tmp_path)
    original = config.read_text()
    rt = new_runtime(config)
    sub = rt.subscribe_events()
    rt.start()
    try:
        wait_for(lambda: rt.camera_status()[0].state == "live")
        time.sleep(3.0)  # the person crosses the frame; the far gate sees nothing
        assert sub.get(0.1) is None
        assert rt.get_zones("cam1")["zones"][0]["polygon"] == GATE_FAR

        new = rt.put_zones("cam1", {"zones": [{"name": "gate", "polygon": GATE_ON_PATH}], "lines": []})
        assert new["zones"][0]["polygon"] == GATE_ON_PATH and rt.get_zones("cam1") == new

        event = wait_for(lambda: sub.get(0.2), timeout=20)  # no restart: the running rules changed
        assert event["kind"] == "intrusion" and event["zone"] == "gate"
        assert rt.store.get(event["id"]) is not None

        on_disk = load_config(config).config.cameras[0]
        assert [list(map(list, p)) for p in [on_disk.zones[0].polygon]] == [GATE_ON_PATH]
        assert Path(str(config) + ".bak").read_text() == original
        assert not list(tmp_path.glob(".watch.yaml.*"))  # no temporary file left
    finally:
        rt.stop()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"zones": []}, "unknown zone 'gate'"),
        ({"zones": [{"name": "gate", "polygon": [[0, 0], [100, 100], [100, 0], [0, 100]]}]}, "zones\\[0\\].polygon"),
        ({"zones": [{"name": "gate", "polygon": [[0, 0], [400, 0], [400, 100]]}]}, "outside the 320x180 frame"),
        ({"zones": [{"name": "gate", "polygon": GATE_ON_PATH, "colour": "red"}]}, "unknown key 'colour'"),
        ({"zones": "gate"}, "zones"),
        ({"cameras": []}, "unknown key 'cameras'"),
    ],
)
def test_invalid_zones_are_refused_and_nothing_changes(
    scene: Path, tmp_path: Path, body: dict[str, Any], message: str
) -> None:
    config = gate_config(scene, tmp_path)
    original = config.read_text()
    rt = new_runtime(config)
    rt.start()
    try:
        before = rt.get_zones("cam1")
        with pytest.raises(ConfigError, match=message):
            rt.put_zones("cam1", body)
        assert config.read_text() == original and not Path(str(config) + ".bak").exists()
        assert rt.get_zones("cam1") == before
        with pytest.raises(KeyError):
            rt.put_zones("nope", {"zones": []})
    finally:
        rt.stop()


def test_a_bad_config_is_one_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        new_runtime(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"cameras": [{"id": "c", "source": "x.mp4", "fps_cap": -1}]}))
    with pytest.raises(ConfigError, match="fps_cap"):
        new_runtime(bad)


def test_zones_put_ends_the_open_events_of_the_replaced_rules(scene: Path, tmp_path: Path) -> None:
    config = gate_config(scene, tmp_path)
    config.write_text(config.read_text().replace(f"polygon: {GATE_FAR}", f"polygon: {GATE_ON_PATH}"))
    rt = new_runtime(config)
    sub = rt.subscribe_events()
    rt.start()
    try:
        started = wait_for(lambda: sub.get(0.2), timeout=20)
        assert started["kind"] == "intrusion" and not started["ended_at"]
        rt.put_zones("cam1", {"zones": [{"name": "gate", "polygon": GATE_FAR}]})

        def ended() -> dict[str, Any] | None:
            event = sub.get(0.2)
            return event if event is not None and event["id"] == started["id"] and event["ended_at"] else None

        wait_for(ended, timeout=10)
        stored = rt.store.get(started["id"])
        # ended at the swap, not 1.5 s later when the person leaves the old zone (plus the 2 s grace)
        assert stored is not None and stored.end_s is not None and stored.end_s - stored.start_s < 1.2
    finally:
        rt.stop()


def test_serves_pipeline_runs_retention_on_the_consoles_store(scene: Path, tmp_path: Path, make_event) -> None:
    """One composition: the console's store is the pipeline's, whole. Retention has it (expired
    incidents deleted, as ``watch`` does), and the store stays open for the console after the
    file source ended (the pipeline does not close what the console owns)."""
    from datetime import UTC, datetime, timedelta

    from campusguard.app.events.protocols import EventDatabase
    from campusguard.app.events.sqlite import SQLiteEventStore

    config = tmp_path / "watch.yaml"
    config.write_text(scene_config(scene, tmp_path, "retention:\n  incidents: 1d\n  min_free: 0B\n"))
    old = datetime.now(UTC) - timedelta(days=3)
    with SQLiteEventStore(tmp_path / "events.db") as store:
        store.record(make_event(event_id="old", camera_id="cam1", phase="end", end_s=2.0, started_at=old, ended_at=old))
    runtime = ConsoleRuntime(config, detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    try:
        runtime.start()
        service = runtime.service
        assert service is not None and service.wait(60)
        assert isinstance(runtime.store, EventDatabase)
        assert service.retention is not None and service.retention.pruner.store is runtime.store
        wait_for(lambda: runtime.event_json("old") is None)  # deleted by serve's retention
        assert runtime.store.query_records(limit=None)[1] >= 1  # this run's incidents, read after the end
    finally:
        runtime.stop()
