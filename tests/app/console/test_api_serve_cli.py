"""`campusguard users ...` and `campusguard serve` as a user runs them (real processes, a real port)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fakes_console import console_yaml, free_port, wait_until_serving

from campusguard.cli.main import main
from campusguard.cli.serve import check_bind, is_loopback
from campusguard.errors import InvalidInputError

SRC = str(Path(__file__).parents[3] / "src")


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_users_commands(tmp_path):
    db = str(tmp_path / "users.db")
    r = cli("users", "add", "ada", "--role", "admin", "--password-stdin", "--users-db", db, stdin="admin-pass-1\n")
    assert r.returncode == 0 and "added admin 'ada'" in r.stdout
    r = cli("users", "add", "ada", "--role", "admin", "--password-stdin", "--users-db", db, stdin="admin-pass-1\n")
    assert r.returncode == 2 and r.stderr.strip() == f"error: user 'ada' already exists in {db}"
    r = cli("users", "add", "bob", "--role", "viewer", "--password-stdin", "--users-db", db, stdin="short\n")
    assert r.returncode == 2 and "8 to 1024" in r.stderr and "Traceback" not in r.stderr
    r = cli("users", "add", "bob", "--role", "emperor", "--password-stdin", "--users-db", db, stdin="x" * 10)
    assert r.returncode == 2 and "--role must be one of viewer, operator, admin" in r.stderr
    r = cli("users", "add", "bob", "--role", "viewer", "--password", "x", "--users-db", db)
    assert r.returncode != 0  # there is no way to put a password in argv
    r = cli("users", "token", "ada", "--users-db", db)
    assert r.returncode == 0 and r.stdout.strip().startswith("cga_") and "not shown again" in r.stderr
    token = r.stdout.strip()
    r = cli("users", "passwd", "ada", "--password-stdin", "--users-db", db, stdin="admin-pass-2\n")
    assert r.returncode == 0 and "password of 'ada' changed" in r.stdout
    assert cli("users", "passwd", "ghost", "--password-stdin", "--users-db", db, stdin="x" * 10).returncode == 2
    r = cli("users", "list", "--users-db", db)
    assert "ada" in r.stdout and "admin" in r.stdout
    assert (
        cli("users", "remove", "ada", "--users-db", db).stderr.strip()
        == "error: user 'ada' is the last admin and cannot be removed; add another admin first"
    )
    assert cli("users", "remove", "ghost", "--users-db", db).returncode == 2
    from campusguard.app.console.identity.users import UserStore

    with UserStore(db) as users:
        assert users.resolve(token).user.name == "ada"
        assert users.verify_password("ada", "admin-pass-2") is not None
        assert [e.action for e in users.audit_entries()[0]] == ["user.update", "token.create", "user.add"]


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("0.0.0.0", False), ("10.1.2.3", False)],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_remote_bind_needs_allow_remote_and_busy_ports_are_reported(capsys):
    with pytest.raises(InvalidInputError, match="--allow-remote"):
        check_bind("0.0.0.0", free_port(), allow_remote=False)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(InvalidInputError, match=f"cannot listen on 127.0.0.1:{port}"):
            check_bind("127.0.0.1", port, allow_remote=False)
    assert main(["serve", "nope.yaml", "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err


def test_serve_with_a_bad_config_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["serve", str(tmp_path / "missing.yaml"), "--port", str(free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "missing.yaml" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "campusguard-users.db").exists()  # nothing was created


@pytest.mark.slow
def test_serve_runs_the_pipeline_and_the_console(console_video, tmp_path):
    """`campusguard serve` with the bundled model on the scene video: health, login, cameras, Ctrl-C."""
    config = tmp_path / "watch.yaml"
    text = console_yaml(console_video, tmp_path, live=True).replace("detector:\n", "detector:\n  imgsz: 320\n")
    text = text.replace("classes: [person]", "classes: [0]").replace("classes: [car]", "classes: [2]")
    config.write_text(text)
    db = str(tmp_path / "users.db")
    assert (
        cli(
            "users", "add", "ada", "--role", "admin", "--password-stdin", "--users-db", db, stdin="admin-pass-1\n"
        ).returncode
        == 0
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "campusguard.cli.main", "serve", str(config), "--port", str(port), "--users-db", db],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, base)
        assert httpx.get(f"{base}/api/v1/cameras").status_code == 401
        login = httpx.post(f"{base}/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        assert login.status_code == 200
        h = {"Authorization": f"Bearer {login.json()['token']}"}
        deadline = time.monotonic() + 60
        while httpx.get(f"{base}/readyz").status_code != 200:
            assert time.monotonic() < deadline, "the camera never became ready"
            time.sleep(0.3)
        cams = httpx.get(f"{base}/api/v1/cameras", headers=h).json()
        assert cams[0]["name"] == "cam1" and cams[0]["state"] == "live"
        assert httpx.get(f"{base}/metrics", headers=h).text.count("campusguard_frames_processed_total{") == 1
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"CampusGuard console on http://127.0.0.1:{port}/" in out


def test_demo_serve_config_and_first_admin(tmp_path):
    """`demo --serve`: the demo video looped in real time, and a first admin with a printed one-time password."""
    from campusguard.app.config import load_config
    from campusguard.app.console.identity.users import UserStore
    from campusguard.app.demo import demo_console_config
    from campusguard.cli.serve import demo_admin

    config = demo_console_config(seed=0, out_dir=tmp_path, seconds=5, model=None)
    cam = load_config(config).config.cameras[0]
    assert cam.loop and cam.realtime and Path(cam.source).is_file()
    note = demo_admin(tmp_path / "users.db")
    password = note.split("one-time password ")[1].split()[0]
    with UserStore(tmp_path / "users.db") as users:
        assert users.verify_password("admin", password).role == "admin"
    again = demo_admin(tmp_path / "users.db")  # a second run keeps it, and says how to reset the password
    assert "existing admin" in again and f"campusguard users passwd admin --users-db {tmp_path / 'users.db'}" in again


def test_allow_remote_prints_how_to_put_tls_in_front(tmp_path, capsys):
    assert (
        main(
            ["serve", str(tmp_path / "missing.yaml"), "--host", "0.0.0.0", "--allow-remote", "--port", str(free_port())]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "warning: listening on 0.0.0.0" in err and "TLS reverse proxy" in err and "docs/console.md" in err
