"""Pipeline throughput of the console with 4 live viewers against none, measured side by side in one run.

Every round runs, on the same 1280x720 synthetic campus video and the same loaded detector,
every frame in file mode (no drops, so throughput is the measure):

- ``watch``: the plain `WatchService` (what ``campusguard watch`` runs), for reference;
- ``console0``: `ConsoleRuntime` (the same pipeline plus live hub, clip ring buffer, event bus,
  metrics) with nobody watching;
- ``console4``: the same with 4 live viewers open, each a thread reading JPEG frames as fast
  as they come (what an MJPEG response does before writing to its socket);
- ``http4``: the console app served by uvicorn on 127.0.0.1 in the same process, with 4 HTTP
  clients (threads) streaming ``GET /api/v1/cameras/cam0/live.mjpeg`` with a bearer token:
  the whole path a browser's live tile takes.

Ratios are computed per round and their median reported; rounds alternate the order of the
contenders so drift on a shared machine hits all alike. Target (issue 9): console4 / console0 and http4 / console0 >= 0.9.

    python benchmarks/console_viewers.py --rounds 5 --frames 150 --out docs/results/console-viewers-cpu
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("YOLO_OFFLINE", "1")


def write_config(video: Path, folder: Path, tag: str) -> Path:
    """The throughput benchmark's one-camera config (a zone, three rules, a fresh database, no outputs)."""
    from watch_throughput import watch_config  # benchmarks/ is on the path when this script runs

    path = folder / f"{tag}.yaml"
    path.write_text(watch_config(video, 1, folder, batch_size=4))
    return path


def thread_cpu_s(tid: int) -> float:
    """CPU seconds (user + system) used so far by one thread of this process (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/self/task/{tid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(start: Any, wait: Any, client_tids: list[int]) -> tuple[float, float]:
    """Run ``start(); wait()``: wall seconds, and CPU seconds of the process minus the viewer clients' threads."""
    cpu0, clients0 = time.process_time(), sum(thread_cpu_s(t) for t in client_tids)
    t0 = time.perf_counter()
    start()
    wait()
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0 - (sum(thread_cpu_s(t) for t in client_tids) - clients0)
    return elapsed, cpu


def result(frames: int, elapsed: float, cpu: float, **extra: float) -> dict[str, float]:
    return {"fps": frames / elapsed, "cpu_ms_per_frame": 1000 * cpu / frames, **extra}


def time_watch(detector: object, config: Path, frames: int) -> dict[str, float]:
    from campusguard.app.config import load_config
    from campusguard.app.service import WatchService

    service = WatchService(load_config(config), detector_factory=lambda *a: detector, out=io.StringIO())
    elapsed, cpu = measure(service.start, service.wait, [])
    assert service.finish(), "pipeline failed"
    processed = sum(m.frames_processed for m in service.metrics.values())
    assert processed == frames, f"processed {processed} of {frames} frames"
    return result(frames, elapsed, cpu)


def run_runtime(runtime: Any, client_tids: list[int]) -> tuple[float, float, int]:
    """Start a `ConsoleRuntime` and wait for its file to end: wall s, CPU s (without clients), JPEGs encoded."""
    elapsed, cpu = measure(runtime.start, lambda: runtime.service.wait(), client_tids)
    return elapsed, cpu, runtime.hub.encoded_frames("cam0")


def start_clients(viewers: int, watch: Any) -> tuple[list[threading.Thread], list[int]]:
    """``viewers`` daemon threads running ``watch(k, ready)``; returns them and their native thread ids."""
    tids: list[int] = []
    ready = threading.Barrier(viewers + 1)

    def run(k: int) -> None:
        tids.append(threading.get_native_id())
        watch(k, ready)

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(viewers)]
    for t in threads:
        t.start()
    if viewers:
        ready.wait()
    return threads, tids


def time_console(detector: object, config: Path, frames: int, viewers: int) -> dict[str, float]:
    from campusguard.app.console.runtime import ConsoleRuntime

    runtime = ConsoleRuntime(config, detector_factory=lambda *a: detector, out=io.StringIO())
    opened = [runtime.open_viewer("cam0", maxsize=2) for _ in range(viewers)]
    received = [0] * viewers

    def watch(k: int, ready: threading.Barrier) -> None:
        ready.wait()
        while not opened[k].closed:
            if opened[k].get(0.5) is not None:
                received[k] += 1

    threads, tids = start_clients(viewers, watch)
    elapsed, cpu, encoded = run_runtime(runtime, tids)
    processed = sum(m.frames_processed for m in runtime.service.metrics.values())  # type: ignore[union-attr]
    runtime.stop()
    for t in threads:
        t.join(2)
    assert processed == frames, f"processed {processed} of {frames} frames"
    viewer_fps = statistics.mean(received) / elapsed if viewers else 0.0
    return result(frames, elapsed, cpu, viewer_fps=viewer_fps, encoded_fps=encoded / elapsed)


def time_http(detector: object, config: Path, frames: int, viewers: int) -> dict[str, float]:
    import socket

    import httpx
    import uvicorn

    from campusguard.app.console.identity.users import UserStore
    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app

    runtime = ConsoleRuntime(config, detector_factory=lambda *a: detector, out=io.StringIO())
    users = UserStore(config.with_suffix(".users.db"))
    users.add_user("bench", "viewer", "bench-password-1")
    token = users.create_api_token("bench")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config_ = uvicorn.Config(
        create_app(runtime, users_db=users),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config_)
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.05)
    done = threading.Event()
    received = [0] * viewers
    url = f"http://127.0.0.1:{port}/api/v1/cameras/cam0/live.mjpeg"
    headers = {"Authorization": f"Bearer {token}"}

    def watch(k: int, ready: threading.Barrier) -> None:
        first = True
        while not done.is_set():  # a read timeout (no frame for 2 s on a loaded machine) reconnects
            try:
                with httpx.stream("GET", url, headers=headers, timeout=httpx.Timeout(10.0, read=2.0)) as response:
                    assert response.status_code == 200, response.status_code
                    if first:
                        first = False
                        ready.wait()
                    for chunk in response.iter_bytes():
                        received[k] += chunk.count(b"--frame\r\n")
                        if done.is_set():
                            return
            except httpx.HTTPError:
                continue

    threads, tids = start_clients(viewers, watch)
    elapsed, cpu, encoded = run_runtime(runtime, tids)
    processed = sum(m.frames_processed for m in runtime.service.metrics.values())  # type: ignore[union-attr]
    done.set()
    for t in threads:
        t.join(5)
    server.should_exit = True
    serving.join(10)
    runtime.stop()
    users.close()
    assert processed == frames, f"processed {processed} of {frames} frames"
    return result(frames, elapsed, cpu, viewer_fps=statistics.mean(received) / elapsed, encoded_fps=encoded / elapsed)


def live_frame_cost_ms(video: Path, repeats: int = 30) -> float:
    """CPU ms (this thread) to draw and JPEG-encode one 1280x720 live frame, as the hub does per frame sent."""
    import cv2
    import numpy as np

    from campusguard.app.media.live import LiveFrame, encode_jpeg, render_live_frame
    from campusguard.detections import Detections

    cap = cv2.VideoCapture(str(video))
    ok, image = cap.read()
    cap.release()
    assert ok, "cannot read the test video"
    h, w = image.shape[:2]
    boxes = np.array([[100, 200, 180, 400], [600, 300, 700, 500]], np.float32)
    dets = Detections(boxes, np.array([0.9, 0.8], np.float32), np.array([0, 0]), np.array([1, 2]))
    zone = np.array([[0.1 * w, 0.4 * h], [0.9 * w, 0.4 * h], [0.9 * w, h], [0.1 * w, h]], np.float32)
    frame = LiveFrame("cam0", 0, 0.0, image, dets, {0: "person"}, (w, h), zones=[("plaza", zone)], header="cam0")
    encode_jpeg(render_live_frame(frame))
    t0 = time.thread_time()
    for _ in range(repeats):
        encode_jpeg(render_live_frame(frame))
    return 1000 * (time.thread_time() - t0) / repeats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model (default: the bundled one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=150, help="frames of the 1280x720 test video")
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    args = ap.parse_args()

    from watch_throughput import make_video

    from campusguard.detector import Detector
    from campusguard.models.resolve import DEFAULT_MODEL

    model = args.model or str(DEFAULT_MODEL)
    tmp = Path(tempfile.mkdtemp(prefix="console-viewers-"))
    video = make_video(tmp / "viewers720.mp4", args.frames)
    detector = Detector(model, imgsz=640, dynamic=True)
    print(f"model {model}, provider {detector.provider}, {args.frames} frames of 1280x720 per run", flush=True)
    import cv2

    cap = cv2.VideoCapture(str(video))
    for _ in range(3):  # warm-up
        ok, image = cap.read()
        if ok:
            detector(image)
    cap.release()

    contenders = {
        "watch": lambda tag: time_watch(detector, write_config(video, tmp, tag), args.frames),
        "console0": lambda tag: time_console(detector, write_config(video, tmp, tag), args.frames, 0),
        "console4": lambda tag: time_console(detector, write_config(video, tmp, tag), args.frames, 4),
        "http4": lambda tag: time_http(detector, write_config(video, tmp, tag), args.frames, 4),
    }
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in contenders}
    loads = [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name in order:
            runs[name].append(contenders[name](f"{name}-{r}"))
        loads.append(os.getloadavg()[0])
        print(
            f"round {r + 1} (load {loads[-1]:.1f}): "
            + ", ".join(
                f"{k} {v[-1]['fps']:.2f} fps {v[-1]['cpu_ms_per_frame']:.0f} ms CPU/frame" for k, v in runs.items()
            ),
            flush=True,
        )

    def values(name: str, key: str) -> list[float]:
        return [x[key] for x in runs[name]]

    def ratio(a: str, b: str, key: str = "fps") -> float:
        return statistics.median(x / y for x, y in zip(values(a, key), values(b, key), strict=True))

    ratios = {
        "console4 / console0 frames/s (4 live viewers vs none; target >= 0.9)": ratio("console4", "console0"),
        "http4 / console0 frames/s (4 MJPEG clients over HTTP vs none; target >= 0.9)": ratio("http4", "console0"),
        "console0 / watch frames/s (console side threads, nobody watching)": ratio("console0", "watch"),
        "console0 / console4 CPU per frame (4 live viewers vs none)": ratio("console0", "console4", "cpu_ms_per_frame"),
        "console0 / http4 CPU per frame (4 MJPEG clients vs none)": ratio("console0", "http4", "cpu_ms_per_frame"),
        "watch / console0 CPU per frame (console side threads)": ratio("watch", "console0", "cpu_ms_per_frame"),
    }
    viewer_fps = statistics.median(values("console4", "viewer_fps"))
    http_fps = statistics.median(values("http4", "viewer_fps"))
    encoded_fps = statistics.median(values("console4", "encoded_fps"))
    encoded0 = statistics.median(values("console0", "encoded_fps"))
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    print(
        f"console4: each viewer got {viewer_fps:.2f} frames/s; hub encoded {encoded_fps:.2f} JPEG/s "
        f"(console0: {encoded0:.2f}); http4: each client got {http_fps:.2f} frames/s"
    )
    live_ms = live_frame_cost_ms(video)
    print(f"drawing + JPEG-encoding one 1280x720 live frame: {live_ms:.1f} ms CPU")
    if args.out is not None:
        write_report(
            args, model, detector.provider, runs, ratios, loads, viewer_fps, http_fps, encoded_fps, encoded0, live_ms
        )
    return 0


def write_report(
    args: argparse.Namespace,
    model: str,
    provider: str,
    runs: dict[str, list[dict[str, float]]],
    ratios: dict[str, float],
    loads: list[float],
    viewer_fps: float,
    http_fps: float,
    encoded_fps: float,
    encoded0: float,
    live_ms: float,
) -> None:
    """``<out>.json`` with every run, and ``<out>.md`` with the tables."""
    from campusguard.doctor import cpu_name

    cpu = cpu_name()
    command = f"python benchmarks/console_viewers.py --rounds {args.rounds} --frames {args.frames}"
    data: dict[str, Any] = {
        "command": command,
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "model": Path(model).name,
        "provider": provider,
        "runs": runs,
        "ratios": ratios,
        "load_average_per_round": loads,
        "viewer_fps": viewer_fps,
        "http_client_fps": http_fps,
        "encoded_fps_4_viewers": encoded_fps,
        "encoded_fps_no_viewer": encoded0,
        "live_frame_cpu_ms": live_ms,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(data, indent=2) + "\n")

    def cell(name: str, key: str, fmt: str) -> str:
        xs = [x[key] for x in runs[name]]
        return f"{statistics.median(xs):{fmt}} | {', '.join(f'{x:{fmt}}' for x in xs)}"

    rows = "\n".join(f"| {k} | {cell(k, 'fps', '.2f')} | {cell(k, 'cpu_ms_per_frame', '.0f')} |" for k in runs)
    ratio_rows = "\n".join(f"| {k} | {v:.3f} |" for k, v in ratios.items())
    args.out.with_suffix(".md").write_text(
        f"""# Console live view: pipeline throughput with 4 viewers vs none (CPU)

`{command}` on {cpu}, {os.cpu_count()} CPUs, **shared with other jobs** (1-minute load average
{min(loads):.1f} to {max(loads):.1f} during the run); model {data["model"]}, provider {provider}; one
1280x720 stream, every frame processed (file mode); {args.rounds} interleaved rounds (order alternating).
CPU per frame is the process's CPU time over the run minus the viewer clients' own threads, per frame.

| contender | frames/s (median) | per round | CPU ms/frame (median) | per round |
| --- | ---: | --- | ---: | --- |
{rows}

| ratio (median of per-round ratios) | value |
| --- | ---: |
{ratio_rows}

With 4 in-process viewers each received {viewer_fps:.2f} frames/s and the hub encoded {encoded_fps:.2f}
JPEG/s once for all four (at most 15/s per camera); with no viewer it encoded {encoded0:.2f}/s. Over HTTP
each of the 4 MJPEG clients received {http_fps:.2f} frames/s. Drawing and JPEG-encoding one 1280x720
live frame costs {live_ms:.1f} ms of thread CPU time (measured after the rounds), so the hub's ceiling of
15 live frames/s per watched camera costs at most {15 * live_ms / 10:.1f}% of one core, whatever the
number of viewers.
"""
    )


if __name__ == "__main__":
    raise SystemExit(main())
