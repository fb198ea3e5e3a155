"""The identity store's contract, run over both stores: the SQLite file and PostgreSQL (the real server).

Each PostgreSQL test has a fresh schema (`postgres_url`); the argon2 parameters are cheap.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes_console import CHEAP_HASHER

from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import TOKEN_ID_LENGTH, UserStore, hash_token
from campusguard.errors import InvalidInputError


def open_store(kind: str, where: str) -> IdentityStore:
    if kind == "sqlite":
        return UserStore(where, password_hasher=CHEAP_HASHER)
    from campusguard.app.console.identity.postgres import PostgresUserStore

    return PostgresUserStore(where, password_hasher=CHEAP_HASHER)


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """Where a store lives: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "users.db")
    return "postgresql", str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(location: tuple[str, str]) -> Iterator[IdentityStore]:
    s = open_store(*location)
    s.add_user("ada", "admin", "admin-pass-1")
    s.add_user("otto", "operator", "operator-pass-1")
    try:
        yield s
    finally:
        s.close()


def test_users_are_added_listed_and_checked(store: IdentityStore) -> None:
    assert [(u.name, u.role) for u in store.list_users()] == [("ada", "admin"), ("otto", "operator")]
    with pytest.raises(InvalidInputError, match="already exists"):
        store.add_user("ada", "viewer", "another-pass")
    with pytest.raises(InvalidInputError, match="role"):
        store.add_user("bob", "emperor", "a-long-pass")
    assert store.verify_password("ada", "admin-pass-1") == store.get_user("ada")
    assert store.verify_password("ada", "wrong-pass-1") is None
    assert store.verify_password("ghost", "admin-pass-1") is None
    assert store.get_user("ghost") is None


def test_sessions_resolve_until_revoked_or_expired(store: IdentityStore) -> None:
    token, csrf = store.create_session("otto")
    credential = store.resolve(token)
    assert credential is not None and credential.user.name == "otto" and credential.kind == "session"
    assert credential.csrf == csrf and credential.token_hash == hash_token(token)
    assert store.credential(credential.token_hash) == credential
    assert store.resolve(token + "x") is None and store.resolve("cgs_nothing") is None
    assert store.revoke(credential.token_hash) is True
    assert store.resolve(token) is None and store.revoke(credential.token_hash) is False
    old, _ = store.create_session("otto", ttl=timedelta(seconds=-1))
    assert store.resolve(old) is None
    assert store.purge_expired() == 1
    with pytest.raises(KeyError):
        store.create_session("ghost")
    last = {a.name: a.last_sign_in_at for a in store.list_accounts()}
    assert last["otto"] is not None and last["ada"] is None


def test_api_tokens_are_listed_by_id_and_revoked(store: IdentityStore) -> None:
    token = store.create_api_token("ada", label="nvr")
    store.create_api_token("otto", label="grafana")
    listed = store.api_tokens("ada")
    assert [(t.user, t.label) for t in listed] == [("ada", "nvr")]
    assert listed[0].id == hash_token(token)[:TOKEN_ID_LENGTH]
    assert len(store.api_tokens()) == 2
    assert store.revoke_api_token("not-an-id") is None
    revoked = store.revoke_api_token(listed[0].id)
    assert revoked is not None and revoked.user == "ada"
    assert store.resolve(token) is None and len(store.api_tokens()) == 1


def test_password_change_ends_the_other_sessions_but_keeps_api_tokens(store: IdentityStore) -> None:
    kept, _ = store.create_session("otto")
    other, _ = store.create_session("otto")
    api = store.create_api_token("otto")
    store.set_password("otto", "operator-pass-2", keep_token_hash=hash_token(kept))
    assert store.resolve(kept) is not None and store.resolve(other) is None and store.resolve(api) is not None
    store.set_password("otto", "operator-pass-3")
    assert store.resolve(kept) is None
    assert store.verify_password("otto", "operator-pass-3") is not None
    with pytest.raises(KeyError):
        store.set_password("ghost", "a-long-pass")


def test_the_last_admin_stays_and_removal_ends_every_token(store: IdentityStore) -> None:
    with pytest.raises(InvalidInputError, match="last admin"):
        store.remove_user("ada")
    with pytest.raises(InvalidInputError, match="last admin"):
        store.set_role("ada", "viewer")
    token, _ = store.create_session("otto")
    assert store.set_role("otto", "admin").role == "admin"
    credential = store.resolve(token)
    assert credential is not None and credential.user.role == "admin"  # the new role at once
    store.set_role("ada", "viewer")  # otto is an admin now
    with pytest.raises(InvalidInputError, match="last admin"):
        store.remove_user("otto")
    store.set_role("ada", "admin")
    store.remove_user("otto")
    assert store.resolve(token) is None and store.get_user("otto") is None
    with pytest.raises(KeyError):
        store.remove_user("otto")


def test_a_provider_account_is_found_by_issuer_and_subject(store: IdentityStore) -> None:
    first = store.sign_in_external("https://idp", "sub-1", "alice", "viewer", groups=["staff"])
    assert first.created and first.previous_role is None and first.user.role == "viewer"
    again = store.sign_in_external("https://idp", "sub-1", "alice-renamed", "operator", groups=["ops", "staff"])
    assert not again.created and again.previous_role == "viewer" and again.user.name == "alice"
    assert store.external_issuer("alice") == "https://idp" and store.external_issuer("ada") is None
    with pytest.raises(InvalidInputError, match="belongs to another"):
        store.sign_in_external("https://idp", "sub-2", "ada", "viewer")
    assert store.verify_password("alice", "!oidc") is None
    with pytest.raises(InvalidInputError, match="no console password"):
        store.set_password("alice", "a-long-pass")
    account = {a.name: a for a in store.list_accounts()}["alice"]
    assert account.source == "oidc" and account.subject == "sub-1" and account.groups == ("ops", "staff")


def test_the_audit_log_pages_filters_and_finds_targets(store: IdentityStore) -> None:
    store.audit("ada", "event.acknowledge", "ev-1", note="seen")
    store.audit_many("otto", [("event.resolve", "ev-1", {"outcome": "confirmed"}), ("zone.update", "cam1", {})])
    store.audit(None, "user.add", "bob", via="cli")
    entries, total = store.audit_entries(limit=2)
    assert total == 4 and [e.action for e in entries] == ["user.add", "zone.update"]
    assert store.audit_entries(action="event.")[1] == 2
    assert store.audit_entries(action="event.resolve")[0][0].details == {"outcome": "confirmed"}
    assert store.audit_entries(user="ada")[1] == 1
    assert store.audit_entries(since=datetime.now(UTC) + timedelta(minutes=1))[1] == 0
    assert (
        store.audit_entries(until=datetime.now(UTC) + timedelta(minutes=1), offset=3)[0][0].action
        == "event.acknowledge"
    )
    about = store.audit_about(["ev-1", "ev-2"], batch=1)
    assert [(e["user"], e["action"]) for e in about] == [("ada", "event.acknowledge"), ("otto", "event.resolve")]
    assert store.audit_facets() == (["ada", "otto"], ["event.acknowledge", "event.resolve", "user.add", "zone.update"])


def test_the_device_key_is_made_once_and_kept(location: tuple[str, str]) -> None:
    with open_store(*location) as first:
        key = first.device_key()
        assert len(key) >= 16 and first.device_key() == key
    with open_store(*location) as again:
        assert again.device_key() == key


def test_the_app_counts_failed_logins_where_its_store_says(console_video: Path, tmp_path: Path) -> None:
    """A limiter given to `create_app` is the one used (even with no key yet: ``len() == 0``); without
    one, the app's limiter counts where the store keeps failures (a SQLite store: this process's memory)."""
    from fakes_console import console_yaml, make_console

    from campusguard.app.console.identity.auth import LoginLimiter
    from campusguard.app.console.identity.login_failures import MemoryFailures

    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(console_video, tmp_path))
    limiter = LoginLimiter(free_per_pair=1, free_per_address=100, base_delay_s=60.0)
    given = make_console(config, tmp_path, limiter=limiter)
    try:
        assert given.app.state.console.limiter is limiter
        wrong = {"username": "ada", "password": "wrong-pass-1"}
        client = given.client()
        assert client.post("/api/v1/auth/login", json=wrong).status_code == 401
        assert client.post("/api/v1/auth/login", json=wrong).status_code == 429
    finally:
        given.runtime.stop()
        given.users.close()
    (tmp_path / "default").mkdir()
    default = make_console(config, tmp_path / "default")
    try:
        assert isinstance(default.app.state.console.limiter.failures, MemoryFailures)
    finally:
        default.runtime.stop()
        default.users.close()
