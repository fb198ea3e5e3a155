"""Camera readers: queues, timestamps, end of file, broken frames, reconnect with back-off."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from campusguard.app.engine.sources import (
    CameraReader,
    EndOfStream,
    Frame,
    FrameQueue,
    FrameSource,
    open_source,
)
from campusguard.errors import SourceError


def write_video(path: Path, n: int, size_wh: tuple[int, int] = (64, 48), fps: float = 10.0) -> Path:
    """Write an MP4 of ``n`` frames whose grey level encodes the frame index (i * 10 % 250)."""
    w, h = size_wh
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), fps, (w, h))
    for i in range(n):
        writer.write(np.full((h, w, 3), (i * 10) % 250, np.uint8))
    writer.release()
    return path


def drain(queue: FrameQueue) -> list[Frame | EndOfStream]:
    items = []
    while (item := queue.get_nowait()) is not None:
        items.append(item)
    return items


def make_frame(i: int) -> Frame:
    return Frame("c", i, float(i), np.zeros((2, 2, 3), np.uint8), 0.0)


def test_drop_oldest_queue_keeps_newest_and_counts_drops() -> None:
    q = FrameQueue(3, drop_oldest=True)
    for i in range(10):
        assert q.put(make_frame(i))
    assert q.dropped == 7
    assert [f.index for f in drain(q)] == [7, 8, 9]  # type: ignore[union-attr]


def test_blocking_queue_waits_and_gives_up_on_stop() -> None:
    q = FrameQueue(1, drop_oldest=False)
    stop = threading.Event()
    assert q.put(make_frame(0), stop)
    stop.set()
    assert not q.put(make_frame(1), stop)  # full and stopped: not queued
    assert q.put(EndOfStream("c"), stop)  # the end always gets through
    assert len(q) == 2 and q.dropped == 0


def test_blocking_queue_unblocks_when_consumer_takes() -> None:
    q = FrameQueue(1, drop_oldest=False)
    q.put(make_frame(0))
    t = threading.Thread(target=q.put, args=(make_frame(1),))
    t.start()
    assert q.get(1.0).index == 0  # type: ignore[union-attr]
    t.join(2.0)
    assert not t.is_alive()
    assert q.get(1.0).index == 1  # type: ignore[union-attr]


def test_doorbell_rings_on_put() -> None:
    bell = threading.Event()
    q = FrameQueue(2, drop_oldest=True, doorbell=bell)
    q.put(make_frame(0))
    assert bell.is_set()


def file_opener(path: Path, folder_fps: float = 10.0) -> Callable[[], FrameSource]:
    return lambda: open_source(str(path), folder_fps=folder_fps)


def run_reader(open_file: Callable[[], FrameSource], **kw: Any) -> tuple[list[Frame], EndOfStream, CameraReader]:
    q = FrameQueue(1000, drop_oldest=False)
    reader = CameraReader("c", q, threading.Event(), open_source=open_file, live=False, **kw)
    reader.run()
    items = drain(q)
    assert isinstance(items[-1], EndOfStream)
    frames = [f for f in items[:-1] if isinstance(f, Frame)]
    return frames, items[-1], reader


def test_file_reader_reads_every_frame_with_index_timestamps(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.mp4", 12, fps=10)
    frames, end, reader = run_reader(file_opener(video))
    assert [f.index for f in frames] == list(range(12))
    np.testing.assert_allclose([f.timestamp_s for f in frames], np.arange(12) / 10)
    assert frames[0].image.shape == (48, 64, 3) and frames[0].image.dtype == np.uint8
    assert abs(frames[5].image.mean() - 50) < 5  # the right frame (neighbours are 40 and 60), decoded
    assert end.reason == "end of stream"
    assert reader.stats.frames_read == 12 and reader.stats.resolution_wh == (64, 48)


def test_one_decoder_thread_decodes_what_ffmpegs_own_choice_decodes(tmp_path: Path) -> None:
    """`decode_threads` (1: a little less CPU a frame; 0, the default: FFmpeg's choice) changes how FFmpeg decodes, never what."""
    video = write_video(tmp_path / "v.mp4", 24, size_wh=(320, 240))

    def frames(threads: int) -> list[np.ndarray]:
        source = open_source(str(video), decode_threads=threads)
        out = []
        while (image := source.read()) is not None:
            out.append(image)
        source.close()
        return out

    one, own = frames(1), frames(0)
    assert len(one) == len(own) == 24
    assert all(np.array_equal(a, b) for a, b in zip(one, own, strict=True))


def test_decode_threads_is_a_checked_camera_field() -> None:
    from pydantic import ValidationError

    from campusguard.app.config import CameraConfig

    assert CameraConfig(id="c", source="v.mp4").decode_threads == 0
    with pytest.raises(ValidationError, match="decode_threads"):
        CameraConfig(id="c", source="v.mp4", decode_threads=-1)


def test_fps_cap_skips_frames_by_timestamp(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.mp4", 20, fps=10)
    frames, _, reader = run_reader(file_opener(video), fps_cap=5)
    assert [f.index for f in frames] == list(range(0, 20, 2))
    assert reader.stats.frames_skipped_fps_cap == 10


def test_looping_file_keeps_timestamps_increasing(tmp_path: Path) -> None:
    video = write_video(tmp_path / "v.mp4", 5, fps=10)
    q = FrameQueue(1000, drop_oldest=False)
    stop = threading.Event()
    reader = CameraReader("c", q, stop, open_source=file_opener(video), live=False, loop=True)
    t = threading.Thread(target=reader.run)
    t.start()
    while reader.stats.frames_read < 12:
        t.join(0.01)
    stop.set()
    t.join(5)
    frames = [f for f in drain(q) if isinstance(f, Frame)]
    ts = [f.timestamp_s for f in frames]
    assert len(frames) >= 12 and ts == sorted(ts) and len(set(ts)) == len(ts)
    assert reader.stats.loops >= 2 and reader.stats.reconnects == 0  # restarted at once, not as a lost stream


def test_image_folder_source(tmp_path: Path) -> None:
    for i in range(3):
        cv2.imwrite(str(tmp_path / f"{i:03d}.png"), np.full((20, 30), i * 40, np.uint8))  # grayscale on disk
    (tmp_path / "003.jpg").write_bytes(b"not an image")
    frames, _, _ = run_reader(file_opener(tmp_path, folder_fps=2), fallback_fps=2)
    assert len(frames) == 3 and frames[2].image.shape == (20, 30, 3)
    np.testing.assert_allclose([f.timestamp_s for f in frames], [0, 0.5, 1.0])


def test_missing_file_source_ends_with_the_reason(tmp_path: Path) -> None:
    frames, end, _ = run_reader(file_opener(tmp_path / "none.mp4"))
    assert frames == [] and "does not exist" in end.reason
    with pytest.raises(SourceError, match="does not exist"):
        open_source(str(tmp_path / "none.mp4"))


class ScriptedSource:
    """A fake live source: yields its frames, then fails (a dropped connection)."""

    fps = None

    def __init__(self, frames: list[np.ndarray | None]) -> None:
        self.frames = list(frames)

    def read(self) -> np.ndarray | None:
        return self.frames.pop(0) if self.frames else None

    def at_end(self) -> bool:
        return True

    def close(self) -> None:
        pass


def test_live_reader_reconnects_with_backoff_and_survives_resolution_change() -> None:
    stop = threading.Event()
    opened: list[int] = []
    small, big = np.zeros((4, 6, 3), np.uint8), np.zeros((8, 12, 3), np.uint8)

    def opener() -> ScriptedSource:
        opened.append(1)
        n = len(opened)
        if n == 2:
            raise SourceError("connection refused")  # one failed attempt in between
        if n >= 4:
            stop.set()
            return ScriptedSource([])
        return ScriptedSource([small, small] if n == 1 else [big, big, big])

    q = FrameQueue(100, drop_oldest=True)
    reader = CameraReader(
        "live", q, stop, open_source=opener, live=True, reconnect_initial_s=0.01, reconnect_max_s=0.02
    )
    reader.run()
    frames = [f for f in drain(q) if isinstance(f, Frame)]
    assert [f.image.shape[:2] for f in frames] == [(4, 6)] * 2 + [(8, 12)] * 3
    assert [f.index for f in frames] == list(range(5))
    assert reader.stats.reconnects >= 2 and len(opened) == 4


class BrokenFileSource(ScriptedSource):
    """A fake file with an undecodable frame in the middle, then a file shorter than announced."""

    fps = 10.0

    def __init__(self) -> None:
        img = np.zeros((4, 4, 3), np.uint8)
        super().__init__([img, img, None, img, None])
        self.reads = 0

    def read(self) -> np.ndarray | None:
        self.reads += 1
        return super().read()

    def at_end(self) -> bool:
        return self.reads >= 10  # announces 10 frames but has only 5


def test_file_reader_skips_broken_frames_and_ends_a_short_file() -> None:
    frames, end, reader = run_reader(BrokenFileSource, max_broken_frames=3)
    assert [f.index for f in frames] == [0, 1, 3]  # frame 2 was broken
    assert end.reason == "end of stream"
    assert reader.stats.broken_frames == 4  # one in the middle, then 3 tries at the premature end


@pytest.mark.parametrize(
    ("frames_read", "connected", "last_frame_at", "ended_reason", "pipeline_failed", "expected", "open_failures"),
    [
        (0, False, 100.0, None, False, "starting", 0),
        (5, True, 104.0, None, False, "live", 0),
        (5, True, 90.0, None, False, "reconnecting", 0),  # connected, but stalled (stall_timeout_s 5)
        (5, False, 104.0, None, False, "reconnecting", 0),  # the source was lost
        (5, True, 104.0, None, True, "failed", 0),
        (5, False, 104.0, "end of stream", False, "stopped", 0),
        (5, False, 104.0, "end of stream", True, "failed", 0),
        (5, False, 104.0, "reader failed: OSError: gone", False, "failed", 0),
        (0, False, 100.0, None, False, "offline", 1),  # could not be opened (at start)
        (5, False, 104.0, None, False, "offline", 3),  # lost, and the attempts since failed
        (5, False, 104.0, "stopped", False, "stopped", 3),
    ],
)
def test_a_readers_state_and_stall_are_worked_out_in_one_place(
    frames_read: int,
    connected: bool,
    last_frame_at: float,
    ended_reason: str | None,
    pipeline_failed: bool,
    expected: str,
    open_failures: int,
) -> None:
    """`CameraReader.state` and `CameraReader.stalled`: what the console shows, the cluster's groups
    report and the watchdog acts on."""
    from campusguard.app.engine.sources import CameraReader, FrameQueue

    reader = CameraReader(
        "cam", FrameQueue(2, True), threading.Event(), open_source=lambda: None, live=True, stall_timeout_s=5
    )
    reader.stats.frames_read, reader.stats.connected, reader.stats.last_frame_at = frames_read, connected, last_frame_at
    reader.ended_reason = ended_reason
    reader.stats.open_failures = open_failures
    assert reader.state(pipeline_failed, now=106.0) == expected
    assert reader.stalled(106.0) == (connected and 106.0 - last_frame_at > 5)


class TimedOpens:
    """Opens a source at each call and notes when; each gives ``frames_for_s`` seconds of frames, then fails."""

    def __init__(self, stop: threading.Event, frames_for_s: list[float], refuse: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.stop = stop
        self.frames_for_s = frames_for_s
        self.refuse = refuse
        self.at: list[float] = []

    def __call__(self) -> FrameSource:
        import time

        self.at.append(time.monotonic())
        n = len(self.at)
        if n > len(self.frames_for_s):
            self.stop.set()
            raise SourceError("done")
        if n in self.refuse:
            raise SourceError("connection refused")
        until = time.monotonic() + self.frames_for_s[n - 1]
        image = np.zeros((4, 4, 3), np.uint8)

        class Source:
            fps = 100.0

            def read(self) -> np.ndarray | None:
                if time.monotonic() >= until:
                    return None
                time.sleep(0.01)
                return image

            def at_end(self) -> bool:
                return False

            def close(self) -> None:
                pass

        return Source()


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:], strict=False)]


def test_a_source_that_opens_then_fails_at_once_keeps_backing_off() -> None:
    """The issue's camera that reconnected every 0.5 s, 40 times in 45 s: the delay doubles at every
    loss, open or not, and only a connection that gave frames for ``reconnect_reset_s`` resets it."""
    stop = threading.Event()
    opens = TimedOpens(stop, [0.02, 0.02, 0.02, 0.02, 0.02, 0.25, 0.02, 0.02], refuse={3})
    reader = CameraReader(
        "gate",
        FrameQueue(1000, drop_oldest=True),
        stop,
        open_source=opens,
        live=True,
        reconnect_initial_s=0.05,
        reconnect_max_s=0.2,
        reconnect_reset_s=0.2,
    )
    reader.run()
    waited = [round(g, 2) for g in gaps(opens.at)]
    # each gap: the connection's frames (0.02 s; 0.25 s for the 6th), then the back-off delay
    expected_delays = [0.05, 0.1, 0.2, 0.2, 0.2, 0.05, 0.1, 0.2]  # doubling to the cap, refused or not; reset after 0.25 s
    frames_for = [0.02, 0.02, 0.0, 0.02, 0.02, 0.25, 0.02, 0.02]
    for got, delay, busy in zip(waited, expected_delays, frames_for, strict=True):
        assert delay + busy - 0.01 <= got <= delay + busy + 0.08, (waited, expected_delays)
    assert reader.stats.reconnects == 7 and reader.ended_reason == "stopped"
