"""The cluster driver with in-process camera groups: same events as one process, restarts and dead groups.

The groups are real `CameraGroup` objects running the real pipeline on real video files (with
the colour-blob detector); a restart is a new `CameraGroup` replacing a running one, as Ray
does with a dead actor, so the at-least-once delivery and the deduplication are what is tested.
"""

from __future__ import annotations

import functools
import io
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_cluster import cameras_config, incidents, make_detector_factory, sink_lines, write_walks  # noqa: E402

from campusguard.app.cluster.driver import ClusterWatch, LocalExecutor, Unavailable  # noqa: E402
from campusguard.app.cluster.group import Ack, Batch, CameraGroup, camera_groups  # noqa: E402
from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.event_side import Ownership  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.errors import ConfigError  # noqa: E402

FRAMES = 120


@pytest.fixture
def videos(tmp_path: Path) -> list[Path]:
    return [write_walks(tmp_path / f"v{k}.avi", FRAMES, offset=7 * k) for k in range(3)]


def run_single(videos: list[Path], out: Path) -> tuple[list[tuple], Counter]:
    out.mkdir()
    loaded = parse_config(cameras_config(videos, out))
    service = WatchService(loaded, detector_factory=make_detector_factory(loaded, 0.0), out=io.StringIO())
    assert service.run()
    return incidents(out / "events.db"), sink_lines(out / "events.jsonl")


def factory(loaded: object) -> object:
    return make_detector_factory(loaded, 0.0)


def test_groups_are_cut_in_config_order(videos: list[Path], tmp_path: Path) -> None:
    loaded = parse_config(cameras_config(videos, tmp_path, cameras_per_actor=2))
    assert camera_groups(loaded) == [["cam0", "cam1"], ["cam2"]]
    group = CameraGroup(loaded, ["cam2"], detector_factory=factory)
    assert [c.enabled for c in group.loaded.config.cameras] == [False, False, True]
    assert group.loaded.config.alerts == []


def test_local_groups_give_the_same_events_as_one_process(videos: list[Path], tmp_path: Path) -> None:
    single_rows, single_lines = run_single(videos, tmp_path / "single")
    assert len(single_rows) >= 6 and all(n == 1 for n in single_lines.values())
    out = tmp_path / "groups"
    out.mkdir()
    loaded = parse_config(cameras_config(videos, out))
    text = io.StringIO()
    driver = ClusterWatch(loaded, LocalExecutor(loaded, detector_factory=factory), out=text)
    driver.start()
    assert driver.wait(30) and driver.finish()
    assert incidents(out / "events.db") == single_rows
    assert sink_lines(out / "events.jsonl") == single_lines
    assert driver.duplicates == 0
    metrics = [line for line in text.getvalue().splitlines() if line.startswith("[metrics]")]
    assert len(metrics) == 3 and f"frames {FRAMES}," in metrics[0]
    # each group keeps its cameras' tracks for replay, as the one process does (issue 45)
    assert _tracked(out / "tracks") == _tracked(tmp_path / "single" / "tracks") and len(_tracked(out / "tracks")) == 3


def _tracked(folder: Path) -> dict[str, tuple[int, int]]:
    """Camera to (frames, detections) in the track files of ``folder``."""
    from campusguard.app.tracks.files import list_track_files, read_track_file

    found: dict[str, tuple[int, int]] = {}
    for path, camera, _, _ in list_track_files(folder):
        block = read_track_file(path).block
        frames, dets = found.get(camera, (0, 0))
        found[camera] = (frames + block.frames, dets + block.detections)
    return found


def test_the_driver_replays_the_spool_before_the_groups_events(videos: list[Path], tmp_path: Path, make_event) -> None:
    from campusguard.app.events.spool import EventSpool

    loaded = parse_config(cameras_config(videos[:1], tmp_path))
    spool = EventSpool(loaded.config.storage.spool_path())
    left = [make_event(event_id="left-over"), make_event(event_id="left-over", phase="end", end_s=20.0)]
    spool.append(left)  # what an earlier run could not store before its stop
    driver = ClusterWatch(loaded, LocalExecutor(loaded, detector_factory=factory), out=io.StringIO())
    driver.start()
    assert driver.wait(30) and driver.finish()
    assert not spool.exists() and driver.event_worker is not None and driver.event_worker.replayed == 2
    stored = {e.event_id: e for e in read_events(tmp_path / "events.db")}
    assert stored["left-over"] == left[-1] and len(stored) > 1
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(line)["event_id"] for line in lines[:2]] == ["left-over"] * 2  # first, then the groups'
    assert sink_lines(tmp_path / "events.jsonl")[("left-over", "end")] == 1


class RestartingExecutor(LocalExecutor):
    """Replaces group ``victim`` by a new `CameraGroup` (a new incarnation) once it has delivered an open incident.

    The old group is stopped and never pulled again, as if its process had died: what it had
    not handed over is lost, as with a dead actor. With ``dead=True`` the group never answers again.
    """

    def __init__(self, *args, victim: int, dead: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.victim, self.dead, self.killed = victim, dead, False

    def poll(self, acks: dict[int, Ack | None], timeout_s: float) -> dict[int, Batch | Unavailable]:
        out: dict[int, Batch | Unavailable] = {}
        if self.killed and self.dead and self.victim in acks:
            out[self.victim] = Unavailable("actor died")
            acks = {g: a for g, a in acks.items() if g != self.victim}
        out.update(super().poll(acks, timeout_s))
        reply = out.get(self.victim)
        if not self.killed and isinstance(reply, Batch) and self._leaves_one_open(reply):
            self.killed = True
            old = self.groups[self.victim]
            old.stop()
            if not self.dead:
                self.groups[self.victim] = CameraGroup(
                    self.loaded, old.camera_ids, detector_factory=self.detector_factory, opener=self.opener
                )
        return out

    @staticmethod
    def _leaves_one_open(reply: Batch) -> bool:
        """An incident whose last update in this batch leaves it open (a start and its end in one
        batch, as a slow machine's larger batches have, leave nothing open for the driver to end)."""
        latest = {e.event_id: e for _, e in reply.events}
        return any(e.is_open for e in latest.values())


def test_a_restarted_group_resumes_and_nothing_is_lost_or_duplicated(videos: list[Path], tmp_path: Path) -> None:
    single_rows, single_lines = run_single(videos, tmp_path / "single")
    out = tmp_path / "restart"
    out.mkdir()
    loaded = parse_config(cameras_config(videos, out))
    executor = RestartingExecutor(loaded, detector_factory=factory, victim=1)
    driver = ClusterWatch(loaded, executor, out=io.StringIO())
    driver.start()
    assert driver.wait(30) and driver.finish()
    assert executor.killed and driver.groups[1].restarts == 1
    assert driver.duplicates >= 1  # the restarted group sent its first incident again
    assert incidents(out / "events.db") == single_rows
    assert sink_lines(out / "events.jsonl") == single_lines
    assert driver.metrics["cam2"].frames_processed >= FRAMES  # the first run's frames plus the re-run's


def test_a_group_given_up_has_its_open_incidents_ended(videos: list[Path], tmp_path: Path) -> None:
    loaded = parse_config(cameras_config(videos, tmp_path, extra="  restart_timeout_s: 0.5\n"))
    executor = RestartingExecutor(loaded, detector_factory=factory, victim=1, dead=True)
    driver = ClusterWatch(loaded, executor, out=io.StringIO())
    driver.start()
    assert driver.wait(30)
    assert not driver.finish()  # a group was given up: the run is not clean
    cam2 = [e for e in read_events(tmp_path / "events.db") if e.camera_id == "cam2"]
    assert len(cam2) == 1 and not cam2[0].is_open
    assert cam2[0].details["ended_by"] == "cluster: camera group given up"
    assert driver.orphans_ended == 1
    assert {e.camera_id for e in read_events(tmp_path / "events.db")} == {"cam0", "cam1", "cam2"}


def test_a_start_up_error_is_one_line_naming_the_camera(tmp_path: Path) -> None:
    loaded = parse_config(cameras_config([tmp_path / "missing.avi"], tmp_path), path="cfg.yaml")
    driver = ClusterWatch(loaded, LocalExecutor(loaded, detector_factory=factory), out=io.StringIO())
    with pytest.raises(ConfigError, match=r"^cfg.yaml:\d+: cameras\[0\].source: camera 'cam0'"):
        driver.start()


def test_a_group_config_travels_small_and_keeps_its_line_numbers(tmp_path: Path) -> None:
    """Ray keeps big constructor arguments in the object store, where a dead node can lose them."""
    import pickle

    from campusguard.app.cluster.group import ConfigSpec

    videos = [tmp_path / f"v{k}.avi" for k in range(200)]
    config = tmp_path / "cfg.yaml"
    config.write_text(cameras_config(videos, tmp_path, cameras_per_actor=4))
    from campusguard.app.config import load_config

    loaded = load_config(config)
    spec = ConfigSpec.of(loaded, ["cam4", "cam5", "cam6", "cam7"])
    assert len(pickle.dumps(spec)) < 90_000  # Ray inlines arguments under 100 KiB
    again = spec.load()
    assert [c.id for c in again.config.cameras if c.enabled] == ["cam4", "cam5", "cam6", "cam7"]
    assert again.config.cameras[5].rules == loaded.config.cameras[5].rules
    assert again.where(("cameras", 5, "source")) == loaded.where(("cameras", 5, "source"))
    assert ":" in again.where(("cameras", 5, "source")).removeprefix(str(config))  # a line number
    group = CameraGroup(spec, ["cam4", "cam5", "cam6", "cam7"], detector_factory=factory)
    batch = group.pull()  # the videos do not exist: the start-up error names the camera's line
    assert batch.error is not None and batch.error.startswith(f"{config}:") and "cameras[4].source" in batch.error


class RestartAfterStopExecutor(LocalExecutor):
    """Group 1 dies and comes back just after the driver asked every group to stop."""

    def stop(self) -> None:
        super().stop()
        old = self.groups[1]
        self.groups[1] = CameraGroup(self.loaded, old.camera_ids, detector_factory=self.detector_factory)


def test_a_group_restarted_after_the_stop_stops_too(videos: list[Path], tmp_path: Path) -> None:
    """Looping cameras never end by themselves: the restarted group must learn the stop from its pulls."""
    text = cameras_config(videos, tmp_path).replace("    source:", "    loop: true\n    source:")
    loaded = parse_config(text)
    driver = ClusterWatch(loaded, RestartAfterStopExecutor(loaded, detector_factory=factory), out=io.StringIO())
    driver.start()
    try:
        assert not driver.wait(1.0)  # looping: still running
        driver.stop()
        assert driver.wait(30), "the restarted group did not stop"
    finally:
        driver.executor.stop()
    assert driver.groups[1].restarts == 1
    assert all(not e.is_open for e in read_events(tmp_path / "events.db"))


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def live_url(tmp_path: Path) -> Iterator[str]:
    """A video served over HTTP on 127.0.0.1: a URL source, i.e. a live camera (stream time is the clock)."""
    folder = tmp_path / "served"
    folder.mkdir()
    write_walks(folder / "live.avi", FRAMES)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/live.avi"
    finally:
        server.shutdown()
        server.server_close()


def test_a_live_cameras_open_incident_is_ended_when_its_group_restarts(
    videos: list[Path], live_url: str, tmp_path: Path
) -> None:
    """A restarted group cannot raise a live camera's incident again: the driver ends it, saying why."""
    loaded = parse_config(cameras_config([videos[0], videos[1], live_url], tmp_path))  # type: ignore[list-item]
    assert loaded.config.cameras[2].is_live()
    executor = RestartingExecutor(loaded, detector_factory=factory, victim=1)
    driver = ClusterWatch(loaded, executor, out=io.StringIO())
    driver.start()
    try:
        deadline = time.monotonic() + 30
        while driver.orphans_ended == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        driver.stop()
        assert driver.wait(30)
        driver.finish()
    assert executor.killed and driver.groups[1].restarts == 1 and driver.orphans_ended >= 1
    cam2 = [e for e in read_events(tmp_path / "events.db") if e.camera_id == "cam2"]
    ended = [e for e in cam2 if e.details.get("ended_by")]
    assert (
        ended and ended[0].details["ended_by"] == "cluster: camera group restarted; a live stream cannot raise it again"
    )
    assert ended[0].end_s == ended[0].start_s and ended[0].phase == "end"
    assert all(not e.is_open for e in cam2)
    assert all(n == 1 for n in sink_lines(tmp_path / "events.jsonl").values())


def test_the_driver_ends_the_incidents_a_killed_driver_left_open_as_watch_does(
    videos: list[Path], live_url: str, tmp_path: Path, make_event
) -> None:
    """An owned driver ends a dead run's open incidents as interrupted (`Ownership.ends_dead_runs`),
    once: a live camera's at the start, a file's when its group finishes."""
    from campusguard.app.events import open_event_store
    from campusguard.app.events.types import INTERRUPTED_SEQUENCE

    loaded = parse_config(cameras_config([videos[0], live_url], tmp_path, cameras_per_actor=1))  # type: ignore[list-item]
    assert not loaded.config.cameras[0].is_live() and loaded.config.cameras[1].is_live()
    store = open_event_store(str(tmp_path / "events.db"))
    try:  # what the killed driver committed: two incidents, never ended
        for camera in ("cam0", "cam1"):
            store.record(make_event(event_id=f"left-open-{camera}", camera_id=camera))
    finally:
        store.close()
    driver = ClusterWatch(loaded, LocalExecutor(loaded, detector_factory=factory), out=io.StringIO())
    driver.start()
    try:  # the live camera's group runs until stopped; the file's finishes on its own (the ends wait for that)
        worker = driver.event_worker
        assert worker is not None
        deadline = time.monotonic() + 30
        while worker.interrupted_ended < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        driver.stop()
        assert driver.wait(30)
        driver.finish()
    assert worker.interrupted_ended == 2
    stored = {e.event_id: e for e in read_events(tmp_path / "events.db")}
    alerted = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for camera in ("cam0", "cam1"):
        ended = stored[f"left-open-{camera}"]
        assert ended.phase == "end" and ended.details.get("interrupted") is True and not ended.is_open
        ends = [a for a in alerted if a["event_id"] == f"left-open-{camera}"]
        assert [(a["phase"], a["sequence"]) for a in ends] == [("end", INTERRUPTED_SEQUENCE)]


def test_a_group_keeps_frames_and_media_and_takes_edited_zones_before_and_after_its_start(tmp_path: Path) -> None:
    """What `serve --ray` asks a group for: the latest frame as JPEG, an incident's snapshot and clip, and
    zone edits (checked against the real frame; one sent before the start is what the group starts with)."""
    import cv2
    import numpy as np

    from campusguard.app.cluster.group import ConfigSpec, MediaOptions
    from campusguard.app.config import load_config

    video = write_walks(tmp_path / "v0.avi", 60)
    config = tmp_path / "cfg.yaml"
    config.write_text(cameras_config([video], tmp_path, cameras_per_actor=1))
    loaded = load_config(config)
    group = CameraGroup(loaded, ["cam0"], detector_factory=factory, media=MediaOptions(1.0, 1.0))

    def spec_with(polygon: str) -> ConfigSpec:
        text = config.read_text().replace("[[160, 0], [320, 0], [320, 180], [160, 180]]", polygon)
        return ConfigSpec.of(parse_config(text, str(config)), ["cam0"], text)

    assert group.frame_jpeg("cam0") is None  # no frame before the start
    group.set_config(1, spec_with("[[100, 0], [320, 0], [320, 180], [100, 180]]"))
    group.pull()
    assert group.camera_zones("cam0")["east"][0] == [100.0, 0.0]  # started with the edit
    bad = group.check_config(spec_with("[[100, 0], [400, 0], [400, 180]]"), "cam0")
    assert bad is not None and bad.startswith(f"{config}:") and "cameras[0].zones[0].polygon" in bad
    assert group.check_config(spec_with("[[0, 0], [320, 0], [320, 180]]"), "cam0") is None
    group.set_config(1, spec_with("[[0, 0], [9, 0], [9, 9]]"))  # not newer: ignored
    deadline = time.monotonic() + 30
    while not group.pull().finished:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert group.camera_zones("cam0")["east"][0] == [100.0, 0.0]
    key, jpeg = group.frame_jpeg("cam0")  # type: ignore[misc]
    assert jpeg is not None
    assert cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR).shape == (180, 320, 3)
    assert group.frame_jpeg("cam0", key) == (key, None)  # nothing new: no bytes sent again
    starts = [e for _, e in group.outbox.pending(100)[0] if e.phase == "start"]
    assert starts and all(str(group.media_dir) in (e.snapshot_path or "") for e in starts)
    snapshot = group.media("snapshot", starts[0].event_id)
    assert snapshot is not None and snapshot[:2] == b"\xff\xd8"  # a JPEG
    while (clip := group.media("clip", starts[0].event_id)) is None:  # written by the clip thread
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert clip[4:8] == b"ftyp"
    assert group.media("snapshot", "unknown") is None
    # a zone edit is checked, then sent: the camera's zones and rules are built once, by the check
    built: list[str] = []
    applied: list[object] = []
    service, build, apply = group.service, group.service.build_camera_parts, group.service.apply_camera_parts
    service.build_camera_parts = lambda loaded, cam: built.append(cam) or build(loaded, cam)  # type: ignore[method-assign]
    service.apply_camera_parts = lambda loaded, cam, p: applied.append(p) or apply(loaded, cam, p)  # type: ignore[method-assign]
    edit = spec_with("[[0, 0], [320, 0], [320, 180]]")
    assert group.check_config(edit, "cam0") is None
    group.set_config(2, edit)
    assert built == ["cam0"] and len(applied) == 1
    group.discard_media()
    assert group.media_dir is not None and not group.media_dir.exists()


def test_the_driver_shows_the_state_each_groups_reader_reported(videos: list[Path], tmp_path: Path) -> None:
    """While a group answers, a camera's state is its reader's (`CameraReader.state`, sent in `Batch.states`);
    a restarted group's cameras start from what its own answers say."""
    from campusguard.app.cluster.driver import _GroupState

    loaded = parse_config(cameras_config(videos[:1], tmp_path))
    driver = ClusterWatch(loaded, LocalExecutor(loaded), out=io.StringIO())
    driver.groups = [_GroupState(["cam0"])]
    assert driver.camera_state("cam0") == "starting"
    driver._take(0, Batch("one", states={"cam0": "reconnecting"}))
    assert driver.camera_state("cam0") == "reconnecting"
    driver._take(0, Batch("one", states={"cam0": "live"}))
    assert driver.camera_state("cam0") == "live"
    driver._take(0, Batch("two"))  # restarted; its reader has not started yet
    assert driver.camera_state("cam0") == "starting"
    driver._unavailable(0, Unavailable("actor died"))
    assert driver.camera_state("cam0") == "reconnecting"
    driver._take(0, Batch("two", finished=True, clean=True, states={"cam0": "stopped"}))
    assert driver.camera_state("cam0") == "stopped"


def test_a_groups_answer_carries_its_readers_states(videos: list[Path], tmp_path: Path) -> None:
    loaded = parse_config(cameras_config(videos[:1], tmp_path))
    group = CameraGroup(loaded, ["cam0"], detector_factory=factory)
    batch = group.pull()
    try:
        assert batch.error is None and batch.states["cam0"] in ("starting", "live", "stopped")
        deadline = time.monotonic() + 30
        while not batch.finished and time.monotonic() < deadline:
            time.sleep(0.1)
            batch = group.pull(Ack(batch.incarnation, batch.events[-1][0]) if batch.events else None)
        assert batch.finished and batch.states == {"cam0": "stopped"}
    finally:
        group.stop()


def test_two_groups_in_one_process_leave_the_spool_and_retention_to_the_driver(
    videos: list[Path], tmp_path: Path
) -> None:
    """Each group's service writes to its in-memory outbox; the driver owns the store, so a group
    writes no spool (two groups sharing the config's spool file crashed a writer: it removed the
    file under the other one) and runs no retention stage of its own."""
    loaded = parse_config(cameras_config(videos[:2], tmp_path, cameras_per_actor=1))
    groups = [CameraGroup(loaded, [cam], detector_factory=factory) for cam in ("cam0", "cam1")]
    try:
        batches = [g.pull() for g in groups]
        deadline = time.monotonic() + 30
        while not all(b.finished for b in batches) and time.monotonic() < deadline:
            time.sleep(0.1)
            batches = [
                g.pull(Ack(b.incarnation, b.events[-1][0]) if b.events else None)
                for g, b in zip(groups, batches, strict=True)
            ]
        assert all(b.finished and b.error is None for b in batches)
        for g in groups:
            service = g.service
            assert service is not None and service.events.ownership is Ownership.GROUP
            assert service.event_worker.spool is None and service.retention is None
        assert not (tmp_path / "events.spool.jsonl").exists()
    finally:
        for g in groups:
            g.stop()


def test_the_driver_reports_the_motion_gates_counters_of_its_groups(videos: list[Path], tmp_path: Path) -> None:
    """Gated cameras on groups: the driver's metrics carry the gate's own cost and busy stretches,
    the same counters one process reports for the same videos."""
    text = cameras_config(videos, tmp_path).replace("    source:", "    motion: {enabled: true}\n    source:")
    single_out = tmp_path / "single"
    single_out.mkdir()
    single = WatchService(
        parse_config(text.replace(str(tmp_path / "events.jsonl"), str(single_out / "events.jsonl"))),
        detector_factory=make_detector_factory(parse_config(text), 0.0),
        out=io.StringIO(),
    )
    assert single.run()
    loaded = parse_config(text)
    driver = ClusterWatch(loaded, LocalExecutor(loaded, detector_factory=factory), out=io.StringIO())
    driver.start()
    assert driver.wait(30) and driver.finish()
    for cam in ("cam0", "cam1", "cam2"):
        one, many = single.metrics[cam], driver.metrics[cam]
        assert one.gate_ms_total > 0 and many.gate_ms_total > 0
        assert (many.frames_skipped, many.frames_regions, many.frames_gate_busy) == (
            one.frames_skipped,
            one.frames_regions,
            one.frames_gate_busy,
        )


def test_the_driver_and_the_groups_run_retention_where_rows_and_recordings_lie(
    videos: list[Path], tmp_path: Path, make_event
) -> None:
    """``watch --ray``: the driver expires incidents in the store; each group finishes or removes a
    dead run's recording segments and keeps its recordings within ``max_media`` on its node."""
    from datetime import UTC, datetime, timedelta

    from campusguard.app.events.sqlite import SQLiteEventStore

    text = cameras_config(
        videos[:2], tmp_path, extra="retention:\n  incidents: 1d\n  max_media: 60kB\n  min_free: 0B\n"
    )
    text = text.replace("outputs:\n", f"outputs:\n  annotated_video_dir: {tmp_path / 'video'}\n")
    loaded = parse_config(text)
    old = datetime.now(UTC) - timedelta(days=3)
    with SQLiteEventStore(tmp_path / "events.db") as store:
        store.record(make_event(event_id="old", camera_id="cam0", phase="end", end_s=2.0, started_at=old, ended_at=old))
    (tmp_path / "video").mkdir()
    dead = tmp_path / "video" / ".cam0_20200101T000000Z_0001.part.mp4"
    dead.write_bytes(b"\0" * 100_000)  # a killed run's segment: no MP4 index, unreadable
    executor = LocalExecutor(loaded, detector_factory=factory)
    driver = ClusterWatch(loaded, executor, out=io.StringIO())
    driver.start()
    assert driver.wait(30) and driver.finish()
    assert driver.retention is not None and driver.retention.metrics.rows_pruned == 1
    pruned = [g.service.retention.metrics.files_pruned for g in executor.groups if g.service.retention is not None]
    assert len(pruned) == 1 and pruned[0].get("recordings", 0) >= 1  # one group (two cameras): recordings went
    assert "old" not in {e.event_id for e in read_events(tmp_path / "events.db")}
    assert not dead.exists()
    assert sum(p.stat().st_size for p in (tmp_path / "video").iterdir()) <= 60_000
