"""Several consoles (nodes) over one PostgreSQL identity: what one node does, every other one sees.

Two `PostgresUserStore` instances over the same fresh schema stand for two nodes; then two whole
console apps (two runtimes of one config whose storage is that PostgreSQL), and the ``users``
command with ``--config``.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from fakes_console import CHEAP_HASHER, console_yaml

from campusguard.app.console.identity.auth import LoginLimiter
from campusguard.app.console.identity.oidc import Identity, ProviderGrant, TransactionSeal
from campusguard.app.console.identity.oidc_sessions import ProviderSessions, SessionEnded
from campusguard.app.console.identity.provider_grants import TrackedGrant
from campusguard.app.console.identity.users import IdentityUnavailableError, hash_token
from campusguard.errors import InvalidInputError

psycopg = pytest.importorskip("psycopg")

from campusguard.app.console.identity.postgres import (  # noqa: E402
    SCHEMA_VERSION,
    VERSION_TABLE,
    PostgresUserStore,
)
from campusguard.app.events.postgres import RetryPolicy  # noqa: E402

SRC = str(Path(__file__).parents[3] / "src")


@pytest.fixture
def nodes(postgres_url: str) -> Iterator[tuple[PostgresUserStore, PostgresUserStore]]:  # noqa: F811
    a = PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)
    b = PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)
    a.add_user("ada", "admin", "admin-pass-1")
    a.add_user("otto", "operator", "operator-pass-1")
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_a_session_made_on_one_node_resolves_on_the_other_and_revoking_it_there_ends_it(nodes) -> None:
    a, b = nodes
    token, csrf = a.create_session("otto")
    on_b = b.resolve(token)
    assert on_b is not None and on_b.user.name == "otto" and on_b.csrf == csrf
    b.set_role("otto", "viewer")
    on_a = a.credential(on_b.token_hash)
    assert on_a is not None and on_a.user.role == "viewer"
    assert b.revoke(on_b.token_hash)
    assert a.resolve(token) is None and a.credential(on_b.token_hash) is None
    api = b.create_api_token("ada", label="nvr")
    assert a.resolve(api) is not None
    a.remove_user("otto")
    assert b.get_user("otto") is None


@pytest.mark.parametrize("round_", range(3))  # a race: three tries to catch a missing lock
def test_removing_the_last_two_admins_from_two_nodes_at_once_keeps_one(nodes, round_: int) -> None:
    a, b = nodes
    a.set_role("otto", "admin")
    start = threading.Barrier(2)
    outcomes: dict[str, str] = {}

    def remove(store: PostgresUserStore, name: str) -> None:
        start.wait(5)
        try:
            store.remove_user(name)
            outcomes[name] = "removed"
        except InvalidInputError:
            outcomes[name] = "refused"

    threads = [threading.Thread(target=remove, args=(a, "ada")), threading.Thread(target=remove, args=(b, "otto"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(outcomes.values()) == ["refused", "removed"]
    assert [u.role for u in a.list_users()] == ["admin"]


def test_failed_logins_on_one_node_hold_back_the_next_guess_on_another(nodes) -> None:
    a, b = nodes
    limits = {"free_per_pair": 3, "free_per_address": 50, "free_per_account": 50, "base_delay_s": 30.0}
    on_a = LoginLimiter(failures=a.login_failures(), **limits)
    on_b = LoginLimiter(failures=b.login_failures(), **limits)
    assert on_a.failed("ada", "203.0.113.7") is None
    assert on_b.failed("ada", "203.0.113.7") is None  # the second free failure, counted on the other node
    assert on_a.retry_after("ada", "203.0.113.7") is None
    assert on_b.failed("ada", "203.0.113.7") == 30.0  # the third: the delay starts, whichever node
    wait = on_a.retry_after("ada", "203.0.113.7")
    assert wait is not None and 25 < wait <= 30
    assert on_b.retry_after("ada", "198.51.100.1") is None  # another address: not held back
    on_a.succeeded("ada", "203.0.113.7")
    assert on_b.retry_after("ada", "203.0.113.7") is None
    assert len(on_b) == 2  # the address and the account keep their counts


def test_the_shared_failure_table_forgets_old_keys_and_stays_bounded(nodes) -> None:
    a, _ = nodes
    table = a.login_failures()
    limits = {"free_per_pair": 2, "free_per_address": 100, "free_per_account": 100}
    limiter = LoginLimiter(failures=table, max_keys=4, **limits)
    limiter.failed("ada", "203.0.113.7")
    assert limiter.failed("ada", "203.0.113.7") is not None  # the pair waits now: kept before idle keys
    for i in range(3):
        limiter.failed(f"user{i}", f"192.0.2.{i}")
        assert len(table) == 4
    assert limiter.retry_after("ada", "203.0.113.7") is not None
    later = LoginLimiter(failures=table, clock=lambda: time.time() + 7200, **limits)
    later.failed("bob", "192.0.2.99")
    assert len(table) == 3  # every key without a failure for an hour is forgotten
    assert later.retry_after("ada", "203.0.113.7") is None


def test_a_campus_sign_in_is_checked_by_one_node_at_a_time_and_ends_with_its_session(nodes) -> None:
    a, b = nodes
    token, _ = a.create_session("otto")
    digest = b.resolve(token).token_hash  # type: ignore[union-attr]
    identity = Identity("https://idp", "sub-1", "otto", "operator", ("ops",), ProviderGrant("at", "rt", 123.0))
    a.provider_grants().remember(digest, TrackedGrant(identity, 100.0, time.time() + 600), now=time.time())
    seen = b.provider_grants().get(digest)
    assert seen is not None and seen.identity == identity and seen.identity.grant.refresh_token == "rt"
    assert b.provider_grants().claim(digest, 100.0, 160.0) is True
    assert a.provider_grants().claim(digest, 100.0, 160.0) is False  # node B checks it now
    b.provider_grants().update(digest, identity, 1000.0)
    assert a.provider_grants().get(digest).next_check == 1000.0  # type: ignore[union-attr]
    a.revoke(digest)
    assert b.provider_grants().get(digest) is None


def test_a_campus_session_made_on_one_node_is_rechecked_once_on_another(nodes) -> None:
    a, b = nodes
    a.sign_in_external("https://idp", "sub-1", "alice", "viewer")
    token, _ = a.create_session("alice")
    now = [1000.0]
    asked: list[str] = []

    class Provider:  # the one method ProviderSessions asks of OidcSignIn
        def recheck(self, identity: Identity) -> Identity:
            asked.append(identity.subject)
            return replace(identity, role="operator")

    def node(store: PostgresUserStore) -> ProviderSessions:
        return ProviderSessions(
            Provider(),  # type: ignore[arg-type]
            store,
            recheck_s=60,
            grants=store.provider_grants(),
            clock=lambda: now[0],
        )

    on_a, on_b = node(a), node(b)
    on_a.remember(hash_token(token), Identity("https://idp", "sub-1", "alice", "viewer", ()), ttl_s=3600)
    assert on_b.check(b.resolve(token)).role == "viewer" and asked == []  # type: ignore[arg-type]
    now[0] += 61
    assert on_b.check(b.resolve(token)).role == "operator" and asked == ["sub-1"]  # type: ignore[arg-type]
    assert on_a.check(a.resolve(token)).role == "operator" and asked == ["sub-1"]  # type: ignore[arg-type]
    alone = ProviderSessions(Provider(), b, recheck_s=60, clock=lambda: now[0])  # type: ignore[arg-type]
    with pytest.raises(SessionEnded, match="before the console restarted"):
        alone.check(b.resolve(token))  # type: ignore[arg-type]


def test_a_sign_in_sealed_on_one_node_opens_on_another(nodes) -> None:
    a, b = nodes
    sealed = TransactionSeal(a.sign_in_seal_key()).seal({"state": "s1"})
    assert TransactionSeal(b.sign_in_seal_key()).open(sealed) == {"state": "s1"}
    assert TransactionSeal().open(sealed) is None


def test_the_shared_keys_are_the_same_on_every_node(nodes) -> None:
    a, b = nodes
    assert a.device_key() == b.device_key() and len(a.device_key()) == 32
    assert a.sign_in_seal_key() == b.sign_in_seal_key() != a.device_key()


def test_a_lost_connection_is_reopened(nodes) -> None:
    a, b = nodes
    token, _ = a.create_session("ada")
    for store in (a, b):
        pid = store._session._conn.info.backend_pid  # type: ignore[union-attr]
        with psycopg.connect(a.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    assert a.resolve(token) is not None  # a read: reconnected and read again
    b.audit("ada", "event.acknowledge", "ev-1")  # a transaction: reconnected before it began
    assert a.audit_entries()[1] == 1


def test_an_unreachable_server_is_one_error(postgres_url: str) -> None:  # noqa: F811
    with pytest.raises(IdentityUnavailableError, match="cannot be reached"):
        PostgresUserStore("postgresql://postgres@127.0.0.1:1/test", retry=RetryPolicy(budget_s=0, connect_timeout_s=2))


def test_nodes_starting_together_migrate_once_beside_the_event_store(postgres_url: str) -> None:  # noqa: F811
    from campusguard.app.events import open_event_store

    events = open_event_store(postgres_url)
    opened: list[PostgresUserStore] = []
    threads = [
        threading.Thread(target=lambda: opened.append(PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(opened) == 3
    with psycopg.connect(postgres_url) as conn:
        versions = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchall()
        assert [v[0] for v in versions] == list(range(1, SCHEMA_VERSION + 1))
        conn.execute(f"INSERT INTO {VERSION_TABLE} (version) VALUES (%s)", (SCHEMA_VERSION + 1,))
    for store in opened:
        store.close()
    events.close()
    with pytest.raises(InvalidInputError, match="newer than this CampusGuard"):
        PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)


def test_a_console_users_table_of_another_application_is_refused(postgres_url: str) -> None:  # noqa: F811
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE console_users (id INTEGER)")
    with pytest.raises(InvalidInputError, match="not created by CampusGuard"):
        PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)


# two consoles ----------------------------------------------------------------------------------
def postgres_config(video: Path, tmp: Path, url: str) -> Path:
    config = tmp / "site.yaml"
    text = console_yaml(video, tmp)
    config.write_text(text.replace("storage:\n", f"storage:\n  postgresql: '{url}'\n", 1))
    return config


@pytest.fixture
def two_consoles(console_video: Path, tmp_path: Path, postgres_url: str) -> Iterator[list[Any]]:  # noqa: F811
    from fakes_watch import BlobDetector

    from campusguard.app.console.identity.store import open_identity_store
    from campusguard.app.console.runtime import ConsoleRuntime
    from campusguard.app.console.server import create_app

    config = postgres_config(console_video, tmp_path, postgres_url)
    apps, closers = [], []
    for node in ("a", "b"):
        runtime = ConsoleRuntime(config, detector_factory=lambda *a: BlobDetector(), out=io.StringIO())
        users = open_identity_store(
            runtime.loaded.config.storage,
            users_db=None,
            default_db=tmp_path / "unused.db",
            password_hasher=CHEAP_HASHER,
        )
        if node == "a":
            users.add_user("ada", "admin", "admin-pass-1")
        apps.append(create_app(runtime, users_db=users))
        closers += [runtime.stop, users.close]
    try:
        yield apps
    finally:
        for close in closers:
            close()


def test_a_login_on_one_console_works_on_the_other(two_consoles: list[Any]) -> None:
    from fastapi.testclient import TestClient

    app_a, app_b = two_consoles
    assert not (Path(app_a.state.console.runtime.loaded.path).parent / "unused.db").exists()
    a, b = TestClient(app_a), TestClient(app_b)
    if True:
        r = a.post("/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        assert r.status_code == 200
        session, csrf, device = r.cookies["cg_session"], r.cookies["cg_csrf"], r.cookies["cg_device"]
        b.cookies.set("cg_session", session)
        me = b.get("/api/v1/auth/me")
        assert me.status_code == 200 and me.json()["name"] == "ada"
        assert app_b.state.console.devices.trusted(device, "ada") is not None  # the device cookie too
        created = b.post(
            "/api/v1/users",
            json={"name": "vera", "role": "viewer", "password": "viewer-pass-1"},
            headers={"X-CSRF-Token": csrf},
        )
        assert created.status_code in (200, 201), created.text
        assert app_a.state.console.users.get_user("vera") is not None
        assert b.post("/api/v1/auth/logout", headers={"X-CSRF-Token": csrf}).status_code in (200, 204)
        a.cookies.set("cg_session", session)
        assert a.get("/api/v1/auth/me").status_code == 401  # logged out on B: gone on A
        actions = [e.action for e in app_a.state.console.users.audit_entries()[0]]
        assert "login" in actions and "user.add" in actions


def test_guesses_spread_over_two_consoles_are_limited_as_one(two_consoles: list[Any]) -> None:
    from fastapi.testclient import TestClient

    app_a, app_b = two_consoles
    wrong = {"username": "ada", "password": "wrong-pass-1"}
    a, b = TestClient(app_a), TestClient(app_b)
    if True:
        codes = [(a if i % 2 else b).post("/api/v1/auth/login", json=wrong).status_code for i in range(5)]
        assert codes == [401] * 5  # the pair's 5th failure starts a delay (on B)
        held = a.post("/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        assert held.status_code == 429 and int(held.headers["Retry-After"]) >= 1
        assert b.post("/api/v1/auth/login", json=wrong).status_code == 429


def test_a_console_that_lost_the_database_answers_503_and_the_other_goes_on(two_consoles: list[Any]) -> None:
    from fastapi.testclient import TestClient

    app_a, app_b = two_consoles
    token = app_b.state.console.users.create_api_token("ada")
    store = app_a.state.console.users
    session = store._session
    session.url, session.retry = "postgresql://postgres@127.0.0.1:1/test", RetryPolicy(budget_s=0, connect_timeout_s=2)
    session._discard()  # the connection is gone and the server cannot be reached
    lost = TestClient(app_a).get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert lost.status_code == 503 and lost.headers["Retry-After"] == "5" and "users database" in lost.text
    assert TestClient(app_b).get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200


# the users command -----------------------------------------------------------------------------
def test_users_add_with_a_postgresql_config_writes_to_the_site_database(
    console_video: Path,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from campusguard.cli.main import main

    config = str(postgres_config(console_video, tmp_path, postgres_url))
    monkeypatch.setattr(sys, "stdin", io.StringIO("admin-pass-1\n"))
    assert main(["users", "add", "ada", "--role", "admin", "--password-stdin", "--config", config]) == 0
    out = capsys.readouterr().out
    assert "added admin 'ada'" in out and "127.0.0.1:5432" in out and "cg_test_" in out
    assert main(["users", "token", "ada", "--label", "nvr", "--config", config]) == 0
    token = capsys.readouterr().out.strip()
    with PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER) as store:
        assert [(u.name, u.role) for u in store.list_users()] == [("ada", "admin")]
        assert store.verify_password("ada", "admin-pass-1") is not None
        credential = store.resolve(token)
        assert credential is not None and credential.kind == "api"
        assert [e.action for e in store.audit_entries()[0]] == ["token.create", "user.add"]
    assert main(["users", "list", "--config", config]) == 0 and "ada" in capsys.readouterr().out
    assert main(["users", "list", "--config", config, "--users-db", str(tmp_path / "users.db")]) == 2
    assert "--users-db does not apply" in capsys.readouterr().err
    assert not (tmp_path / "users.db").exists()
    down = tmp_path / "down.yaml"
    down.write_text(Path(config).read_text().replace(postgres_url, "postgresql://postgres@127.0.0.1:1/test"))
    assert main(["users", "list", "--config", str(down)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "cannot be reached" in err and len(err.strip().splitlines()) == 1


def test_evidence_and_reports_read_the_audit_log_of_a_postgresql_site(
    console_video: Path,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    from campusguard.cli.evidence import users_audit

    config = postgres_config(console_video, tmp_path, postgres_url)
    with PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER) as store:
        store.audit("ada", "event.acknowledge", "ev-1", note="seen on node a")
    users = users_audit(None, config)
    try:
        assert [(e["user"], e["action"]) for e in users.audit_about(["ev-1"])] == [("ada", "event.acknowledge")]
    finally:
        users.close()
    with pytest.raises(InvalidInputError, match="--users-db does not apply"):
        users_audit(tmp_path / "users.db", config)


def test_a_serve_process_over_postgresql_shares_its_sessions_with_the_other_nodes(
    console_video: Path,
    tmp_path: Path,
    postgres_url: str,  # noqa: F811
) -> None:
    """`serve` of a PostgreSQL config (the fake detector) as node A; node B is a store of the same
    database: a user B added logs in on A, and B's revocation of that session ends it on A."""
    import httpx
    from fakes_console import free_port, wait_until_serving

    config = str(postgres_config(console_video, tmp_path, postgres_url))
    node_b = PostgresUserStore(postgres_url, password_hasher=CHEAP_HASHER)
    node_b.add_user("ada", "admin", "admin-pass-1")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).parents[1] / "fakes_watch.py"), "--serve", str(port), "-", config],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, base)
        login = httpx.post(f"{base}/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        assert login.status_code == 200
        token = login.json()["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        credential = node_b.resolve(token)
        assert credential is not None and credential.user.name == "ada"
        assert httpx.get(f"{base}/api/v1/auth/me", headers=bearer).status_code == 200
        node_b.revoke(credential.token_hash)
        assert httpx.get(f"{base}/api/v1/auth/me", headers=bearer).status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        node_b.close()
    assert proc.returncode == 0, err
    assert "users: postgresql://postgres@127.0.0.1:5432/test" in out
