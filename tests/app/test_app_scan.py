"""`campusguard scan` (`campusguard.app.scan`): recordings through the watch pipeline, with a
colour-blob detector in place of the network (the model is not what these tests check)."""

from __future__ import annotations

import io
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import blob_detector_factory, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.events.types import Event, event_id_for  # noqa: E402
from campusguard.app.scan import LocalExecutor, Recording, ScanLedger, ScanSummary, run_scan  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.errors import InvalidInputError  # noqa: E402


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two different recordings of the scene: the person enters the zone at other times."""
    folder = tmp_path_factory.mktemp("archive")
    return [write_scene(folder / "a.mp4", n=60), write_scene(folder / "b.mp4", n=45, fps=15.0)]


def config_for(out: Path, video: Path | str = "unused.mp4") -> str:
    out.mkdir(parents=True, exist_ok=True)
    return scene_config(Path(video), out).replace(f"  annotated_video_dir: {out / 'video'}\n", "")


def scan(out: Path, sources: list[str], workers: int = 1, **kw: object) -> tuple[ScanSummary, list[Event], str]:
    console = Console(file=io.StringIO(), width=200)
    summary = run_scan(
        parse_config(config_for(out), "scan.yaml"),
        sources,
        LocalExecutor(workers),
        detector_factory=blob_detector_factory,
        out=io.StringIO(),
        console=console,
        **kw,  # type: ignore[arg-type]
    )
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    return summary, read_events(out / "events.db"), printed


def facts(e: Event) -> tuple:
    """What an incident is, apart from its id, wall-clock times and snapshot."""
    return (
        e.camera_id,
        e.rule_name,
        e.rule_kind,
        e.zone,
        e.start_s,
        e.end_s,
        e.onset_s,
        e.start_frame,
        e.end_frame,
        e.tracker_ids,
        e.class_ids,
        e.count,
        e.direction,
    )


def watch(video: Path, out: Path, stream_key: str | None = None) -> list[Event]:
    service = WatchService(
        parse_config(config_for(out, video), "watch.yaml"),
        detector_factory=blob_detector_factory,
        out=io.StringIO(),
        stream_keys={"cam1": stream_key} if stream_key else None,
    )
    assert service.run()
    return read_events(out / "events.db")


def test_scan_gives_each_file_the_events_watch_gives_it(videos: list[Path], tmp_path: Path) -> None:
    summary, events, _ = scan(tmp_path / "scan", [str(v) for v in videos])
    assert summary.clean and summary.scanned == 2 and summary.frames == 60 + 45
    for video in videos:
        key = str(video.resolve())
        scanned = sorted((e for e in events if e.details["recording"] == key), key=facts)
        watched = sorted(watch(video, tmp_path / video.stem), key=facts)
        assert watched and [facts(e) for e in scanned] == [facts(e) for e in watched]
        assert all(e.camera_id == "cam1" for e in scanned)
        # the ids differ only by the stream key: watch given the same key writes the same ids
        keyed = watch(video, tmp_path / f"{video.stem}-keyed", stream_key=key)
        assert sorted(e.event_id for e in keyed) == sorted(e.event_id for e in scanned)
        assert not {e.event_id for e in watched} & {e.event_id for e in scanned}
    assert summary.incidents == len(events) >= 3


def test_identical_files_under_two_names_give_distinct_events(videos: list[Path], tmp_path: Path) -> None:
    copies = tmp_path / "copies"
    copies.mkdir()
    for name in ("north.mp4", "south.mp4"):
        shutil.copy(videos[0], copies / name)
    summary, events, _ = scan(tmp_path / "out", [str(copies)])
    assert summary.scanned == 2 and len(events) == 4
    by_file = {
        name: sorted(facts(e) for e in events if e.details["recording"].endswith(name))
        for name in ("north.mp4", "south.mp4")
    }
    assert by_file["north.mp4"] == by_file["south.mp4"] and len(by_file["north.mp4"]) == 2
    assert len({e.event_id for e in events}) == 4


def test_the_default_stream_key_leaves_watch_ids_unchanged() -> None:
    """Pinned to the ids of `event_id_for` before stream keys existed."""
    zone = {
        "camera_id": "cam1",
        "rule_name": "r",
        "zone": "east",
        "start_frame": 100,
        "start_s": 10.0,
        "tracker_ids": (3, 4),
        "count": 2,
    }
    line = {
        "camera_id": "gate",
        "rule_name": "fence",
        "zone": "fence",
        "start_frame": 7,
        "start_s": 0.7,
        "tracker_ids": (1,),
        "direction": "in",
        "count": 1,
    }
    assert event_id_for(**zone) == event_id_for(**zone, stream_key="") == "a1ae6afc46199d80abcd1d35ab263a55"  # type: ignore[arg-type]
    assert event_id_for(**line) == "e3bd79346a7c479569ca1de87335657b"  # type: ignore[arg-type]
    assert event_id_for(**zone, stream_key="/archive/a.mp4") != event_id_for(**zone, stream_key="/archive/b.mp4")  # type: ignore[arg-type]


def test_two_worker_processes_give_the_same_events_as_one(videos: list[Path], tmp_path: Path) -> None:
    _, one, _ = scan(tmp_path / "one", [str(v) for v in videos])
    summary, two, _ = scan(tmp_path / "two", [str(v) for v in videos], workers=2)
    assert summary.clean and summary.frames == 105
    assert sorted((e.event_id, facts(e)) for e in two) == sorted((e.event_id, facts(e)) for e in one)


def test_a_second_run_skips_finished_files_and_a_changed_file_runs_again(videos: list[Path], tmp_path: Path) -> None:
    folder = tmp_path / "archive"
    shutil.copytree(videos[0].parent, folder)
    out = tmp_path / "out"
    first, events, _ = scan(out, [str(folder)])
    again, events_again, _ = scan(out, [str(folder)])
    assert (first.scanned, again.scanned, again.already_done, again.frames) == (2, 0, 2, 0)
    assert events_again == events
    ledger = ScanLedger(out / "events.scan-state.db")
    assert sorted(Path(e.path).name for e in ledger.entries()) == ["a.mp4", "b.mp4"]
    ledger.close()
    os.utime(folder / "b.mp4", ns=(1, 1))  # changed since: scanned again, the same rows upserted
    third, events_third, _ = scan(out, [str(folder)])
    assert (third.scanned, third.already_done) == (1, 1)
    assert sorted(e.event_id for e in events_third) == sorted(e.event_id for e in events)
    forced, _, _ = scan(out, [str(folder)], rescan=True)
    assert forced.scanned == 2


def test_a_bad_file_is_reported_on_one_line_and_skipped(videos: list[Path], tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(videos[0], folder / "good.mp4")
    (folder / "broken.mp4").write_bytes(b"not a video at all" * 100)
    (folder / "notes.jpg").write_bytes(b"")  # not a video: ignored, counted
    summary, events, printed = scan(tmp_path / "out", [str(folder)])
    assert summary.scanned == 1 and not summary.clean and summary.ignored == 1
    assert [p.name for p, _ in summary.failed] == ["broken.mp4"]
    lines = [ln for ln in printed.splitlines() if ln.startswith("skipped")]
    assert len(lines) == 1 and "broken.mp4" in lines[0] and "Traceback" not in printed
    assert len(events) == 2  # the good file's incidents are committed
    assert "1 failed" in summary.line() and "frames/s" in summary.line()


def test_per_frame_detections_are_written_as_parquet(videos: list[Path], tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    summary, _, _ = scan(tmp_path / "out", [str(videos[0])], detections_dir=tmp_path / "dets")
    (path,) = sorted((tmp_path / "dets").iterdir())
    assert path.name == Recording.of(videos[0]).output_name(".parquet")
    table = pq.read_table(path).to_pydict()
    assert list(table) == ["frame", "t_s", "x1", "y1", "x2", "y2", "confidence", "class_id", "tracker_id"]
    assert set(table["frame"]) <= set(range(60)) and len(set(table["frame"])) >= 50  # the parked car is on every frame
    assert {0, 2} == set(table["class_id"]) and min(table["tracker_id"]) >= 1
    t = dict(zip(table["frame"], table["t_s"], strict=False))
    assert t[30] == pytest.approx(3.0)


@pytest.mark.parametrize(
    ("cameras", "camera_id", "fragment"),
    [
        (["cam1", "cam2"], None, "has 2 cameras (cam1, cam2); choose one with --camera ID"),
        (["cam1"], "gate", "has no camera 'gate'; its cameras: cam1"),
    ],
)
def test_the_camera_must_be_one_of_the_config(
    videos: list[Path], tmp_path: Path, cameras: list[str], camera_id: str | None, fragment: str
) -> None:
    text = config_for(tmp_path)
    if len(cameras) == 2:
        second = text.split("cameras:\n")[1].split("alerts:")[0].replace("id: cam1", "id: cam2")
        text = text.replace("alerts:", second + "alerts:", 1)
    with pytest.raises(InvalidInputError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        run_scan(
            parse_config(text, "scan.yaml"),
            [str(videos[0])],
            LocalExecutor(1),
            camera_id=camera_id,
            detector_factory=blob_detector_factory,
        )


def test_ray_tasks_give_the_same_events_as_the_local_path(videos: list[Path], tmp_path: Path) -> None:
    """The same unit as Ray tasks on a private local Ray (2 CPUs): the same rows as one local worker."""
    ray = pytest.importorskip("ray")
    from campusguard.app.scan import RayExecutor

    _, local, _ = scan(tmp_path / "local", [str(v) for v in videos])
    out = tmp_path / "ray"
    # the Ray workers import the test's detector factory from here
    ray.init(  # a private instance ("local"), never another cluster running on this machine
        address="local",
        num_cpus=2,
        include_dashboard=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}},
    )
    try:
        summary = run_scan(
            parse_config(config_for(out), "scan.yaml"),
            [str(v) for v in videos],
            RayExecutor("auto"),  # joins the Ray started above
            detector_factory=blob_detector_factory,
            out=io.StringIO(),
            console=Console(file=io.StringIO()),
        )
    finally:
        ray.shutdown()
    assert summary.clean and summary.scanned == 2 and summary.frames == 105
    remote = read_events(out / "events.db")
    assert sorted((e.event_id, facts(e)) for e in remote) == sorted((e.event_id, facts(e)) for e in local)


def test_an_unreachable_ray_cluster_is_a_prompt_one_line_error() -> None:
    pytest.importorskip("ray")
    from campusguard.app.cluster.group import ClusterError
    from campusguard.app.scan import RayExecutor

    with pytest.raises(ClusterError, match=r"no Ray cluster answers at 127.0.0.1:1 "):
        RayExecutor("127.0.0.1:1")


def test_the_state_file_refuses_a_file_that_is_not_one(videos: list[Path], tmp_path: Path) -> None:
    scan(tmp_path, [str(videos[0])])  # writes tmp_path/events.db
    with pytest.raises(InvalidInputError, match="not a scan state file"):
        ScanLedger(tmp_path / "events.db")


class _PacedBlobs:
    """`blob_detector_factory`, 20 ms per image: a file takes long enough to be stopped in."""

    def __call__(self, *args: object) -> object:
        import time

        detector = blob_detector_factory(None, "cpu", None)
        batch = detector.predict_batch

        def paced(images: list) -> list:  # type: ignore[type-arg]
            time.sleep(0.02 * len(images))
            return batch(images)

        detector.predict_batch = paced  # type: ignore[method-assign]
        return detector


class _StopOnFirstAlert(io.StringIO):
    """The stdout sink's stream: the first alert line (the first file's events) asks the scan to stop."""

    def __init__(self, stop: threading.Event) -> None:
        super().__init__()
        self.stop = stop

    def write(self, s: str) -> int:
        self.stop.set()
        return super().write(s)


def test_a_stopped_scan_commits_what_finished_and_the_next_run_does_the_rest(
    videos: list[Path], tmp_path: Path
) -> None:
    """SIGTERM or SIGINT (`campusguard.app.signals.stop_signals` sets ``stop``): the units running
    end, the finished file's events are committed and sent, the summary says so; the next run scans
    the rest and the store holds what one uninterrupted scan gives."""
    _, full, _ = scan(tmp_path / "full", [str(v) for v in videos])
    out, stop = tmp_path / "out", threading.Event()
    loaded = parse_config(config_for(out), "scan.yaml")
    kw = {"detector_factory": _PacedBlobs(), "console": Console(file=io.StringIO(), width=200)}
    first = run_scan(loaded, [str(v) for v in videos], LocalExecutor(1), out=_StopOnFirstAlert(stop), stop=stop, **kw)
    assert first.stopped and first.scanned == 1 and first.clean
    assert "stopped: the rest is scanned by the next run" in first.line()
    second = run_scan(loaded, [str(v) for v in videos], LocalExecutor(1), out=io.StringIO(), **kw)
    assert (second.scanned, second.already_done, second.stopped) == (1, 1, False)
    events = read_events(out / "events.db")
    assert sorted((e.event_id, facts(e)) for e in events) == sorted((e.event_id, facts(e)) for e in full)
