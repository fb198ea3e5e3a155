"""Reliability: a real stream server killed and restarted, SIGKILL and SIGTERM of `watch`, broken files.

The stream server is the static ffmpeg of the ``imageio-ffmpeg`` package serving MPEG-TS over
HTTP on loopback; the test is skipped when that package is missing.
"""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import CameraConfig, ReconnectConfig, parse_config  # noqa: E402
from campusguard.app.engine.sources import EndOfStream, Frame, FrameQueue  # noqa: E402
from campusguard.app.engine.wiring import reader_for  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.errors import ConfigError  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(ffmpeg: str, video: Path, port: int) -> subprocess.Popen:
    """ffmpeg serving ``video`` in a loop, in real time, as MPEG-TS over HTTP on 127.0.0.1:port."""
    cmd = [
        ffmpeg,
        "-hide_banner",
        "-loglevel",
        "error",
        "-re",
        "-stream_loop",
        "-1",
        "-i",
        str(video),
        "-c:v",
        "mpeg2video",
        "-q:v",
        "5",
        "-g",
        "5",
        "-f",
        "mpegts",
        "-listen",
        "1",
        f"http://127.0.0.1:{port}/live.ts",
    ]
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_server(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(5)


def test_reader_reconnects_to_a_restarted_stream_server_at_a_new_resolution(tmp_path: Path) -> None:
    ffmpeg = pytest.importorskip("imageio_ffmpeg").get_ffmpeg_exe()
    small = write_scene(tmp_path / "small.mp4", n=40, size_wh=(160, 96))
    big = write_scene(tmp_path / "big.mp4", n=40, size_wh=(320, 180))
    port = free_port()
    cam = CameraConfig(
        id="live",
        source=f"http://127.0.0.1:{port}/live.ts",
        stall_timeout_s=3,
        reconnect=ReconnectConfig(initial_s=0.2, max_s=0.5),
    )
    q = FrameQueue(4, drop_oldest=True)
    stop = threading.Event()
    reader = reader_for(cam, q, stop)
    frames: list[Frame] = []

    def consume() -> None:
        while not stop.is_set() or len(q):
            item = q.get(0.1)
            if isinstance(item, Frame):
                frames.append(item)
            elif isinstance(item, EndOfStream):
                return

    server = serve(ffmpeg, small, port)
    threads = [threading.Thread(target=reader.run), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: reader.stats.frames_read >= 10, 30, "frames from the first server")
        stop_server(server)  # the camera goes away mid-stream
        wait_for(lambda: reader.stats.reconnects >= 1, 15, "the reader to notice the loss")
        before = reader.stats.frames_read
        server = serve(ffmpeg, big, port)  # comes back, at another resolution
        wait_for(lambda: reader.stats.frames_read >= before + 10, 30, "frames after the restart")
    finally:
        stop.set()
        stop_server(server)
        for t in threads:
            t.join(15)
    assert not any(t.is_alive() for t in threads)
    sizes = [f.resolution_wh for f in frames]
    assert sizes[0] == (160, 96) and sizes[-1] == (320, 180)
    indices = [f.index for f in frames]
    assert indices == sorted(indices)  # one frame numbering across the reconnect
    ts = [f.timestamp_s for f in frames]
    assert ts == sorted(ts)


def start_watch(config: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, str(HERE / "fakes_watch.py"), str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def looping_config(tmp_path: Path) -> Path:
    video = write_scene(tmp_path / "scene.mp4")
    text = scene_config(video, tmp_path).replace(f"source: {video}", f"source: {video}\n    loop: true")
    text = text.replace("  annotated_video_dir:", "  annotated_video_dir_off:").replace(
        "  annotated_video_dir_off: " + str(tmp_path / "video") + "\n", ""
    )
    config = tmp_path / "watch.yaml"
    config.write_text(text)
    return config


EVENT_LINE = re.compile(r"^\[(start|update|end)\] .* id=([0-9a-f]{32})$")


def test_every_event_reported_before_sigkill_is_in_the_database(tmp_path: Path) -> None:
    proc = start_watch(looping_config(tmp_path))
    reported: list[tuple[str, str]] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            m = EVENT_LINE.match(line.strip())
            if m:
                reported.append((m.group(1), m.group(2)))
            if sum(p == "start" for p, _ in reported) >= 6:
                break
        os.kill(proc.pid, signal.SIGKILL)  # no chance to flush anything
        rest, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    for line in rest.splitlines():  # lines already written before the kill
        m = EVENT_LINE.match(line.strip())
        if m:
            reported.append((m.group(1), m.group(2)))
    assert proc.returncode == -signal.SIGKILL
    stored = {e.event_id: e for e in read_events(tmp_path / "events.db")}
    assert sum(p == "start" for p, _ in reported) >= 6
    for phase, event_id in reported:
        assert event_id in stored, f"{phase} of {event_id} was reported but is not in the database"
        if phase == "end":
            assert stored[event_id].end_s is not None


def test_sigterm_ends_open_events_and_exits_cleanly(tmp_path: Path) -> None:
    proc = start_watch(looping_config(tmp_path))
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("[start]") and "fire_lane" in line:  # the parked car: open until shutdown
            break
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "[metrics] cam1:" in out
    events = read_events(tmp_path / "events.db")
    fire = [e for e in events if e.rule_kind == "fire_lane"]
    assert fire and all(e.end_s is not None for e in events)
    assert "SIGTERM: stopping" in err


def corrupt_copy(src: Path, dst: Path, truncate: bool) -> Path:
    data = bytearray(src.read_bytes())
    if truncate:
        data = data[: len(data) // 2]  # a file shorter than its header says
    else:
        mid = len(data) // 2
        data[mid : mid + 2000] = os.urandom(2000)  # garbage in the middle of the stream
    dst.write_bytes(bytes(data))
    return dst


@pytest.mark.parametrize(("suffix", "truncate"), [(".mp4", False), (".avi", True)], ids=["corrupt-middle", "truncated"])
def test_broken_files_are_read_to_the_end_and_the_pipeline_finishes(
    tmp_path: Path, suffix: str, truncate: bool
) -> None:
    good = write_scene(tmp_path / f"good{suffix}", n=60)
    bad = corrupt_copy(good, tmp_path / f"bad{suffix}", truncate)
    text = scene_config(bad, tmp_path)
    with open(os.devnull, "w") as devnull:
        service = WatchService(parse_config(text, "w.yaml"), detector_factory=lambda *a: BlobDetector(), out=devnull)
        assert service.run()
    processed = service.metrics["cam1"].frames_processed
    if truncate:
        assert 10 < processed < 45  # the first half, then a clean end where the file stops short
    else:
        assert 30 <= processed < 60  # frames after the damage are decoded again from the next key frame
        assert service.readers[0].stats.broken_frames > 0
    assert all(e.end_s is not None for e in read_events(tmp_path / "events.db"))


def test_a_truncated_mp4_without_its_index_is_a_start_up_error(tmp_path: Path) -> None:
    bad = corrupt_copy(write_scene(tmp_path / "good.mp4", n=20), tmp_path / "bad.mp4", truncate=True)
    service = WatchService(
        parse_config(scene_config(bad, tmp_path), "w.yaml"), detector_factory=lambda *a: BlobDetector()
    )
    with pytest.raises(ConfigError, match=r"w.yaml:7: cameras\[0\].source: camera 'cam1': cannot open video source"):
        service.start()


def test_watch_service_goes_on_after_the_stream_server_restarts(tmp_path: Path) -> None:
    ffmpeg = pytest.importorskip("imageio_ffmpeg").get_ffmpeg_exe()
    video = write_scene(tmp_path / "scene.mp4", n=60)
    port = free_port()
    url = f"http://127.0.0.1:{port}/live.ts"
    text = scene_config(video, tmp_path).replace(
        f"source: {video}", f"source: {url}\n    stall_timeout_s: 3\n    reconnect: {{initial_s: 0.2, max_s: 0.5}}"
    )
    server = serve(ffmpeg, video, port)
    service = WatchService(parse_config(text, "w.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    try:
        deadline = time.monotonic() + 20
        while True:  # until the server listens; the probe's connection is then handed to the reader
            try:
                service.start()
                break
            except ConfigError:
                assert time.monotonic() < deadline, "the stream server never came up"
                time.sleep(0.3)
        m = service.metrics["cam1"]
        wait_for(lambda: m.frames_processed >= 10, 30, "frames before the restart")
        stop_server(server)
        wait_for(lambda: service.readers[0].stats.reconnects >= 1, 15, "the loss to be noticed")
        before = m.frames_processed
        server = serve(ffmpeg, video, port)
        wait_for(lambda: m.frames_processed >= before + 10, 30, "frames after the restart")
        service.stop()
        assert service.wait(20) and service.finish()
        assert service.metrics["cam1"].reconnects >= 1
    finally:
        service.stop()
        stop_server(server)
