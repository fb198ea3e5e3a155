"""`watch` camera groups on a real two-node Ray cluster on this machine, one node killed mid-run.

The cluster is Ray's own multi-node test cluster (`ray.cluster_utils.Cluster`: a head node and
a second node, each its own raylet and worker processes, on 127.0.0.1 with a small object
store), in its own temporary folder so no other Ray session on the machine can find it. It is
shut down by the fixtures' finalizers even when a test fails.
"""

from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

# a machine-local cluster: Ray then uses 127.0.0.1 for every node and binds nothing else (read at Ray's import)
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip("ray")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import fakes_cluster  # noqa: E402
import fakes_watch  # noqa: E402
from fakes_cluster import (  # noqa: E402
    cameras_config,
    costly_detector_factory,
    incidents,
    make_detector_factory,
    sink_lines,
    write_walks,
)

from campusguard.app.cluster.driver import ClusterWatch  # noqa: E402
from campusguard.app.cluster.ray_executor import RayExecutor  # noqa: E402
from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import Event, read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402

pytestmark = pytest.mark.slow

MB = 1024 * 1024
NODE_ARGS: dict[str, Any] = {"object_store_memory": 80 * MB}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    """A head node (3 CPUs) with this process connected as the driver; removed at the end."""
    from ray.cluster_utils import Cluster

    tmp = tempfile.mkdtemp(prefix="cgray", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp
    c = None
    try:
        c = Cluster(
            initialize_head=True,
            head_node_args={
                **NODE_ARGS,
                "num_cpus": 3,
                "include_dashboard": False,
                "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
            },
        )
        ray.init(address=c.address, log_to_driver=False)
        for module in (fakes_cluster, fakes_watch):  # the workers unpickle the test detector without the tests' path
            ray.cloudpickle.register_pickle_by_value(module)
        yield c
    finally:
        ray.shutdown()
        if c is not None:
            c.shutdown()
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def node2(cluster: Any) -> Iterator[Any]:
    """A second node (2 CPUs, custom resource ``node2``), removed after the test if still there."""
    node = cluster.add_node(**NODE_ARGS, num_cpus=2, resources={"node2": 1})
    cluster.wait_for_nodes()
    try:
        yield node
    finally:
        if node in cluster.worker_nodes:
            cluster.remove_node(node, allow_graceful=False)


def run_single(videos: list[Path], out: Path) -> tuple[list[tuple], Counter]:
    out.mkdir()
    loaded = parse_config(cameras_config(videos, out))
    service = WatchService(loaded, detector_factory=make_detector_factory(loaded, 0.0), out=io.StringIO())
    assert service.run()
    return incidents(out / "events.db"), sink_lines(out / "events.jsonl")


def test_groups_on_two_nodes_give_the_same_events_and_survive_a_node_kill(node2: Any, cluster: Any, tmp_path: Path):
    videos = [write_walks(tmp_path / f"v{k}.avi", 200, offset=9 * k) for k in range(4)]
    single_rows, single_lines = run_single(videos, tmp_path / "single")
    assert len(single_rows) >= 12 and all(n == 1 for n in single_lines.values())

    out = tmp_path / "ray"
    out.mkdir()
    loaded = parse_config(cameras_config(videos, out, extra="  max_task_retries: -1\n  restart_timeout_s: 45\n"))
    executor = RayExecutor(loaded, detector_factory=costly_detector_factory)
    seen_on_node2 = threading.Event()
    node2_cameras: set[str] = set()

    def on_event(event: Event) -> None:
        if event.camera_id in node2_cameras and event.phase == "start":
            seen_on_node2.set()

    driver = ClusterWatch(loaded, executor, out=io.StringIO(), on_event=on_event)
    driver.start()
    try:
        nodes = [executor.describe(g) for g in range(2)]
        assert len(set(nodes)) == 2, f"SPREAD put both groups on {nodes}"
        node2_id = "node " + node2.node_id[:12]
        victim = nodes.index(node2_id)
        node2_cameras.update(driver.groups[victim].cameras)
        assert seen_on_node2.wait(40), "no incident from the second node's cameras"
        cluster.remove_node(node2, allow_graceful=False)  # the raylet and its workers are killed
        assert driver.wait(50)
        assert driver.finish()
    finally:
        driver.stop()
        driver.wait(10)
    assert driver.groups[victim].restarts >= 1
    assert executor.describe(victim) != node2_id  # resumed on the head
    assert incidents(out / "events.db") == single_rows  # nothing lost
    assert sink_lines(out / "events.jsonl") == single_lines  # nothing alerted twice


def test_the_watch_command_runs_camera_groups_on_the_cluster(cluster: Any, tmp_path: Path) -> None:
    """`campusguard watch CONFIG --ray ADDRESS` end to end: the bundled model on the actors, metrics on the driver."""
    import subprocess

    videos = [write_walks(tmp_path / f"v{k}.avi", 15) for k in range(2)]
    config = tmp_path / "watch.yaml"
    config.write_text(cameras_config(videos, tmp_path, cameras_per_actor=1))
    cmd = [sys.executable, "-m", "campusguard.cli.main", "watch", str(config), "--ray", cluster.address]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = [line for line in run.stdout.splitlines() if line.startswith("[metrics]")]
    assert sorted(line.split(":")[0] for line in metrics) == ["[metrics] cam0", "[metrics] cam1"]
    assert all("frames 15," in line for line in metrics), metrics


def ray_console(config: Path, tmp: Path, address: str) -> Any:
    """A `ConsoleUnderTest` (real app, users and runtime) with its cameras on the test cluster; not started."""
    pytest.importorskip("fastapi")
    pytest.importorskip("argon2")
    sys.path.insert(0, str(Path(__file__).parents[1] / "console"))
    from fakes_console import CHEAP_HASHER, PASSWORDS, ROLES, ConsoleUnderTest

    from campusguard.app.console.identity.users import UserStore
    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app

    runtime = ConsoleRuntime(
        config, ray_address=address, group_detector_factory=make_detector_factory, out=io.StringIO(), live_fps=10
    )
    users = UserStore(tmp / "users.db", password_hasher=CHEAP_HASHER)
    for name, role in ROLES.items():
        users.add_user(name, role, PASSWORDS[name])
    return ConsoleUnderTest(create_app(runtime, users_db=users), runtime, users, config, tmp)


def wait_for(check: Any, timeout_s: float, what: str) -> Any:
    """Poll ``check()`` every 0.1 s until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return got


def jpeg_shape(data: bytes) -> tuple[int, ...]:
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None, "not a JPEG"
    return tuple(image.shape)


def test_the_console_on_ray_serves_events_frames_and_incident_media(cluster: Any, tmp_path: Path) -> None:
    """`serve --ray` with file cameras: events and review from the shared store; each camera's last frame,
    and every incident's snapshot and clip copied from the actors (their paths are on the actors' nodes)."""
    videos = [write_walks(tmp_path / f"v{k}.avi", 60, offset=9 * k) for k in range(2)]
    config = tmp_path / "watch.yaml"
    config.write_text(cameras_config(videos, tmp_path, cameras_per_actor=1))
    c = ray_console(config, tmp_path, cluster.address)
    runtime = c.runtime
    runtime.start()
    try:
        assert runtime.service.wait(60)
        client = c.client()
        stored = read_events(tmp_path / "events.db")
        assert len(stored) >= 2
        page = client.get("/api/v1/events", headers=c.bearer("vera")).json()
        assert page["total"] == len(stored)
        event_id = stored[0].event_id
        ack = client.post(f"/api/v1/events/{event_id}/ack", json={"note": "seen"}, headers=c.bearer("otto"))
        assert ack.status_code == 200 and ack.json()["state"] == "acknowledged"
        cams = client.get("/api/v1/cameras", headers=c.bearer("vera")).json()
        assert [(x["name"], x["state"], x["width"], x["height"]) for x in cams] == [
            ("cam0", "stopped", 320, 180),
            ("cam1", "stopped", 320, 180),
        ]
        assert [x["health"] for x in cams] == [None, None]  # the groups do not report camera health
        accept = client.post("/api/v1/cameras/cam0/health/accept-view", headers=c.bearer("ada"))
        assert accept.status_code == 409 and "on Ray" in accept.json()["detail"]
        # the last frame of each camera, from its actor (kept after its file ended)
        for cam in ("cam0", "cam1"):
            r = client.get(f"/api/v1/cameras/{cam}/snapshot.jpg", headers=c.bearer("vera"))
            assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
            assert jpeg_shape(r.content) == (180, 320, 3)
        # a zone edit after the file ended: checked and sent to the actor, which still runs
        r = client.put(
            "/api/v1/cameras/cam1/zones", json={"zones": [LIVE_ZONE]}, headers={**c.bearer("ada"), "If-Match": "*"}
        )
        assert r.status_code == 200 and r.json()["zones"][0]["polygon"] == LIVE_ZONE["polygon"], r.text
        # incident media: written by the actors in their own folders, copied into the console's
        wait_for(lambda: runtime.cameras.media.pending() == 0, 30, "the incidents' media to be copied")
        assert runtime.cameras.media.given_up == 0
        for event in stored:
            assert "campusguard-group-" in (event.snapshot_path or "")  # the actor's private folder
            detail = client.get(f"/api/v1/events/{event.event_id}", headers=c.bearer("vera")).json()
            assert detail["snapshot_url"] and detail["clip_url"], detail
            snap = client.get(detail["snapshot_url"], headers=c.bearer("vera"))
            assert snap.status_code == 200 and jpeg_shape(snap.content) == (180, 320, 3)
            clip = client.get(detail["clip_url"], headers=c.bearer("vera"))
            assert clip.status_code == 200 and clip.content[4:8] == b"ftyp"  # an MP4
        actors = list(runtime.cameras.executor.actors)
    finally:
        runtime.stop()
        c.users.close()
    with pytest.raises(ray.exceptions.RayActorError):  # the console's stop ended the actors
        ray.get(actors[0].node_id.remote(), timeout=30)


LIVE_ZONE = {"name": "east", "polygon": [[160, 0], [320, 0], [320, 180], [160, 180]]}
"""The zone the tests draw through the API: the right half, which the scripted person walks through."""


def test_the_console_on_ray_streams_live_frames_and_edits_zones_across_a_restart(cluster: Any, tmp_path: Path) -> None:
    """A looping camera whose zone nobody enters: live frames (snapshot and MJPEG) from its actor; a zone
    drawn through the API is checked against the real frame on the actor, applied live (an intrusion
    follows), saved, and kept by the actor Ray restarts after a kill."""
    from campusguard.app.config import load_config

    video = write_walks(tmp_path / "v0.avi", 50)
    config = tmp_path / "watch.yaml"
    text = cameras_config([video], tmp_path, cameras_per_actor=1)
    text = text.replace("[[160, 0], [320, 0], [320, 180], [160, 180]]", "[[0, 0], [320, 0], [320, 40], [0, 40]]")
    text = text.replace(f"    source: {video}\n", f"    source: {video}\n    loop: true\n    realtime: true\n")
    config.write_text(text)
    c = ray_console(config, tmp_path, cluster.address)
    import httpx
    from fakes_console import mjpeg_frames, start_server, stop_server  # on the path once `ray_console` ran

    runtime = c.runtime
    runtime.start()
    server = start_server(c)
    try:
        auth = c.bearer("ada")
        client = c.client()
        wait_for(lambda: runtime.camera_status()[0].state == "live", 30, "the camera to be live")
        r = wait_for(
            lambda: (r := client.get("/api/v1/cameras/cam0/snapshot.jpg", headers=auth)).status_code == 200 and r,
            10,
            "a frame",
        )
        assert r.headers["content-type"] == "image/jpeg" and jpeg_shape(r.content) == (180, 320, 3)
        with (
            httpx.Client(base_url=server.url, headers=auth, timeout=30) as http,
            http.stream("GET", "/api/v1/cameras/cam0/live.mjpeg") as mjpeg,
        ):
            assert mjpeg.status_code == 200
            frames = mjpeg_frames(mjpeg, 3)
        assert len(frames) >= 3 and all(f.shape == (180, 320, 3) for f in frames)
        assert not read_events(tmp_path / "events.db")  # nobody enters the top strip

        # a zone that leaves the frame: refused by the actor's check with the config's error, nothing saved
        before = config.read_text()
        bad = {"zones": [{"name": "east", "polygon": [[0, 0], [400, 0], [400, 40]]}]}
        r = client.put("/api/v1/cameras/cam0/zones", json=bad, headers={**auth, "If-Match": "*"})
        assert r.status_code == 422, r.text
        detail = r.json()["detail"]  # as without Ray: the field of what was sent, never a server path
        assert detail.startswith("zones[0].polygon: "), detail
        assert str(config) not in detail and str(config.parent) not in detail, detail
        assert "camera 'cam0'" in detail, detail
        assert config.read_text() == before

        r = client.put("/api/v1/cameras/cam0/zones", json={"zones": [LIVE_ZONE]}, headers={**auth, "If-Match": "*"})
        assert r.status_code == 200, r.text
        assert load_config(config).config.cameras[0].zones[0].model_dump(mode="json")["polygon"] == LIVE_ZONE["polygon"]
        actor = runtime.cameras.executor.actor_of("cam0")
        wait_for(
            lambda: ray.get(actor.camera_zones.remote("cam0"))["east"] == LIVE_ZONE["polygon"], 10, "the zone applied"
        )
        events = wait_for(lambda: read_events(tmp_path / "events.db"), 20, "an intrusion in the drawn zone")
        assert {(e.rule_kind, e.zone) for e in events} == {("intrusion", "east")}

        # the actor dies; Ray restarts it (its constructor gets the original config) and it starts with the edit
        incarnation = runtime.service.groups[0].incarnation
        ray.kill(actor, no_restart=False)
        runtime.cameras.timeout_s = 0.001  # the restarting actor cannot answer that fast: a clean 503, not a 500
        time.sleep(0.2)  # past the cached frame's 1 / live_fps
        saved = config.read_text()
        r = client.get("/api/v1/cameras/cam0/snapshot.jpg", headers=auth)
        assert r.status_code == 503 and r.headers["retry-after"] == "5", r.text
        edit = {
            "zones": [{**LIVE_ZONE, "anchor": "center"}],
            "lines": [],
        }  # a change (a save of no change writes nothing)
        r = client.put("/api/v1/cameras/cam0/zones", json=edit, headers={**auth, "If-Match": "*"})
        assert r.status_code == 503 and "did not answer" in r.json()["detail"], r.text
        assert config.read_text() == saved  # nothing changed
        runtime.cameras.timeout_s = 5.0
        wait_for(lambda: runtime.service.groups[0].incarnation not in (None, incarnation), 60, "the restart")
        assert ray.get(actor.camera_zones.remote("cam0"))["east"] == LIVE_ZONE["polygon"]
        restarted = runtime.service.groups[0].incarnation
        key, jpeg = wait_for(lambda: runtime.cameras.executor.frame_jpeg("cam0"), 20, "a frame of the restarted actor")
        assert key[0] == restarted and jpeg is not None and jpeg_shape(jpeg) == (180, 320, 3)
        r = client.get("/api/v1/cameras/cam0/snapshot.jpg", headers=auth)
        assert r.status_code == 200 and jpeg_shape(r.content) == (180, 320, 3)
    finally:
        stop_server(server)
        runtime.stop()
        c.users.close()
