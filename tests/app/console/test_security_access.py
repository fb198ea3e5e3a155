"""Access: login limits per (user, address) and per address with a growing delay (no lock-out from elsewhere),
X-Forwarded-For only from trusted proxies, failed logins audited without the password, private data files,
media never cached.

The HTTP tests run a real uvicorn configured as `campusguard serve` configures it (`uvicorn_options`), with
clients bound to different loopback addresses (127.0.0.1, 127.0.0.2); the file-mode test runs
`campusguard serve` itself in a subprocess (its detector is `BlobDetector`, everything else the product's).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fakes_console import console_yaml, free_port, make_console, wait_until_serving

from campusguard.app.console.identity.auth import LoginLimiter, address_key, parse_trusted_proxies, resolve_client
from campusguard.app.console.identity.users import UserStore
from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.infra.private import private_umask
from campusguard.cli.main import main
from campusguard.cli.serve import uvicorn_options
from campusguard.errors import InvalidInputError

SRC = str(Path(__file__).parents[3] / "src")
TESTS_APP = str(Path(__file__).parents[1])
TRIED_PASSWORD = "Tried-Secret-Password-7731"


# the limiter ------------------------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_delay_grows_after_the_free_failures_and_is_capped():
    clock = Clock()
    limiter = LoginLimiter(free_per_pair=3, free_per_address=100, base_delay_s=2.0, max_delay_s=30.0, clock=clock)
    delays = []
    for _ in range(8):
        assert limiter.retry_after("ada", "10.0.0.1") is None  # each try waits for the previous delay
        delays.append(limiter.failed("ada", "10.0.0.1"))
        wait = limiter.retry_after("ada", "10.0.0.1")
        assert wait == (delays[-1] if delays[-1] is not None else None)
        clock.now += wait or 0.0
    assert delays == [None, None, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_pair_limit_blocks_only_that_name_at_that_address():
    clock = Clock()
    limiter = LoginLimiter(free_per_pair=5, free_per_address=20, clock=clock)
    for _ in range(5):
        limiter.failed("ada", "10.0.0.1")
    assert limiter.retry_after("ada", "10.0.0.1") == 1.0
    assert limiter.retry_after("ada", "10.0.0.2") is None  # the real admin elsewhere
    assert limiter.retry_after("otto", "10.0.0.1") is None  # another user at the attacker's address
    limiter.succeeded("ada", "10.0.0.2")  # a login elsewhere clears nothing of the attacker's
    assert limiter.retry_after("ada", "10.0.0.1") == 1.0


def test_address_limit_blocks_every_name_from_that_address_and_survives_a_success():
    clock = Clock()
    limiter = LoginLimiter(free_per_pair=5, free_per_address=20, clock=clock)
    for i in range(20):
        limiter.failed(f"user{i}", "10.0.0.1")
    assert limiter.retry_after("vera", "10.0.0.1") == 1.0
    assert limiter.retry_after("vera", "10.0.0.2") is None
    limiter.succeeded("vera", "10.0.0.1")  # one good account does not reset the address's count
    clock.now += 1.0
    assert limiter.failed("user99", "10.0.0.1") == 2.0


def test_old_keys_are_forgotten_and_memory_is_bounded():
    clock = Clock()
    limiter = LoginLimiter(max_delay_s=60.0, forget_after_s=600.0, account_window_s=300.0, max_keys=100, clock=clock)
    for _ in range(6):
        limiter.failed("ada", "10.0.0.1")
    assert limiter.retry_after("ada", "10.0.0.1") is not None
    clock.now += 601
    limiter.failed("someone", "10.0.0.9")  # any failure sweeps what has expired
    assert len(limiter) == 3 and limiter.retry_after("ada", "10.0.0.1") is None  # its pair, address, account
    for i in range(5000):  # a flood of made-up names from many addresses
        limiter.failed(f"n{i}", f"10.1.{i // 250}.{i % 250}")
    assert len(limiter) <= 100


def test_bad_limiter_settings_are_refused():
    with pytest.raises(ValueError):
        LoginLimiter(free_per_pair=0)
    with pytest.raises(ValueError):
        LoginLimiter(max_delay_s=100.0, forget_after_s=10.0)


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:bbbb::9", "2001:db8:1:2::/64"),  # one host's /64 is one address
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
    ],
)
def test_address_key(address, key):
    assert address_key(address) == key


# X-Forwarded-For --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "client"),
    [
        ("127.0.0.1", ["203.0.113.9"], [], "127.0.0.1"),  # by default no proxy is trusted, not even loopback
        ("127.0.0.1", ["203.0.113.9"], ["127.0.0.1"], "203.0.113.9"),
        ("127.0.0.2", ["203.0.113.9"], ["127.0.0.1"], "127.0.0.2"),  # the header from an untrusted peer
        ("127.0.0.1", ["1.2.3.4, 203.0.113.9, 10.0.0.7"], ["127.0.0.1", "10.0.0.0/8"], "203.0.113.9"),
        ("127.0.0.1", ["1.2.3.4", "203.0.113.9"], ["127.0.0.1"], "203.0.113.9"),  # two header lines, in order
        ("127.0.0.1", ["203.0.113.9, not-an-address"], ["127.0.0.1"], "127.0.0.1"),  # a bad hop ends the walk
        ("127.0.0.1", ["10.0.0.5, 10.0.0.6"], ["127.0.0.1", "10.0.0.0/8"], "10.0.0.5"),  # all trusted: left-most
        ("127.0.0.1", ["[2001:db8::1]"], ["127.0.0.1"], "2001:db8::1"),
        ("127.0.0.1", [], ["127.0.0.1"], "127.0.0.1"),
        ("::ffff:127.0.0.1", ["203.0.113.9"], ["127.0.0.1"], "203.0.113.9"),
        ("::1", ["203.0.113.9"], ["127.0.0.1"], "::1"),
    ],
)
def test_resolve_client(peer, forwarded, trusted, client):
    assert resolve_client(peer, forwarded, parse_trusted_proxies(trusted)) == client


def test_trusted_proxy_values():
    nets = parse_trusted_proxies(["127.0.0.1,10.0.0.0/8", "::1"])
    assert [str(n) for n in nets] == ["127.0.0.1/32", "10.0.0.0/8", "::1/128"]
    assert parse_trusted_proxies("127.0.0.1") == parse_trusted_proxies(["127.0.0.1"])
    with pytest.raises(InvalidInputError, match="--trusted-proxy 'proxy.local' is not an IP address"):
        parse_trusted_proxies(["127.0.0.1,proxy.local"])


def test_serve_with_a_bad_trusted_proxy_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["serve", str(tmp_path / "watch.yaml"), "--port", str(free_port()), "--trusted-proxy", "proxy.local"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --trusted-proxy 'proxy.local'") and len(err.splitlines()) == 1
    assert not (tmp_path / "campusguard-users.db").exists()


# a real server ----------------------------------------------------------------------------------------------
@contextlib.contextmanager
def served(console) -> Iterator[str]:
    """``console.app`` on a free loopback port, served by uvicorn as `campusguard serve` serves it."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(console.app, host="127.0.0.1", port=port, **uvicorn_options()))
    thread = threading.Thread(target=server.run, name="uvicorn-access", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


@contextlib.contextmanager
def console_served(console_video, tmp_path, **app_kw) -> Iterator[tuple]:
    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(console_video, tmp_path))
    c = make_console(config, tmp_path, **app_kw)
    try:
        with served(c) as url:
            yield c, url
    finally:
        c.runtime.stop()
        c.users.close()


def client_at(url: str, address: str) -> httpx.Client:
    """A client whose connections come from ``address`` (any 127.x.y.z works on Linux)."""
    return httpx.Client(base_url=url, transport=httpx.HTTPTransport(local_address=address), timeout=10)


def login(client: httpx.Client, name: str, password: str, forwarded: str | None = None) -> httpx.Response:
    headers = {"X-Forwarded-For": forwarded} if forwarded else {}
    return client.post("/api/v1/auth/login", json={"username": name, "password": password}, headers=headers)


def audited(console, action: str) -> list:
    return [e for e in reversed(console.users.audit_entries(limit=1000)[0]) if e.action == action]


def test_30_wrong_admin_logins_at_one_address_do_not_lock_the_admin_out_elsewhere(console_video, tmp_path):
    with console_served(console_video, tmp_path) as (c, url), client_at(url, "127.0.0.1") as attacker:
        answers = [login(attacker, "ada", f"guess-{i}") for i in range(30)]
        codes = [r.status_code for r in answers]
        assert codes[:5] == [401] * 5 and codes[-1] == 429, codes
        assert codes.count(401) <= 8  # a slow machine may let a try through after a delay, never many
        assert 1 <= int(answers[-1].headers["retry-after"]) <= 900
        assert login(attacker, "ada", "admin-pass-1").status_code == 429  # the right password, there: still held
        with client_at(url, "127.0.0.2") as admin:
            ok = login(admin, "ada", "admin-pass-1")
            assert ok.status_code == 200, ok.text  # right after, from another address
            assert (
                admin.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {ok.json()['token']}"}).json()["name"]
                == "ada"
            )
        assert login(attacker, "otto", "operator-pass-1").status_code == 200  # others at that address: not locked
        failed = audited(c, "login.failed")
        assert len(failed) == codes.count(401)
        assert {(e.target, e.details["address"], e.details["reason"]) for e in failed} == {
            ("ada", "127.0.0.1", "wrong password")
        }
        assert [e.details["address"] for e in audited(c, "login")] == ["127.0.0.2", "127.0.0.1"]


def test_rotating_forwarded_for_without_a_trusted_proxy_reaches_the_limit(console_video, tmp_path):
    with console_served(console_video, tmp_path) as (c, url), client_at(url, "127.0.0.1") as attacker:
        # a new name and a new forged address each time: only the per-address limit can catch it
        codes = [login(attacker, f"user{i}", "wrong-password", f"203.0.113.{i}").status_code for i in range(30)]
        assert codes[:20] == [401] * 20 and codes[-1] == 429, codes
        assert codes.count(401) <= 23
        same_name = [login(attacker, "ada", "wrong", f"198.51.100.{i}").status_code for i in range(3)]
        assert same_name[-1] == 429
        assert {e.details["address"] for e in audited(c, "login.failed")} == {"127.0.0.1"}  # never the forged one


def test_trusted_proxy_forwarded_address_is_limited_and_audited(console_video, tmp_path):
    with (
        console_served(console_video, tmp_path, trusted_proxies=["127.0.0.1"]) as (c, url),
        client_at(url, "127.0.0.1") as proxy,
    ):
        codes = [login(proxy, "ada", f"guess-{i}", "198.51.100.7").status_code for i in range(8)]
        assert codes[:5] == [401] * 5 and codes[-1] == 429, codes
        # another client behind the same proxy is not held back
        assert login(proxy, "ada", "admin-pass-1", "198.51.100.8").status_code == 200
        # a client that writes its own X-Forwarded-For: the proxy appends the real address, the right-most counts
        proxy.cookies.clear()  # another browser: without the device cookie the login above set
        assert login(proxy, "ada", "admin-pass-1", "198.51.100.8, 198.51.100.7").status_code == 429
        assert login(proxy, "otto", "operator-pass-1", "198.51.100.7, 198.51.100.9").status_code == 200
        with client_at(url, "127.0.0.2") as direct:  # not a trusted proxy: its header is ignored
            assert login(direct, "vera", "wrong-password", "198.51.100.8").status_code == 401
        assert {e.details["address"] for e in audited(c, "login.failed")} == {"198.51.100.7", "127.0.0.2"}
        assert [e.details["address"] for e in audited(c, "login")] == ["198.51.100.8", "198.51.100.9"]


def test_failed_logins_are_audited_without_the_password(console_video, tmp_path):
    with console_served(console_video, tmp_path) as (c, url), client_at(url, "127.0.0.1") as client:
        assert login(client, "ada", TRIED_PASSWORD).status_code == 401
        assert login(client, "mallory", TRIED_PASSWORD).status_code == 401
        assert login(client, "not a name!", TRIED_PASSWORD).status_code == 401
        token = login(client, "otto", "operator-pass-1").json()["token"]
        wrong = client.post(
            "/api/v1/auth/password",
            json={"current": TRIED_PASSWORD, "new": "a-new-password-1"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert wrong.status_code == 403
        failed = [(e.user, e.target, e.details["reason"], e.details["address"]) for e in audited(c, "login.failed")]
        assert failed == [
            (None, "ada", "wrong password", "127.0.0.1"),
            (None, "mallory", "unknown user", "127.0.0.1"),
            (None, "(not a user name)", "unknown user", "127.0.0.1"),
        ]
        [changed] = audited(c, "password.failed")
        assert (changed.target, changed.details["reason"]) == ("otto", "wrong present password")
        c.users.close()  # checkpointed: every byte is in the file now
        stored = b"".join(p.read_bytes() for p in tmp_path.glob("users.db*"))
        assert b"ada" in stored and TRIED_PASSWORD.encode() not in stored


# private files ----------------------------------------------------------------------------------------------
def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def wide_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_stores_are_private_even_as_a_library_under_a_wide_umask(tmp_path, wide_umask, make_event):
    from fakes_console import CHEAP_HASHER

    with UserStore(tmp_path / "console" / "users.db", password_hasher=CHEAP_HASHER) as users:
        users.add_user("ada", "admin", "admin-pass-1")
        users.audit("ada", "login", "ada")
        assert {p.name: mode(p) for p in (tmp_path / "console").iterdir()} == {
            "users.db": 0o600,
            "users.db-wal": 0o600,
            "users.db-shm": 0o600,
        }
    with SQLiteEventStore(tmp_path / "events" / "events.db") as store:
        store.add(make_event())
        assert all(mode(p) == 0o600 for p in (tmp_path / "events").iterdir())
    assert mode(tmp_path / "console") == mode(tmp_path / "events") == 0o700


def test_wide_existing_files_are_tightened_on_open_and_logged_once(tmp_path, caplog):
    from fakes_console import CHEAP_HASHER

    path = tmp_path / "users.db"
    UserStore(path, password_hasher=CHEAP_HASHER).close()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="campusguard.app.infra.private"):
        for _ in range(2):
            UserStore(path, password_hasher=CHEAP_HASHER).close()
            assert mode(path) == 0o600
            path.chmod(0o640)
    lines = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(lines) == 1 and "readable by others (mode 0644)" in lines[0]


def test_private_umask_is_restored():
    previous = os.umask(0o022)
    try:
        with private_umask():
            assert os.umask(0o077) == 0o077
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(previous)


SERVE_WITH_BLOBS = f"""
import sys
sys.path.insert(0, {TESTS_APP!r})
from fakes_watch import BlobDetector
import campusguard.app.service as service
service.default_detector_factory = lambda loaded: (lambda *a: BlobDetector())
from campusguard.cli.main import main
raise SystemExit(main(sys.argv[1:]))
"""


def wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.3)


def test_campusguard_serve_files_are_private_and_media_not_cached(console_video, tmp_path):
    """`campusguard serve --trusted-proxy 127.0.0.1` under a wide umask: every file it writes is 0600, every
    folder 0700; incident and camera media are sent ``no-store``; the proxy's forwarded address is audited."""
    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(console_video, tmp_path, live=True))
    db = tmp_path / "users.db"
    env = {**os.environ, "PYTHONPATH": SRC}
    add = ["users", "add", "ada", "--role", "admin", "--password-stdin", "--users-db", str(db)]
    r = subprocess.run(
        [sys.executable, "-c", SERVE_WITH_BLOBS, *add],
        input="admin-pass-1\n",
        text=True,
        env=env,
        capture_output=True,
        umask=0o022,
    )
    assert r.returncode == 0, r.stderr
    port = free_port()
    args = ["serve", str(config), "--port", str(port), "--users-db", str(db), "--trusted-proxy", "127.0.0.1"]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_WITH_BLOBS, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        umask=0o022,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, base)
        forwarded = {"X-Forwarded-For": "198.51.100.7"}
        bad = httpx.post(f"{base}/api/v1/auth/login", json={"username": "ada", "password": "nope"}, headers=forwarded)
        assert bad.status_code == 401
        ok = httpx.post(f"{base}/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        h = {"Authorization": f"Bearer {ok.json()['token']}"}

        def clip_of_an_incident() -> bool:
            items = httpx.get(f"{base}/api/v1/events", headers=h).json()["items"]
            return any(e["clip_url"] and e["snapshot_url"] for e in items)

        wait_for(clip_of_an_incident, 90, "no incident with a snapshot and a clip")
        event = next(e for e in httpx.get(f"{base}/api/v1/events", headers=h).json()["items"] if e["clip_url"])
        for path in (event["snapshot_url"], event["clip_url"], "/api/v1/cameras/cam1/snapshot.jpg"):
            media = httpx.get(f"{base}{path}", headers=h)
            assert media.status_code == 200 and media.headers["cache-control"] == "no-store", path
        with httpx.stream("GET", f"{base}/api/v1/cameras/cam1/live.mjpeg", headers=h) as live:
            assert live.status_code == 200 and live.headers["cache-control"] == "no-store"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "X-Forwarded-For is believed from 127.0.0.1/32 only" in out
    written = {p.relative_to(tmp_path): p for p in tmp_path.rglob("*") if p != config}
    kinds = {p.parts[0] for p in written}
    assert {"users.db", "events.db", "media", "snaps", "video", "events.jsonl"} <= kinds, sorted(kinds)
    assert any(p.suffix == ".mp4" and p.parts[0] == "media" for p in written)  # a clip
    assert any(p.suffix == ".jpg" for p in written) and any(p.parts[0] == "video" for p in written)
    wrong = {str(p): oct(mode(f)) for p, f in written.items() if mode(f) != (0o700 if f.is_dir() else 0o600)}
    assert not wrong, wrong
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT action, details FROM audit WHERE action LIKE 'login%' ORDER BY id").fetchall()
    assert [a for a, _ in rows] == ["login.failed", "login"]
    assert '"address": "198.51.100.7"' in rows[0][1] and '"address": "127.0.0.1"' in rows[1][1]
