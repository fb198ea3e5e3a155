"""The life of `watch` and `serve` as a service manager sees it, over real processes and servers.

- SIGTERM mid-run, with JSONL and webhook sinks and recording on: exit 0 within 15 s, every
  incident ended (``details.interrupted``), no ``.part`` recording, the sinks flushed, systemd
  told READY, WATCHDOG and STOPPING over a real unix datagram socket (issue 31, target 1);
- a second signal exits at once; a stop longer than ``service.stop_timeout_s`` exits 1;
- one good camera and one refused ``rtsp://`` camera: both commands run, every incident of the
  good camera is stored, and the refused one is ``offline`` (target 3);
- a real RTSP camera (GStreamer's RTSP server on loopback) offline at start, then up, then killed
  and restarted: the camera comes online, no incident is left open once it has been away
  ``offline_end_s`` (whether the rule or the interrupted end closed it: the interrupted end itself is
  checked deterministically by test_app_pipeline's offline test), the outage is logged once when it
  starts and once when it ends, and it comes back (skipped only without the GStreamer RTSP server).

The commands run as subprocesses (``fakes_watch.py``: the real `watch` and `serve` code with the
`BlobDetector`); the webhook receiver is a real HTTP server on a free loopback port.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent / "console"))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402
from webhook_receiver import WebhookReceiver  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import read_events  # noqa: E402
from campusguard.app.events.types import Event  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.errors import InvalidInputError  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"
COMMANDS = ["watch", "serve"]


def needs_console(command: str) -> None:
    if command == "serve":
        pytest.importorskip("fastapi", reason="serve needs the console extra")
        pytest.importorskip("argon2", reason="serve needs the console extra")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


# a webhook receiver and a notify socket -------------------------------------------------------
@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    r = WebhookReceiver()
    yield r
    r.stop()


class NotifySocket:
    """A unix datagram socket standing where systemd's would (``NOTIFY_SOCKET``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.01)

    def messages(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.sock.recv(4096).decode())
            except (TimeoutError, BlockingIOError):
                return out

    def close(self) -> None:
        self.sock.close()


# running the commands -------------------------------------------------------------------------
def start(command: str, config: Path, tmp: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``watch`` or ``serve`` of ``config`` as a subprocess (its own process group) with `BlobDetector`."""
    args = [str(config)]
    if command == "serve":
        args = ["--serve", str(free_port()), str(tmp / "users.db"), str(config)]
    return subprocess.Popen(
        [sys.executable, str(HERE / "fakes_watch.py"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        cwd=ROOT,
    )


def serve_port(proc: subprocess.Popen[str]) -> int:
    return int(proc.args[3])  # type: ignore[index]


def read_until(proc: subprocess.Popen[str], pattern: str, timeout_s: float = 60) -> list[str]:
    """stdout lines up to the first matching ``pattern`` (the process must still run)."""
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    for line in proc.stdout:
        lines.append(line)
        if re.search(pattern, line):
            return lines
        assert time.monotonic() < deadline, f"no line matching {pattern!r} in time"
    raise AssertionError(f"the process ended before a line matching {pattern!r}: {proc.communicate()}")


def stopped_by(proc: subprocess.Popen[str], sig: int, timeout_s: float = 30) -> tuple[float, str, str]:
    """Send ``sig``; the seconds the process took to exit, and the rest of its stdout and stderr."""
    t0 = time.monotonic()
    proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
    return time.monotonic() - t0, out, err


def sinks_config(video: Path, tmp: Path, hook: str, *, extra: str = "") -> str:
    """The scene looped in real time (a camera that never ends), stdout + JSONL + webhook sinks, recording on."""
    text = scene_config(video, tmp, extra=extra)
    text = text.replace(f"    source: {video}\n", f"    source: {video}\n    realtime: true\n    loop: true\n")
    text = text.replace("  - kind: jsonl\n", f"  - kind: webhook\n    url: {hook}\n  - kind: jsonl\n")
    return text.replace("  metrics_interval_s: 0\n", "  metrics_interval_s: 0\n  annotated_segment_s: 600\n")


# target 1: SIGTERM ------------------------------------------------------------------------------
@pytest.mark.parametrize("command", COMMANDS)
def test_sigterm_mid_run_ends_every_incident_finishes_the_recording_and_exits_0(
    command: str, tmp_path: Path, receiver: WebhookReceiver
) -> None:
    needs_console(command)
    video = write_scene(tmp_path / "scene.mp4")
    config = tmp_path / "watch.yaml"
    config.write_text(sinks_config(video, tmp_path, receiver.url))
    notify = NotifySocket(tmp_path / "notify.sock")
    env = {"NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "1000000"}
    proc = start(command, config, tmp_path, env)
    try:
        read_until(proc, r"^\[start\] .*fire_lane")  # the parked car: open until the stop
        time.sleep(1.5)  # a watchdog round or two
        seconds, out, err = stopped_by(proc, signal.SIGTERM)
    finally:
        notify_messages = notify.messages()
        notify.close()
    assert proc.returncode == 0, err
    assert seconds < 15, f"the stop took {seconds:.1f} s"
    assert "SIGTERM: stopping" in err
    events = read_events(tmp_path / "events.db")
    fire = [e for e in events if e.rule_kind == "fire_lane"]
    assert fire and all(e.end_s is not None for e in events)  # no incident left open
    assert all(e.details.get("interrupted") for e in fire)  # ended by the stop, not by the scene
    video_dir = tmp_path / "video"
    assert list(video_dir.glob("*.mp4")) and not list(video_dir.glob("*.part*"))  # the segment was finished
    jsonl = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    for sink in (jsonl, receiver.received):  # flushed: every start has its end
        starts = {m["event_id"] for m in sink if m["phase"] == "start"}
        ends = {m["event_id"] for m in sink if m["phase"] == "end"}
        assert starts and starts <= ends
    assert notify_messages[0].startswith("READY=1"), notify_messages
    assert "WATCHDOG=1" in notify_messages
    stopping = [i for i, m in enumerate(notify_messages) if m.startswith("STOPPING=1")]
    assert len(stopping) == 1 and stopping[0] > 0, notify_messages  # after READY


def test_a_second_signal_exits_at_once_and_a_stop_past_its_time_out_exits_1(tmp_path: Path) -> None:
    video = write_scene(tmp_path / "scene.mp4")
    config = tmp_path / "watch.yaml"
    config.write_text(scene_config(video, tmp_path, extra="service:\n  stop_timeout_s: 1.5\n"))
    for first, second in ((signal.SIGTERM, None), (signal.SIGINT, signal.SIGTERM)):
        notify = NotifySocket(tmp_path / f"notify-{first}.sock")
        # a detector batch in flight takes 6 s: the stop cannot end within its 1.5 s
        env = {"CG_FAKE_SECONDS_PER_IMAGE": "3", "NOTIFY_SOCKET": str(notify.path)}
        proc = start("watch", config, tmp_path, env)
        try:
            wait_for(lambda n=notify: any(m.startswith("READY=1") for m in n.messages()), 60, "READY=1")
            time.sleep(0.5)
            if second is None:
                seconds, _, err = stopped_by(proc, first)
                assert proc.returncode == 1 and seconds < 4, (seconds, err)
                assert "took longer than service.stop_timeout_s=1.5 s" in err
            else:
                proc.send_signal(first)
                time.sleep(0.3)
                seconds, _, err = stopped_by(proc, second)
                assert proc.returncode == 128 + second and seconds < 2, (seconds, err)
                assert "SIGINT: stopping" in err and "SIGTERM again: exiting now" in err
        finally:
            notify.close()
            if proc.poll() is None:
                proc.kill()


# target 3: a refused camera ---------------------------------------------------------------------
def expected_incidents(video: Path, tmp: Path) -> dict[str, Event]:
    """The good camera's incidents when it runs alone (file cameras raise deterministic ids)."""
    alone = tmp / "alone"
    alone.mkdir()
    loaded = parse_config(scene_config(video, alone), "alone.yaml")
    with open(os.devnull, "w") as devnull:
        assert WatchService(loaded, detector_factory=lambda *a: BlobDetector(), out=devnull).run()
    return {e.event_id: e for e in read_events(alone / "events.db")}


@pytest.mark.parametrize("command", COMMANDS)
def test_one_refused_rtsp_camera_does_not_stop_the_good_one(command: str, tmp_path: Path) -> None:
    needs_console(command)
    video = write_scene(tmp_path / "scene.mp4")
    expected = expected_incidents(video, tmp_path)
    refused = f"rtsp://127.0.0.1:{free_port()}/cam"
    text = scene_config(video, tmp_path).replace(
        "alerts:\n",
        f"  - id: gate\n    source: {refused}\n    reconnect: {{initial_s: 0.2, max_s: 1}}\n"
        f"  - id: loop\n    source: {video}\n    realtime: true\n    loop: true\nalerts:\n",
    )
    config = tmp_path / "watch.yaml"
    config.write_text(text)
    proc = start(command, config, tmp_path)
    try:

        def good_camera_done() -> bool:
            assert proc.poll() is None, proc.communicate()
            db = tmp_path / "events.db"
            try:  # the file exists a moment before its schema does
                events = read_events(db)
            except InvalidInputError:
                return False
            stored = {e.event_id for e in events if e.camera_id == "cam1" and e.end_s is not None}
            return stored == set(expected)

        wait_for(good_camera_done, 60, "every incident of the good camera")
        if command == "serve":
            check_console_shows_the_offline_camera(serve_port(proc), tmp_path)
        seconds, out, err = stopped_by(proc, signal.SIGTERM)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    stored = {e.event_id: e for e in read_events(tmp_path / "events.db") if e.camera_id == "cam1"}
    assert set(stored) == set(expected)
    assert [(e.rule_name, e.start_s, e.end_s) for e in stored.values()] == [
        (e.rule_name, e.start_s, e.end_s) for e in expected.values()
    ]
    offline_lines = [ln for ln in err.splitlines() if "camera gate: offline" in ln]
    assert len(offline_lines) == 1, err  # one line for the outage, not one per attempt
    assert "cannot open video source" in offline_lines[0]


def check_console_shows_the_offline_camera(port: int, tmp: Path) -> None:
    """``/api/v1/cameras``, ``/readyz``'s detail and the metric of a refused camera: ``offline``."""
    import httpx
    from argon2 import PasswordHasher

    from campusguard.app.console.identity.users import UserStore

    with UserStore(tmp / "users.db", password_hasher=PasswordHasher(time_cost=1, memory_cost=1024)) as users:
        users.add_user("ada", "admin", "admin-pass-1")
        token = users.create_api_token("ada")
    base, h = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    cameras = {c["name"]: c["state"] for c in httpx.get(f"{base}/api/v1/cameras", headers=h).json()}
    assert cameras["gate"] == "offline" and cameras["loop"] == "live", cameras
    ready = httpx.get(f"{base}/readyz", headers=h)
    assert ready.status_code == 200, ready.text  # a live camera: ready, with the offline one as a detail
    assert ready.json()["cameras_down"]["gate"] == "offline"
    metrics = httpx.get(f"{base}/metrics", headers=h).text
    assert 'campusguard_camera_state{camera="gate",state="offline"} 1.0' in metrics
    assert 'campusguard_camera_state{camera="loop",state="live"} 1.0' in metrics


def test_a_missing_local_file_stays_a_start_up_error(tmp_path: Path) -> None:
    video = write_scene(tmp_path / "scene.mp4", n=10)
    text = scene_config(video, tmp_path).replace(
        "alerts:\n", f"  - id: gone\n    source: {tmp_path / 'gone.mp4'}\nalerts:\n"
    )
    config = tmp_path / "watch.yaml"
    config.write_text(text)
    proc = start("watch", config, tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    (line,) = err.strip().splitlines()
    assert re.fullmatch(
        rf"error: {re.escape(str(config))}:\d+: cameras\[1\]\.source: camera 'gone': video file .*gone\.mp4' does not exist",
        line,
    ), line


class _ReadersEndFirst(WatchService):
    """A `WatchService` whose cameras' readers reach the end of their short file before the rest of
    `start` has run: the window a restart after a kill opens (finishing the dead run's recordings)."""

    def _finish_dead_segments(self) -> None:
        for thread in self.threads:
            if thread.name.startswith("reader-"):
                thread.join(10)
        super()._finish_dead_segments()


class _SlowBlobs(BlobDetector):
    def predict_batch(self, images: list) -> list:
        time.sleep(0.2 * len(images))
        return super().predict_batch(images)


def test_a_file_read_to_its_end_before_its_analytics_started_is_still_analysed_to_its_last_frame(
    tmp_path: Path,
) -> None:
    video = write_scene(tmp_path / "short.mp4", n=5)
    service = _ReadersEndFirst(
        parse_config(scene_config(video, tmp_path), "watch.yaml"),
        detector_factory=lambda *a: _SlowBlobs(),
        out=io.StringIO(),
    )
    assert service.run()
    # the run ends behind the camera's last frame (the reader's end is not handed to the event writer
    # past the analytics worker): every frame analysed, no worker left inside OpenCV at exit
    assert service.metrics["cam1"].frames_processed == 5
    assert not service.analytics["cam1"].inbox.qsize()


# a real RTSP camera, killed and restarted -------------------------------------------------------
def rtsp_server_available() -> bool:
    if not Path(SYSTEM_PYTHON).exists():
        return False
    probe = (
        "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
        "from gi.repository import Gst, GstRtspServer; Gst.init(None); "
        "assert all(Gst.ElementFactory.find(e) for e in ('videotestsrc', 'videoconvert', 'jpegenc', 'rtpjpegpay'))"
    )
    return subprocess.run([SYSTEM_PYTHON, "-c", probe], capture_output=True).returncode == 0


class RtspCamera:
    """GStreamer's RTSP server on loopback (``rtsp_server.py``): started, killed and restarted."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"rtsp://127.0.0.1:{port}/cam"
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [SYSTEM_PYTHON, str(HERE / "rtsp_server.py"), str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(5)
            self.proc = None


def test_a_real_rtsp_camera_offline_at_start_then_killed_and_restarted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    if not rtsp_server_available():
        pytest.skip(
            "needs GStreamer's RTSP server for /usr/bin/python3 (apt: python3-gi gir1.2-gst-rtsp-server-1.0 "
            "gstreamer1.0-plugins-base gstreamer1.0-plugins-good; .ci/run installs them)"
        )
    needs_console("serve")
    from fakes_console import make_console

    camera = RtspCamera(free_port())
    text = f"""\
tracker:
  min_consecutive_frames: 1
cameras:
  - id: gate
    source: {camera.url}
    stall_timeout_s: 2
    offline_end_s: 1
    reconnect: {{initial_s: 0.2, max_s: 0.5}}
    motion: {{enabled: false}}
    zones:
      - name: all
        polygon: [[0, 0], [1, 0], [1, 1], [0, 1]]
        units: fraction
    rules:
      - kind: intrusion
        zone: all
        classes: [person]
        min_seconds: 0.3
storage:
  sqlite: {tmp_path / "events.db"}
outputs:
  metrics_interval_s: 0
"""
    config = tmp_path / "watch.yaml"
    config.write_text(text)
    console = make_console(config, tmp_path)
    runtime = console.runtime
    client = console.client()
    caplog.set_level(logging.WARNING, logger="campusguard")
    try:
        runtime.start()  # the camera's server is not up: the console starts all the same
        assert runtime.camera_status()[0].state == "offline"
        assert client.get("/readyz", headers=console.bearer("vera")).json()["cameras_down"] == {"gate": "offline"}
        camera.start()

        def incidents(open_only: bool = False) -> list[Event]:
            events = read_events(tmp_path / "events.db")
            return [e for e in events if e.end_s is None] if open_only else events

        wait_for(lambda: len(incidents(open_only=True)) == 1, 30, "an incident once the camera is up")
        assert runtime.camera_status()[0].state == "live" and client.get("/readyz").status_code == 200
        camera.kill()  # the camera goes away with its incident open
        wait_for(lambda: not incidents(open_only=True), 15, "the open incident to end after offline_end_s")
        # one incident as a rule (a second where the tracker lost and found the ball again, on a loaded machine),
        # ended as interrupted when it was still open at the kill. Under CI's load the rule has also been seen
        # to end it itself just before (its ball missed for end_grace_s), so this test asks only that none is
        # left open; test_app_pipeline's test_an_incident_open_when_its_camera_goes_offline_ends_as_interrupted
        # checks the interrupted end deterministically. (The wait above is that check: nothing to assert again.)
        before = incidents()
        wait_for(lambda: runtime.camera_status()[0].state == "offline", 15, "the camera to be offline")
        assert client.get("/readyz").status_code == 503
        time.sleep(1.5)  # a few refused attempts, held back in the log
        camera.start()
        try:
            wait_for(lambda: len(incidents()) > len(before), 60, "a new incident after the camera came back")
        except AssertionError as e:  # what the service logged says which stage stopped
            raise AssertionError(f"{e}; log: {[r.getMessage() for r in caplog.records]}") from None
    finally:
        runtime.stop()
        camera.kill()
        console.users.close()
    lines = [r.getMessage() for r in caplog.records if "camera gate" in r.getMessage()]
    starts = [ln for ln in lines if "outage started" in ln]
    ends = [ln for ln in lines if "held back" in ln]
    # one line each when an outage starts and ends: two outages here (offline at start, the kill), one more
    # where a loaded machine starves the camera's server for over stall_timeout_s
    assert len(starts) == len(ends) >= 2, lines
    assert re.search(r"after \d+\.\d s of outage \([1-9]\d* failure\(s\) held back\)", ends[-1]), ends
    assert all(
        e.end_s is not None for e in incidents()
    )  # none left open (the SIGTERM test above checks the stop's interrupted end)
