"""Users over the API (admin) and the users database itself: argon2 hashes, token hashes, last admin, audit."""

from __future__ import annotations

import sqlite3

import pytest

from campusguard.app.console.identity.users import UserStore
from campusguard.errors import InvalidInputError


def test_admin_manages_users_and_tokens(console):
    client, h = console.client(), console.bearer("ada")
    assert [u["name"] for u in client.get("/api/v1/users", headers=h).json()] == ["ada", "otto", "vera"]
    r = client.post("/api/v1/users", json={"name": "nina", "role": "operator", "password": "nina-pass-1"}, headers=h)
    assert r.status_code == 201 and r.json()["role"] == "operator"
    again = client.post("/api/v1/users", json={"name": "nina", "role": "viewer", "password": "nina-pass-2"}, headers=h)
    assert again.status_code == 409
    assert client.post("/api/v1/auth/login", json={"username": "nina", "password": "nina-pass-1"}).status_code == 200
    r = client.post("/api/v1/users/nina/tokens", json={"label": "vms", "days": 30}, headers=h)
    assert r.status_code == 201
    token = r.json()["token"]
    me = console.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.json()["name"] == "nina" and me.json()["role"] == "operator"
    assert client.post("/api/v1/users/ghost/tokens", json={}, headers=h).status_code == 404
    assert client.delete("/api/v1/users/nina", headers=h).status_code == 204
    # her sessions and tokens went with her
    assert console.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert client.delete("/api/v1/users/nina", headers=h).status_code == 404
    assert client.delete("/api/v1/users/ada", headers=h).status_code == 409  # the last admin stays
    actions = [(e["action"], e["target"]) for e in client.get("/api/v1/audit", headers=h).json()["items"]]
    assert actions[:4] == [("user.remove", "nina"), ("token.create", "nina"), ("login", "nina"), ("user.add", "nina")]


def test_passwords_and_tokens_are_stored_hashed(tmp_path):
    from fakes_console import CHEAP_HASHER

    with UserStore(tmp_path / "u.db", password_hasher=CHEAP_HASHER) as users:
        users.add_user("ada", "admin", "admin-pass-1")
        token = users.create_api_token("ada")
        session, csrf = users.create_session("ada")
        assert users.verify_password("ada", "admin-pass-1").role == "admin"
        assert users.verify_password("ada", "admin-pass-2") is None
        assert users.verify_password("bob", "admin-pass-1") is None
        assert users.resolve(token).kind == "api" and users.resolve(session).csrf == csrf
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("u.db*"))  # the file and any WAL left
    for secret in (b"admin-pass-1", token.encode(), session.encode()):
        assert secret not in raw
    digest = sqlite3.connect(tmp_path / "u.db").execute("SELECT password_hash FROM users").fetchone()[0]
    assert digest.startswith("$argon2id$")


@pytest.mark.parametrize(
    ("name", "role", "password", "message"),
    [
        ("bad name", "admin", "long-enough", "not valid"),
        ("../x", "admin", "long-enough", "not valid"),
        ("ok", "root", "long-enough", "role must be"),
        ("ok", "viewer", "short", "8 to 1024"),
    ],
)
def test_bad_users_are_refused(tmp_path, name, role, password, message):
    from fakes_console import CHEAP_HASHER

    with (
        UserStore(tmp_path / "u.db", password_hasher=CHEAP_HASHER) as users,
        pytest.raises(InvalidInputError, match=message),
    ):
        users.add_user(name, role, password)


def test_foreign_and_newer_databases_are_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "other.db")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidInputError, match="not a CampusGuard users database"):
        UserStore(tmp_path / "other.db")
    conn = sqlite3.connect(tmp_path / "newer.db")
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(InvalidInputError, match="newer"):
        UserStore(tmp_path / "newer.db")


def test_admin_changes_roles_and_passwords(console):
    client, h = console.client(), console.bearer("ada")
    otto_session = console.token("otto")
    otto_api = console.users.create_api_token("otto")
    r = client.patch("/api/v1/users/otto", json={"role": "viewer"}, headers=h)
    assert r.status_code == 200 and r.json()["role"] == "viewer"
    # the role applies to existing credentials at once
    ack = console.client().post("/api/v1/events/x/ack", json={}, headers={"Authorization": f"Bearer {otto_session}"})
    assert ack.status_code == 403
    r = client.patch("/api/v1/users/otto", json={"password": "new-otto-pass"}, headers=h)
    assert r.status_code == 200
    assert (
        console.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {otto_session}"}).status_code == 401
    )
    assert console.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {otto_api}"}).status_code == 200
    login = console.client().post("/api/v1/auth/login", json={"username": "otto", "password": "new-otto-pass"})
    assert login.status_code == 200
    assert client.patch("/api/v1/users/ada", json={"role": "operator"}, headers=h).status_code == 409  # last admin
    assert client.patch("/api/v1/users/ghost", json={"role": "viewer"}, headers=h).status_code == 404
    assert client.patch("/api/v1/users/otto", json={"password": "short"}, headers=h).status_code == 422
    assert (
        client.patch("/api/v1/users/otto", json={"role": "viewer"}, headers=console.bearer("vera")).status_code == 403
    )
    entry = client.get("/api/v1/audit", headers=h).json()["items"][1]
    assert entry["action"] == "user.update" and entry["details"] == {"password_changed": True, "role": None}
    assert "new-otto-pass" not in client.get("/api/v1/audit", headers=h).text


def test_users_change_their_own_password(console):
    client = console.client()
    other = console.token("vera")  # another session of hers
    body = client.post("/api/v1/auth/login", json={"username": "vera", "password": "viewer-pass-1"}).json()
    h = {"X-CSRF-Token": body["csrf"]}
    wrong = client.post("/api/v1/auth/password", json={"current": "nope-nope", "new": "vera-new-pass"}, headers=h)
    assert wrong.status_code == 403
    r = client.post("/api/v1/auth/password", json={"current": "viewer-pass-1", "new": "vera-new-pass"}, headers=h)
    assert r.status_code == 204
    assert client.get("/api/v1/auth/me").status_code == 200  # this session stays
    assert console.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {other}"}).status_code == 401
    assert console.users.verify_password("vera", "vera-new-pass") is not None
    assert console.users.verify_password("vera", "viewer-pass-1") is None
    # without the CSRF header a cookie cannot do it
    assert client.post("/api/v1/auth/password", json={"current": "vera-new-pass", "new": "x" * 10}).status_code == 403


def test_a_schema_2_database_gains_last_sign_in_and_mapped_groups(tmp_path):
    from fakes_console import CHEAP_HASHER

    from campusguard.app.console.identity import users as users_module

    conn = sqlite3.connect(tmp_path / "u.db")
    conn.executescript(users_module._SCHEMA_V1 + users_module._SCHEMA_V2)
    conn.execute("INSERT INTO users VALUES ('ana', 'operator', '!oidc', '2024-01-01T00:00:00+00:00')")
    conn.execute("INSERT INTO oidc_links VALUES ('https://idp.test', 's-1', 'ana', '2024-01-01T00:00:00+00:00')")
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()
    with UserStore(tmp_path / "u.db", password_hasher=CHEAP_HASHER) as users:
        (ana,) = users.list_accounts()
        assert (ana.source, ana.issuer, ana.subject, ana.groups, ana.last_sign_in_at) == (
            "oidc",
            "https://idp.test",
            "s-1",
            (),
            None,
        )
        users.sign_in_external("https://idp.test", "s-1", "ana", "admin", groups=["g-admins"])
        users.create_session("ana")
        (ana,) = users.list_accounts()
        assert ana.role == "admin" and ana.groups == ("g-admins",) and ana.last_sign_in_at is not None
        with pytest.raises(InvalidInputError, match="no console password"):
            users.set_password("ana", "a-long-password")
