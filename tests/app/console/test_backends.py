"""`CameraBackend`: the console's one view of where its cameras run, local or on Ray.

Both implementations have every member of the protocol with the protocol's parameters; the
local one is driven through the protocol alone on a real tiny config (synthetic video, the
colour-blob detector, the real store); the Ray one is checked up to its start (no cluster here:
`tests/app/cluster/test_cluster_ray.py` runs it on one).
"""

from __future__ import annotations

import inspect
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import load_config  # noqa: E402
from campusguard.app.console.backends import CameraBackend, ClusterCameras, LocalCameras  # noqa: E402
from campusguard.app.console.node_cameras import NodeCameras
from campusguard.app.events import open_event_store  # noqa: E402
from campusguard.app.events.types import Event  # noqa: E402
from campusguard.app.media.clips import ClipRecorder  # noqa: E402

PROTOCOL_MEMBERS = [
    name
    for name in vars(CameraBackend)
    if not name.startswith("_")
    and (callable(vars(CameraBackend)[name]) or isinstance(vars(CameraBackend)[name], property))
]


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not true within {timeout} s")


def local_cameras(tmp: Path, clips: ClipRecorder) -> LocalCameras:
    return LocalCameras(
        ["cam1"],
        clips,
        snapshots_dir=tmp / "snaps",
        media_dir=tmp / "media",
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
        live_fps=15.0,
    )


def cluster_cameras(tmp: Path, clips: ClipRecorder) -> ClusterCameras:
    return ClusterCameras(
        ["cam1"],
        "127.0.0.1:1",
        clips,
        media_dir=tmp / "media",
        detector_factory=None,
        out=io.StringIO(),
        live_fps=15.0,
        timeout_s=1.0,
    )


def node_cameras(tmp: Path, clips: ClipRecorder) -> NodeCameras:
    return NodeCameras(
        ["cam1"],
        clips,
        node="north",
        url=None,
        snapshots_dir=tmp / "snaps",
        media_dir=tmp / "media",
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
        live_fps=15.0,
    )


def test_the_protocol_lists_what_the_console_asks() -> None:
    assert sorted(PROTOCOL_MEMBERS) == sorted(
        [
            "hub",
            "service",
            "start",
            "stop",
            "request_stop",
            "close",
            "status",
            "ready",
            "incident_started",
            "snapshot_file",
            "prepare_zones",
            "health",
            "accept_view",
            "clear_old_view_zones",
            "alert_sinks",
        ]
    )


@pytest.mark.parametrize("make", [local_cameras, cluster_cameras, node_cameras], ids=["local", "cluster", "node"])
def test_both_backends_have_every_member_of_the_protocol(make: Callable[..., Any], tmp_path: Path) -> None:
    backend = make(tmp_path, ClipRecorder(tmp_path / "clips"))
    check: CameraBackend = backend  # mypy checks the structure; the loop below the parameters
    for name in PROTOCOL_MEMBERS:
        expected = vars(CameraBackend)[name]
        got = getattr(type(backend), name)
        assert isinstance(got, property) == isinstance(expected, property), name
        if not isinstance(expected, property):
            assert list(inspect.signature(got).parameters) == list(inspect.signature(expected).parameters), name
    # before the start: no pipeline, nothing to apply, nothing served
    assert check.service is None
    assert check.status("cam1", (0.0, 0.0), stopped=False).state == "starting"
    assert check.status("cam1", (0.0, 0.0), stopped=True).state == "stopped"
    assert not check.ready(5.0, stopped=False)
    check.prepare_zones(load_config(write_config(tmp_path)), "", "cam1")()  # a no-op before the start
    assert check.health("cam1") is None  # nothing runs: no health to report
    with pytest.raises(KeyError):
        check.accept_view("cam1", "ada")
    check.clear_old_view_zones("cam1")  # nothing to forget
    assert check.hub.snapshot_jpeg("cam1") is None
    store = open_event_store(tmp_path / "events.db")
    try:
        assert check.snapshot_file("nothing", store) is None
    finally:
        store.close()
    check.close()


def write_config(tmp: Path, scene: Path | None = None) -> Path:
    scene = scene or write_scene(tmp / "scene.mp4")
    text = scene_config(scene, tmp).replace("    source:", "    realtime: true\n    loop: true\n    source:")
    path = tmp / "watch.yaml"
    path.write_text(text)
    return path


def test_the_local_backend_runs_a_real_config_through_the_protocol(tmp_path: Path) -> None:
    loaded = load_config(write_config(tmp_path))
    clips = ClipRecorder(tmp_path / "media" / "clips", pre_s=0.5, post_s=0.5)
    cameras: CameraBackend = local_cameras(tmp_path, clips)
    store = open_event_store(tmp_path / "events.db")
    events: list[Event] = []

    def on_event(event: Event) -> None:
        events.append(event)
        if event.phase == "start":
            cameras.incident_started(event)

    clips.start()
    cameras.start(loaded, store, on_event)
    try:
        assert cameras.service is not None
        status = wait_for(lambda: (s := cameras.status("cam1", (1.0, 2.0), stopped=False)).state == "live" and s)
        assert (status.width, status.height, status.input_fps, status.processed_fps) == (320, 180, 1.0, 2.0)
        assert wait_for(lambda: cameras.ready(5.0, stopped=False))
        assert not cameras.ready(5.0, stopped=True)
        assert wait_for(lambda: cameras.hub.snapshot_jpeg("cam1"))[:2] == b"\xff\xd8"
        apply = cameras.prepare_zones(loaded, "", "cam1")  # the same zones, checked against the frame
        apply()
        wait_for(lambda: [e for e in events if e.phase == "start"], timeout=30)
    finally:
        cameras.stop(30.0)
        cameras.close()
        clips.close()
        store.close()
    assert cameras.status("cam1", (0.0, 0.0), stopped=True).state == "stopped"
    started = next(e for e in events if e.phase == "start")
    assert cameras.snapshot_file(started.event_id, open_event_store(tmp_path / "events.db")) is not None
    assert clips.path_for(started.event_id).is_file()
