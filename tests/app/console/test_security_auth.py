"""Credentials and roles: forged, expired and revoked cookies and tokens, wrong roles, CSRF. Each gets a clean 4xx
and nothing changes (checked in the databases and the config file)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from campusguard.app.console.identity.auth import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE

ZONES = {"zones": [{"name": "east", "polygon": [[10, 10], [200, 10], [200, 170]]}], "lines": []}


@pytest.fixture
def seeded(console, make_event):
    console.runtime.store.add(make_event(event_id="e1", started_at=datetime(2026, 1, 10, 22, 0, tzinfo=UTC)))
    return console


def unchanged(console, config_text: str, audit_before: int) -> None:
    """The event is still open, nothing was audited, the config file is as it was."""
    record = console.runtime.store.get_record("e1")
    assert record.state == "open" and record.acknowledged_by is None and record.note is None
    assert console.audit_count() == audit_before
    assert console.config.read_text() == config_text


def login(client, name: str, password: str):
    return client.post("/api/v1/auth/login", json={"username": name, "password": password})


def test_login_sets_strict_httponly_cookie_and_returns_token(seeded):
    client = seeded.client()
    response = login(client, "otto", "operator-pass-1")
    assert response.status_code == 200
    body = response.json()
    assert body["user"] == {"name": "otto", "role": "operator", "created_at": None}
    cookies = {c.split("=", 1)[0]: c for c in response.headers.get_list("set-cookie")}
    assert "HttpOnly" in cookies[SESSION_COOKIE] and "SameSite=strict" in cookies[SESSION_COOKIE]
    assert "Path=/" in cookies[SESSION_COOKIE]
    assert "HttpOnly" not in cookies[CSRF_COOKIE]  # the page's JS reads it
    assert client.get("/api/v1/auth/me").json()["name"] == "otto"  # the cookie alone authenticates reads
    # the token is stored hashed, never as given
    rows = sqlite3.connect(seeded.users.path).execute("SELECT token_hash FROM tokens").fetchall()
    assert body["token"] not in {r[0] for r in rows} and len(rows) == 1
    assert (
        seeded.client().get("/api/v1/auth/me", headers={"Authorization": f"Bearer {body['token']}"}).status_code == 200
    )


@pytest.mark.parametrize(
    ("name", "password"),
    [("otto", "wrong-password"), ("nobody", "operator-pass-1"), ("otto", "OPERATOR-PASS-1"), ("", "x")],
)
def test_wrong_credentials_are_refused(seeded, name, password):
    response = login(seeded.client(), name, password)
    assert response.status_code in (401, 422)
    assert "set-cookie" not in response.headers
    # a refused login is audited (name tried, address, reason), never with the password tried
    entries = seeded.users.audit_entries()[0]
    if response.status_code == 422:
        assert entries == []
        return
    [entry] = entries
    assert (entry.user, entry.action, entry.target) == (None, "login.failed", name)
    assert entry.details == {
        "address": "testclient",
        "reason": "unknown user" if name == "nobody" else "wrong password",
        "known_browser": False,
    }
    assert sqlite3.connect(seeded.users.path).execute("SELECT COUNT(*) FROM tokens").fetchone()[0] == 0


@pytest.mark.parametrize(
    "token",
    [
        "cgs_" + "A" * 43,  # well-formed but never issued
        "cga_forged",
        "not-a-token",
        "cgs_" + "x" * 5000,
        "' OR 1=1 --",
    ],
)
def test_forged_tokens_and_cookies_get_401(seeded, token):
    text, audit_before = seeded.config.read_text(), seeded.audit_count()
    client = seeded.client()
    assert client.get("/api/v1/events", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    client.cookies.set(SESSION_COOKIE, token)
    assert client.get("/api/v1/events").status_code == 401
    r = client.post("/api/v1/events/e1/ack", json={"note": "x"}, headers={CSRF_HEADER: "whatever"})
    assert r.status_code == 401
    unchanged(seeded, text, audit_before)


def _expire_all(console) -> None:
    conn = sqlite3.connect(console.users.path)
    conn.execute("UPDATE tokens SET expires_at = ?", ((datetime.now(UTC) - timedelta(seconds=1)).isoformat(),))
    conn.commit()
    conn.close()


def test_expired_session_cookie_and_api_token_get_401(seeded):
    text, audit_before = seeded.config.read_text(), seeded.audit_count()
    client = seeded.client()
    body = login(client, "otto", "operator-pass-1").json()
    api_token = seeded.users.create_api_token("otto")
    assert client.get("/api/v1/events").status_code == 200
    audit_before = seeded.audit_count()
    _expire_all(seeded)
    assert client.get("/api/v1/events").status_code == 401
    r = client.post("/api/v1/events/e1/ack", json={"note": "late"}, headers={CSRF_HEADER: body["csrf"]})
    assert r.status_code == 401
    for token in (body["token"], api_token):
        assert seeded.client().get("/api/v1/events", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    unchanged(seeded, text, audit_before)
    assert seeded.users.purge_expired() == 2


def test_logout_revokes_the_session(seeded):
    client = seeded.client()
    body = login(client, "otto", "operator-pass-1").json()
    assert client.post("/api/v1/auth/logout").status_code == 403  # a cookie write needs the CSRF header
    assert client.post("/api/v1/auth/logout", headers={CSRF_HEADER: body["csrf"]}).status_code == 204
    other = seeded.client()
    assert other.get("/api/v1/events", headers={"Authorization": f"Bearer {body['token']}"}).status_code == 401
    other.cookies.set(SESSION_COOKIE, body["token"])
    assert other.get("/api/v1/events").status_code == 401


def test_api_token_authenticates_but_is_not_a_session_cookie(seeded):
    token = seeded.users.create_api_token("vera", label="grafana")
    assert seeded.client().get("/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    client = seeded.client()
    client.cookies.set(SESSION_COOKIE, token)  # an API token has no CSRF value: never accepted as a cookie
    assert client.get("/api/v1/events").status_code == 401


@pytest.mark.parametrize(
    ("user", "method", "path", "body"),
    [
        ("vera", "POST", "/api/v1/events/e1/ack", {"note": "x"}),
        ("vera", "POST", "/api/v1/events/e1/resolve", {"note": "x"}),
        ("vera", "PUT", "/api/v1/cameras/cam1/zones", ZONES),
        ("otto", "PUT", "/api/v1/cameras/cam1/zones", ZONES),
        ("otto", "GET", "/api/v1/users", None),
        ("otto", "POST", "/api/v1/users", {"name": "mallory", "role": "admin", "password": "mallory-pass"}),
        ("vera", "DELETE", "/api/v1/users/ada", None),
        ("otto", "POST", "/api/v1/users/otto/tokens", {}),
        ("vera", "GET", "/api/v1/audit", None),
        ("vera", "POST", "/api/v1/events/bulk", {"ids": ["e1"], "action": "acknowledge", "note": "x"}),
        ("otto", "GET", "/api/v1/audit/facets", None),
    ],
)
def test_wrong_role_gets_403_and_changes_nothing(seeded, user, method, path, body):
    text, audit_before = seeded.config.read_text(), seeded.audit_count()
    users_before = seeded.users.list_users()
    response = seeded.client().request(method, path, json=body, headers=seeded.bearer(user))
    assert response.status_code == 403
    assert "needs role" in response.json()["detail"]
    unchanged(seeded, text, audit_before)
    assert seeded.users.list_users() == users_before
    assert seeded.runtime.get_zones("cam1")["zones"][0]["polygon"][0] == [160.0, 0.0]


def test_roles_that_may_do_it_can(seeded):
    r = seeded.client().post("/api/v1/events/e1/ack", json={"note": "on it"}, headers=seeded.bearer("otto"))
    assert r.status_code == 200 and r.json()["acknowledged_by"] == "otto"
    r = seeded.client().post("/api/v1/events/e1/resolve", json={"note": "done"}, headers=seeded.bearer("ada"))
    assert r.status_code == 200 and r.json()["resolved_by"] == "ada"


@pytest.mark.parametrize("csrf", [None, "", "wrong", "x" * 500])
def test_cookie_writes_need_the_csrf_header(seeded, csrf):
    text = seeded.config.read_text()
    client = seeded.client()
    body = login(client, "ada", "admin-pass-1").json()
    audit_before = seeded.audit_count()
    headers = {} if csrf is None else {CSRF_HEADER: csrf}
    for method, path, payload in (
        ("POST", "/api/v1/events/e1/ack", {"note": "x"}),
        ("POST", "/api/v1/events/bulk", {"ids": ["e1"], "action": "resolve"}),
        ("PUT", "/api/v1/cameras/cam1/zones", ZONES),
        ("POST", "/api/v1/users", {"name": "mallory", "role": "admin", "password": "mallory-pass"}),
        ("DELETE", "/api/v1/users/otto", None),
    ):
        response = client.request(method, path, json=payload, headers=headers)
        assert response.status_code == 403, (method, path)
        assert CSRF_HEADER in response.json()["detail"]
    unchanged(seeded, text, audit_before)
    assert {u.name for u in seeded.users.list_users()} == {"ada", "otto", "vera"}
    # with the right header it works, and a bearer token needs none
    r = client.post("/api/v1/events/e1/ack", json={"note": "x"}, headers={CSRF_HEADER: body["csrf"]})
    assert r.status_code == 200
    assert seeded.client().post("/api/v1/events/e1/resolve", json={}, headers=seeded.bearer("ada")).status_code == 200
