"""Console test helpers: a real `ConsoleRuntime` on a tiny synthetic video, the real app, real users.

The detector is `BlobDetector` (a real OpenCV colour-blob detector, see ``tests/app/fakes_watch.py``),
so everything after detection is the product's own code. Passwords are hashed with real argon2id at
small cost parameters (`CHEAP_HASHER`) to keep the 2-core CI fast. Import it as ``from fakes_console
import ...`` (a module of its own: ``conftest`` names clash between test folders).
"""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from argon2 import PasswordHasher

sys.path.insert(0, str(Path(__file__).parents[1]))
from fakes_watch import BlobDetector, scene_config  # noqa: E402

from campusguard.app.console.identity.auth import LoginLimiter  # noqa: E402
from campusguard.app.console.identity.users import UserStore  # noqa: E402
from campusguard.app.console.runtime import ConsoleRuntime  # noqa: E402
from campusguard.app.console.server import create_app  # noqa: E402

CHEAP_HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
PASSWORDS = {"ada": "admin-pass-1", "otto": "operator-pass-1", "vera": "viewer-pass-1"}
ROLES = {"ada": "admin", "otto": "operator", "vera": "viewer"}


def console_yaml(video: Path, tmp: Path, *, live: bool = False) -> str:
    """`scene_config` of the scene video; ``live``: looped at its real frame rate (a camera that never ends)."""
    text = scene_config(video, tmp)
    if live:
        text = text.replace(f"    source: {video}\n", f"    source: {video}\n    realtime: true\n    loop: true\n")
    return text


@dataclass
class ConsoleUnderTest:
    """The app over a real runtime, its users store, and helpers to log in."""

    app: Any
    runtime: ConsoleRuntime
    users: UserStore
    config: Path
    tmp: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def client(self, **kw: Any) -> Any:
        from fastapi.testclient import TestClient

        return TestClient(self.app, **kw)

    def token(self, name: str) -> str:
        """A session token of a seeded user (created directly in the store, no login request)."""
        if name not in self.tokens:
            self.tokens[name] = self.users.create_session(name)[0]
        return self.tokens[name]

    def bearer(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(name)}"}

    def audit_count(self) -> int:
        return self.users.audit_entries(limit=1)[1]


def ring(cx: float, cy: float, radius: float, points: int, seed: int) -> list[list[float]]:
    """A simple (star-shaped) polygon of ``points`` vertices around ``(cx, cy)``: radii 0.8..1.0 x ``radius``."""
    rng = np.random.default_rng(seed)
    angles = np.arange(points) * 2 * np.pi / points
    radii = radius * (0.8 + 0.2 * rng.random(points))
    return np.round(np.stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)], 1), 1).tolist()


def many_shapes_body(
    resolution_wh: tuple[int, int], *, zones: int = 63, masks: int = 32, points: int = 256
) -> dict[str, Any]:
    """A valid zones body with many big shapes (issue 32: 63 zones and 32 masks of 256 points, about
    350 KB of JSON): zones on a 9 x 7 grid of the frame, masks over the grid's corners, each mask
    overlapping four zones without holding any."""
    w, h = resolution_wh
    cell_w, cell_h = w / 9, h / 7
    r = min(cell_w, cell_h)
    zone_list = [
        {"name": f"zone-{k}", "polygon": ring((k % 9 + 0.5) * cell_w, (k // 9 + 0.5) * cell_h, 0.45 * r, points, k)}
        for k in range(zones)
    ]
    mask_list = [
        {"name": f"mask-{k}", "polygon": ring((k % 8 + 1) * cell_w, (k // 8 + 1) * cell_h, 0.3 * r, points, 100 + k)}
        for k in range(masks)
    ]
    return {"zones": zone_list, "lines": [], "rules": [], "privacy": {"masks": mask_list, "blur": "persons"}}


def put_zones(client: Any, camera: str, body: Any, headers: dict[str, str]) -> Any:
    """PUT a camera's zones as the editor does: ``If-Match`` with the ``ETag`` of a GET just before."""
    etag = client.get(f"/api/v1/cameras/{camera}/zones", headers=headers).headers.get("etag", '"none"')
    return client.put(f"/api/v1/cameras/{camera}/zones", json=body, headers={**headers, "If-Match": etag})


def make_console(
    config: Path, tmp: Path, *, start: bool = False, limiter: LoginLimiter | None = None, **app_kw: Any
) -> ConsoleUnderTest:
    runtime = ConsoleRuntime(config, detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
    users = UserStore(tmp / "users.db", password_hasher=CHEAP_HASHER)
    for name, role in ROLES.items():
        users.add_user(name, role, PASSWORDS[name])
    app = create_app(runtime, users_db=users, limiter=limiter, **app_kw)
    if start:
        runtime.start()
    return ConsoleUnderTest(app, runtime, users, config, tmp)


def watched_console(video: Path, tmp: Path) -> Iterator[ConsoleUnderTest]:
    """A console whose runtime watched ``video`` to its end (events, snapshots, clips exist); closed after."""
    config = tmp / "watch.yaml"
    config.write_text(console_yaml(video, tmp))
    c = make_console(config, tmp, start=True)
    assert c.runtime.service is not None and c.runtime.service.wait(60), "the pipeline did not finish the video"
    yield c
    c.runtime.stop()
    c.users.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until_serving(proc: subprocess.Popen[str], base: str, timeout_s: float = 90.0) -> None:
    """Wait until the `serve` process ``proc`` answers 200 on ``base``/healthz; fail with its output if it exits
    first, or after ``timeout_s`` seconds."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "serve did not come up"
        time.sleep(0.3)


@dataclass
class LiveServer:
    """A real uvicorn on a free loopback port serving a `ConsoleUnderTest`."""

    url: str
    console: ConsoleUnderTest
    server: Any
    thread: threading.Thread


def start_server(console: ConsoleUnderTest) -> LiveServer:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(console.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return LiveServer(f"http://127.0.0.1:{port}", console, server, thread)


def stop_server(live: LiveServer) -> None:
    live.server.should_exit = True
    live.thread.join(timeout=15)


def served_console(config: Path, tmp: Path) -> Iterator[LiveServer]:
    """A started console on ``config`` behind a real uvicorn; stopped and closed after (for fixtures:
    ``yield from served_console(...)``)."""
    c = make_console(config, tmp, start=True)
    live = start_server(c)
    yield live
    stop_server(live)
    c.runtime.stop()
    c.users.close()


def mjpeg_frames(response: Any, n: int) -> list[np.ndarray]:
    """The first ``n`` frames of a streamed ``multipart/x-mixed-replace`` MJPEG response, decoded (BGR)."""
    buf = b""
    frames: list[np.ndarray] = []
    for chunk in response.iter_bytes():
        buf += chunk
        while True:
            head_end = buf.find(b"\r\n\r\n")
            if not buf.startswith(b"--frame\r\n") or head_end < 0:
                break
            head = buf[:head_end].split(b"\r\n")
            length = int(next(h for h in head if h.lower().startswith(b"content-length:")).split(b":")[1])
            if len(buf) < head_end + 4 + length + 2:
                break
            jpeg = buf[head_end + 4 : head_end + 4 + length]
            image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            assert image is not None, "an MJPEG part is not a JPEG"
            frames.append(image)
            buf = buf[head_end + 4 + length + 2 :]
        if len(frames) >= n:
            break
    return frames
