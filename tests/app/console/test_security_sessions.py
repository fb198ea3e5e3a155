"""Open streams end with their session, over a real uvicorn and real HTTP clients: a user removed by the
``users remove`` command (another process), demoted, logged out, or whose password changed elsewhere
stops receiving MJPEG frames and server-sent events within 5 s."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

CLOSE_WITHIN_S = 5.0


class Drain(threading.Thread):
    """Reads a streamed response to its end on a thread; records when the last bytes came and when it ended."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(daemon=True)
        self.response = response
        self.chunks = 0
        self.last_chunk = 0.0
        self.ended: float | None = None

    def run(self) -> None:
        try:
            for _ in self.response.iter_raw():
                self.chunks += 1
                self.last_chunk = time.monotonic()
        except Exception:  # noqa: BLE001 - the connection closed by the server or by the test
            pass
        self.ended = time.monotonic()


def _open_streams(client: httpx.Client) -> tuple[Drain, Drain]:
    drains = []
    for path in ("/api/v1/cameras/cam1/live.mjpeg", "/api/v1/events/stream"):
        response = client.send(client.build_request("GET", path), stream=True)
        assert response.status_code == 200, path
        drain = Drain(response)
        drain.start()
        drains.append(drain)
    deadline = time.monotonic() + 15
    while drains[0].chunks < 2:  # frames flow
        assert time.monotonic() < deadline, "no MJPEG frame came"
        time.sleep(0.05)
    return drains[0], drains[1]


def _assert_closed(drains: tuple[Drain, Drain], since: float) -> None:
    for drain, what in zip(drains, ("MJPEG", "event stream"), strict=True):
        drain.join(CLOSE_WITHIN_S + 1)
        assert drain.ended is not None, f"the {what} was still open {CLOSE_WITHIN_S + 1:.0f} s after the session ended"
        assert drain.ended - since < CLOSE_WITHIN_S, f"the {what} took {drain.ended - since:.1f} s to close"
        drain.response.close()


def _cli_remove(users_db: Path, name: str) -> None:
    src = str(Path(__file__).parents[3] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "users", "remove", name, "--users-db", str(users_db)],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )


def test_a_removed_users_mjpeg_and_event_streams_close_within_5s(live_server):
    """Target 3: the CLI (another process) removes the user; both streams end within 5 s of its exit."""
    c = live_server.console
    c.users.add_user("rita", "operator", "rita-pass-123")
    token = c.users.create_session("rita")[0]
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        drains = _open_streams(client)
        _cli_remove(c.users.path, "rita")
        removed = time.monotonic()
        _assert_closed(drains, removed)
        assert client.get("/api/v1/cameras/cam1/live.mjpeg").status_code == 401


def _demote(c, client, name):
    c.users.set_role(name, "viewer")


def _logout(c, client, name):
    assert client.post("/api/v1/auth/logout").status_code == 204


def _password_changed_elsewhere(c, client, name):
    other = c.users.create_session(name)[0]
    r = client.post(
        "/api/v1/auth/password",
        json={"current": "rita-pass-123", "new": "rita-pass-456"},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert r.status_code == 204


@pytest.mark.parametrize("end", [_demote, _logout, _password_changed_elsewhere], ids=["demoted", "logout", "password"])
def test_streams_end_with_the_session(live_server, end: Callable[..., None]):
    c = live_server.console
    c.users.add_user("rita", "operator", "rita-pass-123")
    token = c.users.create_session("rita")[0]
    with httpx.Client(base_url=live_server.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        drains = _open_streams(client)
        end(c, client, "rita")
        _assert_closed(drains, time.monotonic())


def test_a_viewers_stream_outlives_an_unrelated_change(live_server):
    """The re-check is no blanket timeout: a viewer's streams keep running while another user is removed."""
    c = live_server.console
    c.users.add_user("sam", "viewer", "sam-pass-1234")
    with httpx.Client(base_url=live_server.url, headers=c.bearer("vera"), timeout=30) as client:
        mjpeg, sse = _open_streams(client)
        c.users.remove_user("sam")
        c.users.set_role("otto", "viewer")
        time.sleep(2.5)  # two re-reads of the store at least
        assert mjpeg.ended is None and sse.ended is None
        assert time.monotonic() - mjpeg.last_chunk < 1.5  # frames still flow
        mjpeg.response.close()
        sse.response.close()
