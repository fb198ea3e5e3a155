"""A disk that fills never stops detection: a real 3 MiB tmpfs holding store, snapshots and recording.

The tmpfs needs root (CI runs as root); where mounting is refused the tests skip with the reason.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.app.alerts.jsonl import JsonlSink  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.events.protocols import StoreUnavailableError  # noqa: E402
from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.events.types import Event  # noqa: E402
from campusguard.app.infra.diskspace import DiskHealth  # noqa: E402
from campusguard.app.media.annotate import AnnotatedVideoWriter, recording_segments  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 3 MiB tmpfs, unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path, leave_bytes: int = 0) -> Path:
    """Fill the volume of ``folder`` up to ``leave_bytes`` free; returns the filler file."""
    filler = folder / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
                if free <= leave_bytes:
                    break
                fh.write(b"\0" * min(65536, max(4096, free - leave_bytes)))
                fh.flush()
        except OSError:
            pass
    return filler


def _event(k: int, phase: str = "start") -> Event:
    return Event(
        event_id=f"{k:032x}",
        camera_id="cam",
        rule_name="intrusion:z",
        rule_kind="intrusion",
        zone="z",
        start_s=float(k),
        end_s=None if phase != "end" else float(k) + 1,
        tracker_ids=(1,),
        class_ids=(0,),
        phase=phase,
    )


def test_jsonl_sink_keeps_lines_while_the_disk_is_full_and_never_cuts_one(small_disk: Path) -> None:
    disk = DiskHealth(reserve_bytes=0, log_interval_s=60)
    sink = JsonlSink(small_disk / "alerts.jsonl", disk=disk)
    filler = _fill(small_disk)
    for k in range(5):
        sink.send(_event(k))  # never raises
    assert sink.failed_writes >= 1 and disk.full_volumes()
    assert (small_disk / "alerts.jsonl").read_bytes() == b""  # nothing half-written
    filler.unlink()
    sink.send(_event(5))
    sink.close()
    lines = (small_disk / "alerts.jsonl").read_text().splitlines()
    assert [json.loads(x)["event_id"] for x in lines] == [f"{k:032x}" for k in range(6)]  # in order, once each


def test_sqlite_disk_full_is_store_unavailable_and_commits_after_room_returns(small_disk: Path) -> None:
    store = SQLiteEventStore(small_disk / "events.db")
    store.record(_event(0))
    filler = _fill(small_disk)
    with pytest.raises(StoreUnavailableError, match="disk is full"):
        for k in range(1, 2000):  # the WAL's pre-allocated pages take a few rows first
            store.record(_event(k, "start").with_snapshot("x" * 2000))
    filler.unlink()
    store.record(_event(9999))  # the same connection takes writes again
    assert store.get(f"{9999:032x}") is not None
    store.close()


def test_recording_pauses_on_a_full_disk_and_every_finished_segment_plays(small_disk: Path) -> None:
    disk = DiskHealth(reserve_bytes=256 * 1024)
    rng = np.random.default_rng(0)
    writer = AnnotatedVideoWriter(small_disk / "rec", "cam", 10.0, segment_frames=20, disk=disk)
    for _ in range(300):  # noise compresses badly: the disk fills within a few segments
        writer.write(rng.integers(0, 255, (180, 320, 3), np.uint8), time.time())
    writer.close()
    assert writer.frames_skipped > 0 and disk.skipped["recording"] >= 1 and disk.full_volumes()
    segments = recording_segments(small_disk / "rec", "cam")
    assert segments == writer.paths and len(segments) >= 2
    for p in segments:
        cap = cv2.VideoCapture(str(p))
        assert cap.read()[0], p
        cap.release()
    assert not [p for p in (small_disk / "rec").iterdir() if p.name.startswith(".")]


_KILLED = """
import sys, time
import numpy as np
from campusguard.app.media.annotate import AnnotatedVideoWriter
w = AnnotatedVideoWriter(sys.argv[1], "cam", 10.0, segment_frames=10)
for k in range(10_000):
    w.write(np.full((90, 160, 3), k % 255, np.uint8), time.time())
    if len(w.paths) == 2:
        print("ready", flush=True)
    time.sleep(0.005)
"""


def test_a_killed_process_leaves_its_earlier_segments_readable(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED, str(tmp_path / "rec")], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    segments = recording_segments(tmp_path / "rec", "cam")
    assert len(segments) >= 2
    for p in segments:
        cap = cv2.VideoCapture(str(p))
        n = 0
        while cap.read()[0]:
            n += 1
        cap.release()
        assert n == 10, p


_WATCH = """
import json, sys
from pathlib import Path
import yaml
sys.path.insert(0, {tests!r})
from fakes_watch import TruthDetector
from campusguard.app.config import parse_config
from campusguard.app.demo import demo_config
from campusguard.app.service import WatchService
from campusguard.app.signals import run_until_stopped
from campusguard.data.synth.classes import COCO_NAMES
names = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)
video, out = Path(sys.argv[1]), Path(sys.argv[2])
truth = json.loads(video.with_suffix(".json").read_text())
data = demo_config(truth, video, out)
loaded = parse_config(yaml.safe_dump(data), str(out / "watch.yaml"))
service = WatchService(loaded, detector_factory=lambda *a: TruthDetector(video.with_suffix(".json"), names))
sys.exit(0 if run_until_stopped(service) else 1)
"""


def test_a_3mib_disk_that_fills_with_media_never_stops_detection(small_disk: Path, tmp_path: Path) -> None:
    from campusguard.data.synth.video import generate_video

    truth = generate_video(13, tmp_path, size_wh=(640, 360), seconds=40, fps=10, name="scene").to_dict()
    scripted = len(truth["incidents"])
    script = textwrap.dedent(_WATCH.format(tests=str(Path(__file__).parent)))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "scene.mp4"), str(small_disk)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    disk_lines = [x for x in done.stderr.splitlines() if "disk full: volume" in x]
    assert len(disk_lines) == 1 and str(small_disk) in disk_lines[0] and "bytes free" in disk_lines[0]
    events = read_events(small_disk / "events.db")
    assert len(events) >= scripted - 1  # every incident (within one) stored ...
    assert all(e.end_s is not None for e in events)  # ... and ended
    snapshots = [e.snapshot_path for e in events if e.snapshot_path]
    assert all(Path(p).is_file() for p in snapshots)  # none names a file that was not written
    assert len(snapshots) < len(events)  # the disk did fill: some went on without one
    alerts = [json.loads(x) for x in (small_disk / "events.jsonl").read_text().splitlines()]
    assert {a["event_id"] for a in alerts if a["phase"] == "start"} == {e.event_id for e in events}
    for p in recording_segments(small_disk / "annotated", truth["camera_id"]):
        cap = cv2.VideoCapture(str(p))
        assert cap.read()[0], p
        cap.release()



def test_a_full_volume_is_a_metric_and_names_itself(tmp_path: Path) -> None:
    from prometheus_client import generate_latest

    from campusguard.app.console.prom import PipelineSample, build_registry

    disk = DiskHealth(reserve_bytes=0)
    disk.failed("snapshot", tmp_path / "snaps" / "a.jpg", OSError(28, "No space left on device"))
    (state,) = disk.full_volumes().values()
    assert state.full and "No space left" in state.last_error and disk.failures == {"snapshot": 1}
    sample = PipelineSample(disk_full={v: s.full for v, s in disk.volumes().items()}, disk_write_failures=disk.failures)
    text = generate_latest(build_registry(lambda: sample)).decode()
    assert f'campusguard_disk_full{{volume="{state.volume}"}} 1.0' in text
    assert 'campusguard_disk_write_failures_total{kind="snapshot"} 1.0' in text
    disk.ok(tmp_path / "snaps" / "b.jpg")  # a write went through and the reserve is free: not full any more
    assert not disk.full_volumes()
