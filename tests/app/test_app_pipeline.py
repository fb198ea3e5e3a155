"""The watch pipeline end to end on a real video file, with a colour-blob detector in place of the network."""

from __future__ import annotations

import io
import json
import re
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.engine.analytics import scale_detections  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.media.annotate import recording_segments  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.detections import Detections  # noqa: E402
from campusguard.errors import ConfigError  # noqa: E402


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scene(tmp_path_factory.mktemp("video") / "scene.mp4")


def run_service(text: str, detector: BlobDetector | None = None) -> tuple[WatchService, str]:
    out = io.StringIO()
    service = WatchService(
        parse_config(text, "watch.yaml"), detector_factory=lambda *a: detector or BlobDetector(), out=out
    )
    assert service.run()
    return service, out.getvalue()


def test_end_to_end_events_video_snapshots_and_metrics(scene: Path, tmp_path: Path) -> None:
    service, printed = run_service(scene_config(scene, tmp_path))
    events = {e.rule_kind: e for e in read_events(tmp_path / "events.db")}
    assert set(events) == {"intrusion", "fire_lane"}
    intr = events["intrusion"]
    # the person's bottom-centre enters the zone (x >= 160) on frame 18 and leaves the frame after frame 36
    assert intr.onset_s == pytest.approx(1.8)
    assert 2.8 <= intr.start_s <= 3.0 and intr.end_s == pytest.approx(3.6)
    assert events["fire_lane"].end_s == pytest.approx(5.9)  # ended at the last frame by the shutdown
    # every stored event was also reported, after storage, on both sinks
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert {d["event_id"] for d in lines} == {e.event_id for e in events.values()}
    assert printed.count("[start]") == 2 and printed.count("[end]") == 2
    assert "[metrics] cam1:" in printed and "frames 60" in printed
    (video,) = recording_segments(tmp_path / "video", "cam1")
    cap = cv2.VideoCapture(str(video))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 60
    cap.release()
    snaps = sorted((tmp_path / "snaps").iterdir())
    assert len(snaps) == 2 and all(cv2.imread(str(p)) is not None for p in snaps)
    assert all(e.snapshot_path and Path(e.snapshot_path).exists() for e in events.values())


def test_file_runs_are_deterministic(scene: Path, tmp_path: Path) -> None:
    def starts(d: Path) -> list[tuple[str, float, float | None]]:
        d.mkdir()
        run_service(scene_config(scene, d))
        return sorted((e.rule_kind, e.start_s, e.end_s) for e in read_events(d / "events.db"))

    assert starts(tmp_path / "a") == starts(tmp_path / "b")


def test_a_file_run_again_writes_the_same_event_ids_once(scene: Path, tmp_path: Path) -> None:
    """Deterministic ids: a re-run (a retried scan, a restarted worker) upserts the same rows."""
    text = scene_config(scene, tmp_path)
    run_service(text)
    first = sorted((e.event_id, e.rule_kind, e.start_s) for e in read_events(tmp_path / "events.db"))
    run_service(text)  # same file, same store
    again = sorted((e.event_id, e.rule_kind, e.start_s) for e in read_events(tmp_path / "events.db"))
    assert len(first) == 2 and again == first
    other = tmp_path / "other"
    other.mkdir()
    run_service(scene_config(scene, other).replace("id: cam1", "id: cam9"))
    assert not {e.event_id for e in read_events(other / "events.db")} & {i for i, _, _ in first}


def test_two_cameras_are_batched_together_and_keep_their_order(scene: Path, tmp_path: Path) -> None:
    text = scene_config(scene, tmp_path).replace("batch_size: 2", "batch_size: 4\n  batch_wait_ms: 50")
    second = text.split("cameras:\n")[1].split("alerts:")[0].replace("id: cam1", "id: cam2")
    text = text.replace("alerts:", second + "alerts:", 1)
    detector = BlobDetector()
    service, printed = run_service(text, detector)
    assert detector.images == 120
    assert max(detector.batch_sizes) > 1  # frames of both cameras shared inference calls
    events = read_events(tmp_path / "events.db")
    by_cam = {c: sorted((e.rule_kind, e.start_s) for e in events if e.camera_id == c) for c in ("cam1", "cam2")}
    assert by_cam["cam1"] == by_cam["cam2"] and len(by_cam["cam1"]) == 2
    assert "[metrics] cam2:" in printed


def test_stop_mid_run_ends_open_events(scene: Path, tmp_path: Path) -> None:
    text = scene_config(scene, tmp_path).replace(
        f"source: {scene}", f"source: {scene}\n    loop: true\n    realtime: true"
    )
    service = WatchService(
        parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO()
    )
    service.start()
    deadline = time.monotonic() + 30
    while not any(e.rule_kind == "fire_lane" for e in read_events(tmp_path / "events.db")):
        assert time.monotonic() < deadline, "no event raised"
        time.sleep(0.1)
    service.stop()
    assert service.wait(20)
    assert service.finish()
    events = read_events(tmp_path / "events.db")
    assert events and all(e.end_s is not None for e in events)


class _CameraThatGoesAway:
    """A live camera for `WatchService`'s opener: the scene's frames at 20 fps, then the stream is lost
    and every later attempt to open it is refused (``offline``)."""

    fps = 20.0

    def __init__(self, video: Path, frames: int) -> None:
        self.cap = cv2.VideoCapture(str(video))
        self.left = frames

    def read(self) -> np.ndarray | None:
        time.sleep(1 / self.fps)
        if self.left <= 0:
            return None
        self.left -= 1
        ok, image = self.cap.read()
        return image if ok else None

    def at_end(self) -> bool:
        return False

    def close(self) -> None:
        self.cap.release()


def test_an_incident_open_when_its_camera_goes_offline_ends_as_interrupted(scene: Path, tmp_path: Path) -> None:
    from campusguard.errors import SourceError

    text = f"""\
tracker:
  min_consecutive_frames: 1
cameras:
  - id: cam1
    source: rtsp://127.0.0.1:1/gate
    offline_end_s: 0.5
    reconnect: {{initial_s: 0.1, max_s: 0.2}}
    motion: {{enabled: false}}
    zones:
      - name: all
        polygon: [[0, 0], [1, 0], [1, 1], [0, 1]]
        units: fraction
    rules:
      - kind: intrusion
        zone: all
        classes: [car]
        min_seconds: 0.3
storage:
  sqlite: {tmp_path / "events.db"}
outputs:
  metrics_interval_s: 0
"""
    opens: list[int] = []

    def opener(cam: object) -> _CameraThatGoesAway:
        opens.append(1)
        if len(opens) > 1:
            raise SourceError("cannot open video source 'rtsp://127.0.0.1:1/gate'")
        return _CameraThatGoesAway(scene, frames=30)  # the car is parked from the first frame

    service = WatchService(
        parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), opener=opener, out=io.StringIO()
    )
    service.start()
    try:
        deadline = time.monotonic() + 30
        while service.readers[0].state() != "offline" or service.analytics["cam1"].offline_ended == 0:
            assert time.monotonic() < deadline, "the camera never went offline with its incident ended"
            time.sleep(0.05)
        # the end is counted when it is handed to the event worker: wait for its commit too
        while not (fire := [e for e in read_events(tmp_path / "events.db") if e.rule_kind == "intrusion"]) or not all(
            e.end_s is not None for e in fire
        ):
            assert time.monotonic() < deadline, "the interrupted end was never committed"
            time.sleep(0.05)
        assert all(e.details.get("interrupted") for e in fire)
        last = service.readers[0].stats.last_frame_at  # live timestamps are the monotonic clock
        assert all(abs(e.end_s - last) < 0.5 for e in fire)  # ended at its last frame, not later
    finally:
        service.stop()
        assert service.wait(20) and service.finish()
    assert len(opens) > 2  # still retried, with back-off


class DyingDetector(BlobDetector):
    """Ends the detection thread with ``exc``: a crash, or a `SystemExit` that `threading` swallows without a trace."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        raise self.exc


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit itself
@pytest.mark.parametrize("exc", [RuntimeError("boom"), SystemExit(3)], ids=["crash", "system-exit"])
def test_the_watchdog_stops_the_pipeline_when_a_worker_thread_dies(
    scene: Path, tmp_path: Path, exc: BaseException
) -> None:
    service = WatchService(
        parse_config(scene_config(scene, tmp_path), "w.yaml"),
        detector_factory=lambda *a: DyingDetector(exc),
        out=io.StringIO(),
    )
    service.start()
    assert service.wait(15), "the pipeline hangs after its detection thread died"
    assert service.stop_event.is_set() and service.failed.is_set()
    assert not service.finish()  # reported as a failed run, and nothing hangs


def test_start_up_errors_name_the_line(scene: Path, tmp_path: Path) -> None:
    good = scene_config(scene, tmp_path)
    cases = [
        (
            good.replace(f"source: {scene}", f"source: {tmp_path / 'missing.mp4'}"),
            r"watch.yaml:7: cameras\[0\].source: camera 'cam1': video file .* does not exist",
        ),
        (
            good.replace("classes: [car]", "classes: [tractor]"),
            r"watch.yaml:\d+: cameras\[0\].rules\[1\].classes\[0\]: unknown class 'tractor'",
        ),
        (
            good.replace(
                "[[160, 0], [320, 0], [320, 180], [160, 180]]", "[[160, 0], [640, 0], [640, 180], [160, 180]]"
            ),
            r"watch.yaml:10: cameras\[0\].zones\[0\].polygon: .*outside the 320x180 frame",
        ),
    ]
    for text, pattern in cases:
        service = WatchService(
            parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO()
        )
        with pytest.raises(ConfigError, match=pattern):
            service.start()


class WarmingBlobDetector(BlobDetector):
    """Records `warm_up` calls (`campusguard.Detector.warm_up` compiles for a frame size) and the calls after them."""

    def __init__(self) -> None:
        super().__init__()
        self.warmed: list[tuple[tuple[int, int], int]] = []

    def warm_up(self, frame_hw: tuple[int, int]) -> None:
        self.warmed.append((frame_hw, self.calls))


def test_the_service_warms_each_detector_up_for_its_cameras_frame_size_before_the_first_frame(
    scene: Path, tmp_path: Path
) -> None:
    detector = WarmingBlobDetector()
    text = scene_config(scene, tmp_path)
    service = WatchService(parse_config(text, "w.yaml"), detector_factory=lambda *a: detector, out=io.StringIO())
    service.start()
    assert service.wait(30) and service.finish()
    assert detector.warmed == [((180, 320), 0)]  # once, at the camera's 320x180, before any frame was detected
    assert detector.calls > 0


def test_scale_detections_maps_boxes_to_the_reference_frame() -> None:
    det = Detections(np.array([[10, 20, 30, 40]], np.float32), np.array([0.5], np.float32), np.array([0]))
    out = scale_detections(det, (640, 360), (320, 180))
    np.testing.assert_allclose(out.xyxy, [[5, 10, 15, 20]])
    assert scale_detections(det, (320, 180), (320, 180)) is det


def test_watchdog_reconnects_a_stalled_live_camera_once_per_stall() -> None:
    from campusguard.app.engine.sources import CameraReader, FrameQueue, open_source
    from campusguard.app.engine.watchdog import Watchdog

    stop, failed = threading.Event(), threading.Event()
    reader = CameraReader(
        "live",
        FrameQueue(2, True),
        stop,
        open_source=lambda: open_source("rtsp://127.0.0.1:1/x"),
        live=True,
        stall_timeout_s=5,
    )
    reader.stats.connected = True
    reader.stats.last_frame_at = 100.0
    dog = Watchdog([reader], [], stop, failed, done=threading.Event())
    dog.check(now=104.0)
    assert not reader._reconnect_requested.is_set()
    dog.check(now=106.0)
    assert reader._reconnect_requested.is_set() and dog.stalls == 1
    dog.check(now=107.0)  # the same stall is not reported again
    assert dog.stalls == 1


def _stop_with(exc: BaseException) -> None:
    raise exc


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the SystemExit itself
@pytest.mark.parametrize("exc", [RuntimeError("boom"), SystemExit(3)], ids=["crash", "system-exit"])
def test_watchdog_stops_the_pipeline_when_a_real_worker_thread_dies(exc: BaseException) -> None:
    from campusguard.app.engine.watchdog import Watchdog, WorkerThread

    stop, failed = threading.Event(), threading.Event()
    finished = WorkerThread("finished", lambda: None)
    dying = WorkerThread("dying", lambda: _stop_with(exc))
    running = WorkerThread("running", lambda: stop.wait(10))
    for t in (finished, dying, running):
        t.start()
    finished.join(5)
    dying.join(5)
    dog = Watchdog([], [finished, running], stop, failed, done=threading.Event())
    dog.check()
    assert not failed.is_set() and not stop.is_set()  # a worker that returned is not a death
    Watchdog([], [finished, dying, running], stop, failed, done=threading.Event()).check()
    assert failed.is_set() and stop.is_set()
    running.join(5)
    assert running.returned and not dying.returned


def _frame_count(path: Path) -> int:
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n


def test_annotated_video_is_written_in_finished_segments_a_restart_never_overwrites(
    scene: Path, tmp_path: Path
) -> None:
    text = scene_config(scene, tmp_path).replace(
        "  metrics_interval_s: 0", "  metrics_interval_s: 0\n  annotated_segment_s: 2.0"
    )
    run_service(text)
    first = recording_segments(tmp_path / "video", "cam1")
    assert len(first) == 3 and all(re.fullmatch(r"cam1_\d{8}T\d{6}Z_\d{4}\.mp4", p.name) for p in first)
    assert [_frame_count(p) for p in first] == [20, 20, 20]  # every segment decodes to its last frame
    stamps = {p: p.stat().st_mtime_ns for p in first}
    run_service(text)  # a restart (within the same second, too) adds files and leaves the earlier ones alone
    both = recording_segments(tmp_path / "video", "cam1")
    assert len(both) == 6 and set(first) < set(both)
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items())
    assert not [p for p in (tmp_path / "video").iterdir() if p.name.startswith(".")]  # no unfinished file left


def test_a_running_service_keeps_blas_on_one_thread(scene: Path, tmp_path: Path) -> None:
    """NumPy's BLAS pool (one thread a core) only spins beside the stages' small Kalman inversions: a started
    service limits it to one thread (`campusguard.app.engine.blas`)."""
    from threadpoolctl import threadpool_info, threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):  # as a fresh process on two cores has it
        run_service(scene_config(scene, tmp_path))
        pools = [p for p in threadpool_info() if p["user_api"] == "blas"]
        assert pools and all(p["num_threads"] == 1 for p in pools)
