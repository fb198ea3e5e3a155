"""Nodes under test: several real `campusguard serve --node` processes over the real PostgreSQL.

A site here is a config file (fresh PostgreSQL schema, a shared media folder, live HTTP cameras on
loopback, a webhook receiver), and `Node` is one `serve` process on its own port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # tests/app: the HTTP camera

from http_camera import HttpCamera, free_port  # noqa: E402
from webhook_receiver import WebhookReceiver  # noqa: E402

SRC = str(Path(__file__).parents[3] / "src")


def scene(seed: int) -> Callable[[float], np.ndarray]:
    """A textured 320x240 view with a block moving across it and sensor noise: a camera that sees."""
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 255, (240, 320, 3), dtype=np.uint8), (0, 0), 2)
    cv2.rectangle(base, (20, 20), (120, 90), (200, 180, 40), -1)
    cv2.circle(base, (240, 170), 40, (30, 60, 220), -1)

    def frame_at(t: float) -> np.ndarray:
        img = base.copy()
        x = int(20 + (t * 40) % 260)
        cv2.rectangle(img, (x, 120), (x + 30, 200), (250, 250, 250), -1)
        noise = rng.integers(-6, 7, img.shape, dtype=np.int16)
        return np.clip(img.astype(np.int16) + noise, 0, 255).astype(np.uint8)

    return frame_at


class Node:
    """One `campusguard serve CONFIG --node NAME --port P` process."""

    def __init__(self, name: str, config: Path, log_dir: Path) -> None:
        self.name = name
        self.config = config
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.port = free_port()  # a restarted node may get another port: the directory says which
        self.base = f"http://127.0.0.1:{self.port}"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "campusguard.cli.main", "serve", str(self.config), "--node", self.name,
                 "--port", str(self.port), "--log-level", "info"],
                env={**os.environ, "PYTHONPATH": SRC},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            self.proc.wait(timeout=60)

    def up(self) -> bool:
        try:
            return httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def cameras(self, headers: dict[str, str]) -> dict[str, dict[str, Any]]:
        r = httpx.get(f"{self.base}/api/v1/cameras", headers=headers, timeout=5)
        r.raise_for_status()
        return {c["name"]: c for c in r.json()}

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def add_admin(site: Site) -> None:
    """``campusguard users add ada --role admin --config SITE``: into the site's PostgreSQL."""
    r = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "users", "add", "ada", "--role", "admin", "--password-stdin",
         "--config", str(site.config)],
        input="admin-pass-1\n", capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC},
    )
    assert r.returncode == 0, r.stderr


def login(base: str) -> dict[str, str]:
    """A session of ada made on the console at ``base``, as a bearer header."""
    r = httpx.post(f"{base}/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"}, timeout=10)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['token']}"}


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, step_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy, at most ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            got = check()
            if got:
                return got
        except (httpx.HTTPError, AssertionError) as exc:
            last_error = exc
        time.sleep(step_s)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what} (last error: {last_error!r})")


class Site:
    """A site: its config, cameras, webhook receiver and nodes."""

    def __init__(self, tmp: Path, pg_url: str, cameras: int = 4) -> None:
        self.tmp = tmp
        self.pg_url = pg_url
        self.cameras = [HttpCamera(scene(i), fps=5.0) for i in range(cameras)]
        self.receiver = WebhookReceiver()
        self.media = tmp / "shared-media"
        self.config = tmp / "site.yaml"
        cams = "".join(f"  - id: cam{i + 1}\n    source: {c.url}\n" for i, c in enumerate(self.cameras))
        self.config.write_text(
            "detector:\n  imgsz: 320\n"
            f"cameras:\n{cams}"
            f"alerts:\n  - kind: webhook\n    url: {self.receiver.url}\n"
            f"storage:\n  postgresql: '{pg_url}'\n  sqlite: {tmp / 'local' / 'state.db'}\n  media: {self.media}\n"
            "health:\n  offline:\n    min_s: 2\n"
        )
        self.nodes: dict[str, Node] = {}

    def node(self, name: str, *, own_config: bool = True) -> Node:
        """A node with its own copy of the config and its own local state folder (as on its own machine),
        or, without ``own_config``, on the site's one config file (several nodes on one machine)."""
        if not own_config:
            self.nodes[name] = node = Node(name, self.config, self.tmp)
            return node
        own = self.tmp / f"{name}.yaml"
        if not own.exists():
            local = str(self.tmp / "local" / "state.db")
            own.write_text(self.config.read_text().replace(local, str(self.tmp / f"local-{name}" / "state.db")))
        self.nodes[name] = node = Node(name, own, self.tmp)
        return node

    def close(self) -> None:
        for node in self.nodes.values():
            node.stop()
        for camera in self.cameras:
            camera.close()
        self.receiver.stop()


@pytest.fixture
def site(tmp_path: Path, postgres_url: str) -> Iterator[Site]:
    s = Site(tmp_path, postgres_url)
    try:
        yield s
    finally:
        s.close()
