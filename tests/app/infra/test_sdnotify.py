"""sd_notify over a real unix datagram socket: READY, rate-limited WATCHDOG, STOPPING; never raises."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from campusguard.app.infra.sdnotify import SystemdNotifier


@pytest.fixture
def listener(tmp_path: Path):  # type: ignore[no-untyped-def]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = tmp_path / "notify.sock"
    sock.bind(str(path))
    sock.settimeout(1.0)
    yield path, sock
    sock.close()


def test_ready_watchdog_and_stopping_reach_the_socket(listener) -> None:  # type: ignore[no-untyped-def]
    path, sock = listener
    notifier = SystemdNotifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "2000000"})
    assert notifier.enabled and notifier.watchdog_interval_s == 1.0  # half of WatchdogSec
    assert notifier.ready("watching 2 cameras")
    assert sock.recv(4096) == b"READY=1\nSTATUS=watching 2 cameras"
    assert notifier.watchdog(now=100.0)
    assert not notifier.watchdog(now=100.5)  # not due yet: nothing sent
    assert notifier.watchdog(now=101.0)
    assert [sock.recv(4096), sock.recv(4096)] == [b"WATCHDOG=1", b"WATCHDOG=1"]
    assert notifier.stopping()
    assert sock.recv(4096) == b"STOPPING=1"


def test_an_abstract_socket_name_is_used_as_systemd_gives_it() -> None:
    name = f"campusguard-test-{os.getpid()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + name)
    sock.settimeout(1.0)
    try:
        assert SystemdNotifier({"NOTIFY_SOCKET": "@" + name}).ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_without_systemd_or_its_socket_nothing_happens_and_nothing_raises(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    quiet = SystemdNotifier({})
    assert not quiet.enabled and not quiet.ready() and not quiet.watchdog()
    no_watchdog = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "x.sock")})
    assert no_watchdog.watchdog_interval_s is None and not no_watchdog.watchdog()
    other_pid = SystemdNotifier({"NOTIFY_SOCKET": "/x", "WATCHDOG_USEC": "1000", "WATCHDOG_PID": "1"})
    assert other_pid.watchdog_interval_s is None  # the watchdog is another process's
    gone = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens.sock")})
    assert not gone.ready() and not gone.stopping()
    assert len([r for r in caplog.records if "cannot notify systemd" in r.getMessage()]) == 1  # one line
