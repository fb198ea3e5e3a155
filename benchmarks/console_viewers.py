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
import platform
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


def time_watch(detector: object, config: Path, frames: int) -> dict[str, float]:
    from campusguard.app.config import load_config
    from campusguard.app.service import WatchService

    service = WatchService(load_config(config), detector_factory=lambda *a: detector, out=io.StringIO())
    t0 = time.perf_counter()
    service.start()
    service.wait()
    elapsed = time.perf_counter() - t0
    assert service.finish(), "pipeline failed"
    processed = sum(m.frames_processed for m in service.metrics.values())
    assert processed == frames, f"processed {processed} of {frames} frames"
    return {"fps": processed / elapsed}


def run_runtime(runtime: Any) -> tuple[float, int, int]:
    """Start a `ConsoleRuntime`, wait for its file to end: seconds, frames processed, live JPEGs encoded."""
    t0 = time.perf_counter()
    runtime.start()
    runtime.service.wait()
    elapsed = time.perf_counter() - t0
    processed = sum(m.frames_processed for m in runtime.service.metrics.values())
    return elapsed, processed, runtime.hub.encoded_frames("cam0")


def time_console(detector: object, config: Path, frames: int, viewers: int) -> dict[str, float]:
    from campusguard.app.console.runtime import ConsoleRuntime

    runtime = ConsoleRuntime(config, detector_factory=lambda *a: detector, out=io.StringIO())
    opened = [runtime.open_viewer("cam0", maxsize=2) for _ in range(viewers)]
    received = [0] * viewers

    def watch(k: int) -> None:
        while not opened[k].closed:
            if opened[k].get(0.5) is not None:
                received[k] += 1

    threads = [threading.Thread(target=watch, args=(k,), daemon=True) for k in range(viewers)]
    for t in threads:
        t.start()
    elapsed, processed, encoded = run_runtime(runtime)
    runtime.stop()
    for t in threads:
        t.join(2)
    assert processed == frames, f"processed {processed} of {frames} frames"
    return {
        "fps": processed / elapsed,
        "viewer_fps": statistics.mean(received) / elapsed if viewers else 0.0,
        "encoded_fps": encoded / elapsed,
    }


def time_http(detector: object, config: Path, frames: int, viewers: int) -> dict[str, float]:
    import socket

    import httpx
    import uvicorn

    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app
    from campusguard.app.console.users import UserStore

    runtime = ConsoleRuntime(config, detector_factory=lambda *a: detector, out=io.StringIO())
    users = UserStore(config.with_suffix(".users.db"))
    users.add_user("bench", "viewer", "bench-password-1")
    token = users.create_api_token("bench")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(runtime, users_db=users), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    while not server.started:
        time.sleep(0.05)
    done = threading.Event()
    received = [0] * viewers
    connected = threading.Barrier(viewers + 1)

    def watch(k: int) -> None:
        url = f"http://127.0.0.1:{port}/api/v1/cameras/cam0/live.mjpeg"
        with httpx.stream("GET", url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as response:
            assert response.status_code == 200, response.status_code
            connected.wait()
            for chunk in response.iter_bytes():
                received[k] += chunk.count(b"--frame\r\n")
                if done.is_set():
                    return

    threads = [threading.Thread(target=watch, args=(k,), daemon=True) for k in range(viewers)]
    for t in threads:
        t.start()
    connected.wait()
    elapsed, processed, encoded = run_runtime(runtime)
    done.set()
    server.should_exit = True
    serving.join(10)
    runtime.stop()
    users.close()
    assert processed == frames, f"processed {processed} of {frames} frames"
    return {
        "fps": processed / elapsed,
        "viewer_fps": statistics.mean(received) / elapsed,
        "encoded_fps": encoded / elapsed,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=None, help="model (default: the bundled one)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--frames", type=int, default=150, help="frames of the 1280x720 test video")
    ap.add_argument("--out", type=Path, default=None, help="write <out>.md and <out>.json")
    args = ap.parse_args()

    from watch_throughput import make_video

    from campusguard.detector import Detector
    from campusguard.models.registry import DEFAULT_MODEL

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
    for r in range(args.rounds):
        order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
        for name in order:
            runs[name].append(contenders[name](f"{name}-{r}"))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]['fps']:.1f} fps" for k, v in runs.items()), flush=True)

    def fps(name: str) -> list[float]:
        return [x["fps"] for x in runs[name]]

    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(fps(a), fps(b), strict=True))

    ratios = {
        "console4 / console0 (4 live viewers vs none; target >= 0.9)": ratio("console4", "console0"),
        "http4 / console0 (4 MJPEG clients over HTTP vs none; target >= 0.9)": ratio("http4", "console0"),
        "console0 / watch (console side threads, nobody watching)": ratio("console0", "watch"),
        "console4 / watch": ratio("console4", "watch"),
    }
    viewer_fps = statistics.median(x["viewer_fps"] for x in runs["console4"])
    http_fps = statistics.median(x["viewer_fps"] for x in runs["http4"])
    encoded_fps = statistics.median(x["encoded_fps"] for x in runs["console4"])
    encoded0 = statistics.median(x["encoded_fps"] for x in runs["console0"])
    for k, v in ratios.items():
        print(f"{k}: {v:.3f}")
    print(
        f"console4: each viewer got {viewer_fps:.1f} frames/s; hub encoded {encoded_fps:.1f} JPEG/s "
        f"(console0: {encoded0:.1f}); http4: each client got {http_fps:.1f} frames/s"
    )

    if args.out is not None:
        cpu = platform.processor() or platform.machine()
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        load = os.getloadavg()[0]
        result: dict[str, Any] = {
            "command": f"python benchmarks/console_viewers.py --rounds {args.rounds} --frames {args.frames}",
            "cpu": cpu,
            "cpus": os.cpu_count(),
            "model": Path(model).name,
            "provider": detector.provider,
            "runs": runs,
            "ratios": ratios,
            "viewer_fps": viewer_fps,
            "http_client_fps": http_fps,
            "encoded_fps_4_viewers": encoded_fps,
            "encoded_fps_no_viewer": encoded0,
            "load_average_end": load,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
        rows = "\n".join(
            f"| {k} | {statistics.median(fps(k)):.1f} | {', '.join(f'{x:.1f}' for x in fps(k))} |" for k in contenders
        )
        ratio_rows = "\n".join(f"| {k} | {v:.3f} |" for k, v in ratios.items())
        args.out.with_suffix(".md").write_text(
            f"""# Console live view: pipeline throughput with 4 viewers vs none (CPU)

`{result["command"]}` on {cpu}, {os.cpu_count()} CPUs, **shared with other jobs** (load average
at the end {load:.1f}); model {result["model"]}, provider {detector.provider}; one 1280x720 stream,
every frame processed (file mode); median of {args.rounds} interleaved rounds (order alternating).

| contender | frames/s (median) | per round |
| --- | ---: | --- |
{rows}

| ratio (median of per-round ratios) | value |
| --- | ---: |
{ratio_rows}

With 4 viewers each viewer received {viewer_fps:.1f} frames/s (the hub sends at most 15 frames/s per
camera) and the hub encoded {encoded_fps:.1f} JPEG/s once for all four; with no viewer it encoded
{encoded0:.1f}/s. Over HTTP each of the 4 MJPEG clients received {http_fps:.1f} frames/s. `console0` includes the clip ring buffer (every frame drawn, downscaled to 640 px
and JPEG-encoded on its own thread), which is why it is below `watch`.
"""
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
