"""Incident clips: the bounded ring buffer, and H.264 MP4s that decode with the right frames and duration."""

from __future__ import annotations

import time
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

from campusguard.app.media.clips import ClipRecorder, FrameRing, write_mp4
from campusguard.app.media.live import LiveFrame, encode_jpeg
from campusguard.detections import Detections


def jpeg(value: int, wh: tuple[int, int] = (64, 48)) -> bytes:
    return encode_jpeg(np.full((wh[1], wh[0], 3), value, np.uint8))


def probe(path: Path) -> tuple[str, str, str, int, float]:
    """Codec, profile, pixel format, decoded frame count and duration (s) of an MP4, read by FFmpeg."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        ctx = stream.codec_context
        n = sum(1 for _ in container.decode(stream))
        duration = float(stream.duration * stream.time_base)
        return ctx.name, str(ctx.profile), str(ctx.pix_fmt), n, duration


def test_ring_is_bounded_by_seconds() -> None:
    ring = FrameRing(max_seconds=2.0, max_bytes=10**9)
    for i in range(100):
        ring.append(i / 10, jpeg(i))
    assert len(ring) == 21 and ring.newest_s == pytest.approx(9.9)
    assert [t for t, _ in ring.between(8.0, 8.25)] == pytest.approx([8.0, 8.1, 8.2])


def test_ring_is_bounded_by_bytes_whatever_the_frame_size() -> None:
    noise = np.random.default_rng(0).integers(0, 255, (360, 640, 3), np.uint8)
    big = encode_jpeg(noise)  # incompressible: a worst case for memory
    ring = FrameRing(max_seconds=3600, max_bytes=20 * len(big))
    for i in range(200):
        ring.append(i / 25, big)
        assert ring.nbytes <= ring.max_bytes
    assert len(ring) == 20


def test_write_mp4_is_h264_with_the_frames_and_duration_given(tmp_path: Path) -> None:
    frames = [(i / 10, jpeg(3 * i, (322, 181))) for i in range(40)]  # odd size: rounded down to even
    path = tmp_path / "clip.mp4"
    assert write_mp4(path, frames) == 40
    codec, profile, pix_fmt, n, duration = probe(path)
    assert (codec, profile, pix_fmt, n) == ("h264", "Main", "yuv420p", 40)
    assert duration == pytest.approx(4.0, abs=0.11)
    cap = cv2.VideoCapture(str(path))  # OpenCV's FFmpeg reads it too
    assert (cap.get(cv2.CAP_PROP_FRAME_WIDTH), cap.get(cv2.CAP_PROP_FRAME_HEIGHT)) == (322, 180)
    assert cap.read()[0]
    cap.release()
    assert not list(tmp_path.glob(".*.part"))  # written atomically


def test_write_mp4_keeps_real_time_across_dropped_frames(tmp_path: Path) -> None:
    stamps = [i / 10 for i in range(50) if not 10 <= i < 30]  # two seconds of frames lost
    path = tmp_path / "gap.mp4"
    assert write_mp4(path, [(t, jpeg(100)) for t in stamps]) == 30
    _, _, _, n, duration = probe(path)
    assert n == 30 and duration == pytest.approx(5.0, abs=0.11)


def test_write_mp4_needs_frames(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one frame"):
        write_mp4(tmp_path / "x.mp4", [])


def frame(i: int, fps: float = 10.0) -> LiveFrame:
    image = np.full((180, 320, 3), i % 255, np.uint8)
    return LiveFrame("cam1", i, i / fps, image, Detections.empty(), {}, (320, 180), header=f"frame {i}")


def wait_for(predicate, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_recorder_cuts_a_clip_around_the_start_from_before_and_after_the_request(tmp_path: Path) -> None:
    rec = ClipRecorder(tmp_path, pre_s=2.0, post_s=1.5)
    rec.start()
    for i in range(50):  # 0.0 .. 4.9 s
        rec.add(frame(i))
        time.sleep(0.002)
    assert wait_for(lambda: rec.rings.get("cam1") is not None and len(rec.rings["cam1"]) == 50)
    rec.request("cam1", "ev1", start_s=4.0)  # 2.0 .. 5.5 s: 30 frames buffered, 6 still to come
    for i in range(50, 70):
        rec.add(frame(i))
        time.sleep(0.002)
    assert wait_for(lambda: "ev1" in rec.written)  # written as soon as a frame past 5.5 s arrived
    rec.close()
    assert rec.written["ev1"] == 36
    codec, _, _, n, duration = probe(rec.path_for("ev1"))
    assert codec == "h264" and n == 36 and duration == pytest.approx(3.6, abs=0.11)
    assert rec.stats()["dropped"] == 0 and rec.failed == 0


def test_recorder_writes_a_pending_clip_when_the_stream_goes_quiet_or_at_close(tmp_path: Path) -> None:
    rec = ClipRecorder(tmp_path, pre_s=1.0, post_s=5.0, idle_flush_s=0.3)
    rec.start()
    for i in range(20):
        rec.add(frame(i))
    rec.request("cam1", "quiet", start_s=1.5)  # wants up to 6.5 s; the stream stops at 1.9 s
    assert wait_for(lambda: "quiet" in rec.written, timeout=10)
    assert rec.written["quiet"] == 15  # frames 5..19: from 0.5 s to the last one, 1.9 s
    rec.request("cam1", "at-close", start_s=1.0)
    rec.close()
    assert "at-close" in rec.written


def test_recorder_buffers_at_most_max_fps_frames_a_second(tmp_path: Path) -> None:
    rec = ClipRecorder(tmp_path, max_fps=10.0)
    rec.start()
    for i in range(100):  # 4 s of a 25 fps stream
        rec.add(frame(i, fps=25.0))
    rec.close()
    ring = rec.rings["cam1"]
    assert len(ring) == 40  # 10 a second on average: 0.0, 0.12, 0.2, 0.32, 0.4, ...
    stamps = [t for t, _ in ring.between(0, 10)]
    assert min(b - a for a, b in zip(stamps, stamps[1:], strict=False)) >= 0.08 - 1e-6
