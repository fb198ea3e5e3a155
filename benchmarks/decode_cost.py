"""Decode cost of one 720p H.264 camera stream on one CPU core, and its bitrate (capacity plan inputs).

Encodes the synthetic campus scene (`campusguard.data.synth.video.SynthVideo`, seed 0) as H.264
with PyAV's libx264 the way IP cameras send it (no B-frames, a keyframe every 2 s, a target bitrate),
then, pinned to one core, decodes it:

- ``opencv``: `cv2.VideoCapture(path, cv2.CAP_FFMPEG)` with one decoder thread, `read()` to BGR
  arrays: what `watch`'s camera reader does per frame;
- ``pyav``: PyAV with one decoder thread, frames converted to BGR arrays;
- ``pyav_no_convert``: PyAV decode only (YUV frames, no BGR conversion).

It reports decoded frames per second of wall time and of process CPU time (steadier when other
jobs share the machine), the CPU milliseconds per frame, and so how many 10 fps 720p streams one
core decodes. Results go to stdout and, with ``--out``, to a Markdown file.

    python benchmarks/decode_cost.py --seconds 10 --rounds 3 --out docs/results/decode-cost-cpu.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

os.environ.setdefault("OPENCV_FFMPEG_CAPTURE_OPTIONS", "threads;1")  # read before the first capture opens

import cv2  # noqa: E402
import numpy as np  # noqa: E402

from campusguard.doctor import cpu_name  # noqa: E402


class H264Writer:
    """Camera-like H.264 (MP4) through PyAV's libx264: main profile, no B-frames, a keyframe every 2 s, a target bitrate.

    Same ``write(frame_bgr)`` / ``release()`` as `cv2.VideoWriter`, which cannot encode H.264 here.
    """

    def __init__(self, path: Path, fps: int, size_wh: tuple[int, int], bitrate_kbps: int) -> None:
        import av

        self._av = av
        self.out = av.open(str(path), "w")
        self.stream = self.out.add_stream("libx264", rate=fps)
        self.stream.width, self.stream.height = size_wh
        self.stream.pix_fmt = "yuv420p"
        self.stream.bit_rate = bitrate_kbps * 1000
        self.stream.codec_context.gop_size = 2 * fps
        self.stream.codec_context.max_b_frames = 0
        self.stream.codec_context.time_base = Fraction(1, fps)
        self.stream.options = {"preset": "veryfast", "profile": "main"}

    def write(self, frame_bgr: np.ndarray) -> None:
        for packet in self.stream.encode(self._av.VideoFrame.from_ndarray(frame_bgr, format="bgr24")):
            self.out.mux(packet)

    def release(self) -> None:
        for packet in self.stream.encode():
            self.out.mux(packet)
        self.out.close()


def encode_h264(path: Path, seconds: float, fps: int, size_wh: tuple[int, int], bitrate_kbps: int) -> int:
    """Write the synthetic campus scene as camera-like H.264 (MP4); return the number of frames."""
    from campusguard.data.synth.video import SynthVideo

    video = SynthVideo(0, size_wh, seconds, fps)
    writer = H264Writer(path, fps, size_wh, bitrate_kbps)
    try:
        for i in range(video.num_frames):
            frame, _objects = video.frame(i)
            writer.write(frame)
    finally:
        writer.release()
    return video.num_frames


def decode_opencv(path: Path) -> int:
    """Decode every frame to BGR with OpenCV's FFMPEG backend (one thread); return the frame count."""
    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    if not cap.isOpened():
        raise RuntimeError(f"OpenCV cannot open {path}")
    n = 0
    try:
        while True:
            ok, _frame = cap.read()
            if not ok:
                break
            n += 1
    finally:
        cap.release()
    return n


def _decode_pyav(path: Path, convert: bool) -> int:
    import av

    n = 0
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "NONE"
        stream.codec_context.thread_count = 1
        for frame in container.decode(stream):
            if convert:
                frame.to_ndarray(format="bgr24")
            n += 1
    return n


def decode_pyav(path: Path) -> int:
    """Decode every frame to BGR with PyAV (one thread); return the frame count."""
    return _decode_pyav(path, convert=True)


def decode_pyav_no_convert(path: Path) -> int:
    """Decode every frame with PyAV (one thread), leaving it in YUV; return the frame count."""
    return _decode_pyav(path, convert=False)


DECODERS: dict[str, Callable[[Path], int]] = {
    "opencv": decode_opencv,
    "pyav": decode_pyav,
    "pyav_no_convert": decode_pyav_no_convert,
}


def time_decoder(decode: Callable[[Path], int], path: Path) -> tuple[float, float, int]:
    """(wall seconds, process CPU seconds, frames) of one full decode."""
    w0, c0 = time.perf_counter(), time.process_time()
    n = decode(path)
    return time.perf_counter() - w0, time.process_time() - c0, n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="length of the test video")
    ap.add_argument("--fps", type=int, default=10, help="camera frame rate of the test video")
    ap.add_argument("--bitrate-kbps", type=int, default=2000, help="H.264 target bitrate")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (median reported)")
    ap.add_argument("--core", type=int, default=0, help="CPU core to pin to")
    ap.add_argument("--out", type=Path, default=None, help="Markdown file for the results")
    ap.add_argument("--notes", default="", help="conditions of the run (e.g. machine shared with other jobs)")
    args = ap.parse_args()

    os.sched_setaffinity(0, {args.core})
    cv2.setNumThreads(1)
    size_wh = (1280, 720)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cam720p.mp4"
        frames = encode_h264(path, args.seconds, args.fps, size_wh, args.bitrate_kbps)
        size_bytes = path.stat().st_size
        measured_kbps = size_bytes * 8 / (frames / args.fps) / 1000
        walls: dict[str, list[float]] = {k: [] for k in DECODERS}
        cpus: dict[str, list[float]] = {k: [] for k in DECODERS}
        for _ in range(args.rounds):
            for name, decode in DECODERS.items():
                wall, cpu, n = time_decoder(decode, path)
                if n != frames:
                    raise RuntimeError(f"{name} decoded {n} of {frames} frames")
                walls[name].append(frames / wall)
                cpus[name].append(frames / cpu)
    load = os.getloadavg()[0]
    lines = [
        "# Decode cost of a 720p H.264 camera stream (CPU, one core)",
        "",
        f"`python benchmarks/decode_cost.py --seconds {args.seconds:g} --fps {args.fps} "
        f"--bitrate-kbps {args.bitrate_kbps} --rounds {args.rounds}`",
        "",
        f"CPU: {cpu_name()} ({os.cpu_count()} logical CPUs; the process pinned to core {args.core}); "
        f"OpenCV {cv2.__version__}; load average at the end {load:.1f}.",
        "",
        *([args.notes, ""] if args.notes else []),
        f"Video: synthetic campus scene (seed 0), {size_wh[0]}x{size_wh[1]}, {args.fps} fps, {frames} frames, "
        f"H.264 main profile (libx264 veryfast, no B-frames, keyframe every 2 s), target "
        f"{args.bitrate_kbps} kbit/s, file {size_bytes / 1e6:.2f} MB = {measured_kbps:,.0f} kbit/s.",
        "",
        "| decoder | frames/s (wall) | frames/s (CPU time) | CPU ms per frame | 10 fps streams per core |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in DECODERS:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        lines.append(f"| {name} | {wall:.0f} | {cpu:.0f} | {1000 / cpu:.2f} | {cpu / args.fps:.1f} |")
    lines += [
        "",
        "Medians of the rounds; per round (CPU-time frames/s): "
        + "; ".join(f"{k} " + ", ".join(f"{v:.0f}" for v in cpus[k]) for k in DECODERS)
        + ".",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
