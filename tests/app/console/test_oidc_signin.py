"""Campus sign-in (OIDC) against a real OpenID Provider on loopback: the certified `oidc-provider`
(npm, ``tests/app/console/oidc``) run by node, and the console behind a real uvicorn.

Deployed as it is in a campus: the provider on ``localhost``, the console on ``127.0.0.1`` (two
sites to Chromium), so the provider's redirect back to the callback is a cross-site navigation.

Covered: Chromium signs in through the provider and sees its user with the role of its group, then
logs out of the console and of the provider (RP-initiated logout); ID tokens tampered six ways
(signature, nonce, aud, iss, expired, ``alg: none``) are refused by the callback with the reason
audited; a key rotation is followed and unknown key ids refetch the JWKS at most once per interval;
no mapped group, a name taken by a local account, wrong state, a missing sign-in cookie are refused;
the role follows the provider at each sign-in; ``local_login: false`` refuses passwords.
The test hooks of the provider script (tampering, group changes) are in the script, not the product.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fakes_console import ConsoleUnderTest, console_yaml, free_port, make_console

from campusguard.app.config.root import parse_config
from campusguard.app.console.identity.oidc import KeyCache, SignInRefused, build_oidc
from campusguard.app.console.identity.provider_grants import MemoryGrants
from campusguard.errors import ConfigError, InvalidInputError

pytestmark = pytest.mark.slow
PROVIDER_DIR = Path(__file__).parent / "oidc"
NODE = shutil.which("node")
CHROMIUM = Path("/usr/bin/chromium")
SECRET_ENV = "CAMPUSGUARD_TEST_OIDC_SECRET"
CLIENT_ID = "campusguard-console"


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen[str]

    def tamper(self, mode: str) -> None:
        httpx.post(f"{self.issuer}/__test__/tamper", data={"mode": mode}).raise_for_status()

    def set_groups(self, login: str, groups: list[str]) -> None:
        httpx.post(
            f"{self.issuer}/__test__/groups", data={"login": login, "groups": ",".join(groups)}
        ).raise_for_status()

    def jwks_fetches(self) -> int:
        return int(httpx.get(f"{self.issuer}/__test__/stats").json()["jwks_fetches"])


@dataclass
class SignInSetup:
    provider: Provider
    console: ConsoleUnderTest
    url: str  # the console, on 127.0.0.1


def _cannot(reason: str) -> None:
    """Skip with ``reason``, or fail under ``CI=true`` (where every tool is installed), as the PostgreSQL tests do."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def ensure_provider_modules() -> None:
    """The OpenID Provider's node modules, installed with ``npm ci`` (from ``package-lock.json``) the first time
    they are missing, so the README's one test command runs these tests on a fresh clone; a missing ``npm`` or an
    install that fails (no network) skips them with the reason."""
    if (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
        return
    npm = shutil.which("npm")
    if npm is None:
        _cannot(f"npm is not installed: the OpenID Provider of these tests needs `npm ci` in {PROVIDER_DIR}")
        return
    import fcntl

    with (PROVIDER_DIR / ".npm-ci.lock").open("w") as lock:  # one install, whatever runs these tests at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (PROVIDER_DIR / "node_modules" / "oidc-provider").is_dir():
            return
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=PROVIDER_DIR, capture_output=True, text=True, timeout=600
        )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        _cannot(f"`npm ci` in {PROVIDER_DIR} failed (exit {proc.returncode}): {last}")


def start_provider(console_url: str) -> Provider:
    if NODE is None:
        pytest.skip("node is not installed (the OpenID Provider of these tests runs on node)")
    ensure_provider_modules()
    options = {
        "host": "localhost",
        "clientId": CLIENT_ID,
        "clientSecret": "a-test-client-secret-of-some-length-0123456789",
        "redirectUri": f"{console_url}/auth/oidc/callback",
        "postLogoutRedirectUri": f"{console_url}/login",
    }
    process = subprocess.Popen(
        [NODE, str(PROVIDER_DIR / "oidc_provider.js"), json.dumps(options)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline() if process.stdout else ""))
    reader.start()
    reader.join(20)
    if not line or not line[0].strip():
        process.kill()
        raise RuntimeError("the OpenID Provider did not start")
    return Provider(json.loads(line[0])["issuer"], process)


def oidc_section(console_url: str, issuer: str, **oidc: Any) -> str:
    section = {
        "public_url": console_url,
        "oidc": {
            "name": "Campus IdP",
            "issuer": issuer,
            "client_id": CLIENT_ID,
            "client_secret_env": SECRET_ENV,
            "scopes": ["openid", "profile", "email", "groups"],
            "role_claim": "groups",
            "role_map": {"cg-operators": "operator", "cg-admins": "admin"},
            **oidc,
        },
    }
    return "console: " + json.dumps(section) + "\n"


@pytest.fixture(scope="module")
def signin(console_video: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignInSetup]:
    """One provider (localhost) and one console (127.0.0.1) for the module."""
    import uvicorn

    tmp = tmp_path_factory.mktemp("oidc")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    provider = start_provider(url)
    os.environ[SECRET_ENV] = "a-test-client-secret-of-some-length-0123456789"
    server = None
    console = None
    try:
        config = tmp / "watch.yaml"
        config.write_text(console_yaml(console_video, tmp) + oidc_section(url, provider.issuer))
        console = make_console(config, tmp)
        server = uvicorn.Server(uvicorn.Config(console.app, host="127.0.0.1", port=port, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        yield SignInSetup(provider, console, url)
    finally:
        if server is not None:
            server.should_exit = True
        if console is not None:
            console.runtime.stop()
            console.users.close()
        os.environ.pop(SECRET_ENV, None)
        provider.process.kill()
        provider.process.wait(10)


@pytest.fixture(autouse=True)
def untampered(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "signin" in request.fixturenames:
        request.getfixturevalue("signin").provider.tamper("")


@dataclass
class Answer:
    """The callback's answer and the session cookie it set (``None``: none)."""

    response: httpx.Response
    session: str | None

    @property
    def status_code(self) -> int:
        return self.response.status_code

    @property
    def text(self) -> str:
        return self.response.text

    @property
    def headers(self) -> httpx.Headers:
        return self.response.headers


def sign_in_http(setup: SignInSetup, login: str, *, next_path: str = "/events") -> Answer:
    """The whole round trip without a browser: console -> provider's login form -> callback."""
    with httpx.Client(timeout=15) as client:
        start = client.get(f"{setup.url}/auth/oidc/login", params={"next": next_path})
        assert start.status_code == 303, start.text
        query = parse_qs(urlsplit(start.headers["location"]).query)
        assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
        assert query["state"][0] and query["nonce"][0] and query["redirect_uri"] == [f"{setup.url}/auth/oidc/callback"]
        cookie = start.headers["set-cookie"]
        assert "cg_oidc=" in cookie and "samesite=lax" in cookie.lower() and "httponly" in cookie.lower()
        form = client.get(start.headers["location"], follow_redirects=True)
        assert form.status_code == 200 and "/interaction/" in str(form.url), form.text
        answer = client.post(f"{form.url}/login", data={"login": login}, follow_redirects=True)
        assert str(answer.url).startswith(f"{setup.url}/auth/oidc/callback?"), answer.url
        return Answer(answer, client.cookies.get("cg_session", domain="127.0.0.1"))


def last_audit(setup: SignInSetup) -> Any:
    entries, _ = setup.console.users.audit_entries(limit=1, action="login.")
    return entries[0]


# Chromium, cross-site ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


def test_chromium_signs_in_through_the_provider_and_logs_out_of_both(signin, browser):
    context = browser.new_context()
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(15_000)
    try:
        page.goto(f"{signin.url}/events")
        page.wait_for_url(f"{signin.url}/login?next=/events")
        assert page.inner_text("#oidc-login") == "Sign in with Campus IdP"
        page.click("#oidc-login")
        page.wait_for_url(f"{signin.provider.issuer}/interaction/**")  # the provider, another site
        page.fill("#op-login", "alice")
        page.click("#op-submit")
        # the callback (cross-site: the Strict session cookie would be withheld), then a fresh same-site navigation
        page.wait_for_url(f"{signin.url}/events")
        assert page.inner_text("nav .who").split() == ["alice", "operator"]
        session = next(c for c in context.cookies(signin.url) if c["name"] == "cg_session")
        assert session["sameSite"] == "Strict" and session["httpOnly"]
        assert not [c for c in context.cookies(signin.url) if c["name"] == "cg_oidc"]  # the round trip is over
        user = signin.console.users.get_user("alice")
        assert user is not None and user.role == "operator"
        entry = last_audit(signin)
        assert (entry.action, entry.user, entry.details["role"]) == ("login.oidc", "alice", "operator")
        assert entry.details["mapped"] == ["cg-operators"]
        # logout ends the console session, then the provider's (RP-initiated logout)
        page.click("#logout")
        page.wait_for_url(f"{signin.provider.issuer}/session/end**")
        page.click("#op-logout")
        page.wait_for_url(f"{signin.url}/login**")
        page.goto(f"{signin.url}/events")
        page.wait_for_url(f"{signin.url}/login?next=/events")
        page.click("#oidc-login")  # the provider asks again: its session ended too
        page.wait_for_url(f"{signin.provider.issuer}/interaction/**")
        assert page.is_visible("#op-login")
    finally:
        context.close()
    assert not errors, errors


# tampered ID tokens through the real callback ------------------------------------------------------

TAMPERED = [
    ("signature", "signature is wrong"),
    ("nonce", "wrong nonce"),
    ("aud", "wrong audience"),
    ("iss", "wrong issuer"),
    ("expired", "expired"),
    ("none", "algorithm 'none'"),
]


@pytest.mark.parametrize(("mode", "reason"), TAMPERED, ids=[m for m, _ in TAMPERED])
def test_a_tampered_id_token_is_refused(signin, mode, reason):
    before = signin.console.users.list_users()
    signin.provider.tamper(mode)
    answer = sign_in_http(signin, "bob")
    assert answer.status_code == 400, answer.text
    assert "Sign-in refused" in answer.text
    assert answer.session is None
    assert signin.console.users.list_users() == before  # nobody made, no role changed
    entry = last_audit(signin)
    assert entry.action == "login.oidc.refused" and reason in entry.details["reason"], entry.details
    assert entry.details["address"] == "127.0.0.1"


def test_the_untampered_token_of_the_same_flow_signs_in(signin):
    answer = sign_in_http(signin, "bob")
    assert answer.status_code == 200 and answer.session
    assert answer.headers["refresh"] == "0; url=/events"
    me = httpx.get(f"{signin.url}/api/v1/auth/me", headers={"Authorization": f"Bearer {answer.session}"})
    assert me.json()["name"] == "bob" and me.json()["role"] == "admin"


def test_a_key_rotation_is_followed_and_unknown_keys_refetch_at_most_once_per_interval(signin):
    keys = signin.console.app.state.oidc.keys
    assert sign_in_http(signin, "bob").status_code == 200  # the JWKS is cached now
    keys.min_refetch_s = 0.0
    fetched = signin.provider.jwks_fetches()
    signin.provider.tamper("rotate")  # a new key, published from now on: one refetch finds it
    assert sign_in_http(signin, "bob").status_code == 200
    assert signin.provider.jwks_fetches() == fetched + 1
    keys.min_refetch_s = 60.0  # now a flood of unknown key ids reads the JWKS no more
    signin.provider.tamper("unknown_kid")
    for _ in range(2):
        answer = sign_in_http(signin, "bob")
        assert answer.status_code == 400
        assert "key the provider does not publish" in last_audit(signin).details["reason"]
    assert signin.provider.jwks_fetches() == fetched + 1


# who may sign in, with which role ------------------------------------------------------------------


def test_no_mapped_group_is_refused_with_a_page_that_says_why(signin):
    answer = sign_in_http(signin, "sam")  # groups: students
    assert answer.status_code == 403
    assert "none of your groups gives you a role" in answer.text
    assert signin.console.users.get_user("sam") is None
    entry = last_audit(signin)
    assert (
        entry.action == "login.oidc.refused" and entry.target == "sam" and entry.details["reason"].startswith("no role")
    )


def test_a_local_account_is_never_taken_over(signin):
    answer = sign_in_http(signin, "ada")  # the provider's ada is not the console's local admin ada
    assert answer.status_code == 403 and "belongs to another console account" in answer.text
    assert answer.session is None
    assert signin.console.users.external_issuer("ada") is None
    assert signin.console.users.verify_password("ada", "admin-pass-1") is not None


def test_the_role_follows_the_provider_at_each_sign_in(signin):
    signin.provider.set_groups("alice", ["cg-admins", "cg-operators"])
    try:
        assert sign_in_http(signin, "alice").status_code == 200
        assert signin.console.users.get_user("alice").role == "admin"  # the highest mapped role
        signin.provider.set_groups("alice", ["cg-operators"])
        assert sign_in_http(signin, "alice").status_code == 200
        assert signin.console.users.get_user("alice").role == "operator"
        assert last_audit(signin).details["previous_role"] == "admin"
        assert signin.console.users.verify_password("alice", "!oidc") is None  # no password of its own
    finally:
        signin.provider.set_groups("alice", ["cg-operators", "staff"])


def _row(page: str, name: str) -> str:
    """The users page's table row of ``name`` (its HTML), or ``""``."""
    start = page.find(f'<tr data-user="{name}"')
    return page[start : page.index("</tr>", start)] if start >= 0 else ""


def test_the_users_page_lists_provider_accounts_with_source_role_and_last_sign_in(signin):
    users_api, users_page = f"{signin.url}/api/v1/users", f"{signin.url}/users"
    admin = signin.console.bearer("ada")  # the console's local admin
    signin.provider.set_groups("bob", ["cg-operators", "staff"])
    try:
        assert sign_in_http(signin, "bob").status_code == 200
        with httpx.Client(timeout=15, headers=admin) as client:
            listed = {u["name"]: u for u in client.get(users_api).json()}
            bob = listed["bob"]
            assert (bob["source"], bob["role"], bob["issuer"], bob["subject"]) == (
                "oidc",
                "operator",
                signin.provider.issuer,
                "bob",
            )
            assert bob["groups"] == ["cg-operators"] and bob["last_sign_in_at"] is not None
            assert listed["otto"]["source"] == "local" and listed["otto"]["issuer"] is None
            page = client.get(users_page)
            assert page.status_code == 200
            row = _row(page.text, "bob")
            assert 'data-source="oidc"' in row and "Campus IdP" in row and signin.provider.issuer in row
            assert '<option value="operator" selected>' in row and "cg-operators" in row and "<time" in row
            assert 'data-action="password"' not in row  # no console password to reset
            assert 'data-action="password"' in _row(page.text, "otto") and "Password (local)" in _row(page.text, "otto")
            refused = client.patch(f"{users_api}/bob", json={"password": "a-new-pass-1", "role": "viewer"})
            assert refused.status_code == 409 and "identity provider" in refused.json()["detail"]
            assert signin.console.users.get_user("bob").role == "operator"  # nothing half applied
            assert signin.console.users.verify_password("bob", "a-new-pass-1") is None

            # demoted here: lasts until the next sign-in, which sets the role from the groups again
            assert client.patch(f"{users_api}/bob", json={"role": "viewer"}).json()["role"] == "viewer"
            assert '<option value="viewer" selected>' in _row(client.get(users_page).text, "bob")
            assert sign_in_http(signin, "bob").status_code == 200
            assert {u["name"]: u["role"] for u in client.get(users_api).json()}["bob"] == "operator"

            # removed: gone from both lists; a new sign-in makes the account again from the role map
            assert client.delete(f"{users_api}/bob").status_code == 204
            assert "bob" not in {u["name"] for u in client.get(users_api).json()}
            assert _row(client.get(users_page).text, "bob") == ""
            assert sign_in_http(signin, "bob").status_code == 200
            assert last_audit(signin).details["created"] is True
            again = {u["name"]: u for u in client.get(users_api).json()}["bob"]
            assert (again["source"], again["role"]) == ("oidc", "operator")
    finally:
        signin.provider.set_groups("bob", ["cg-admins"])


def test_a_role_claim_missing_from_the_id_token_is_read_from_userinfo(signin):
    signin.provider.tamper("no_groups")  # as a provider that puts groups only into userinfo
    answer = sign_in_http(signin, "alice")
    assert answer.status_code == 200, answer.text
    entry = last_audit(signin)
    assert (entry.action, entry.user, entry.details["mapped"]) == ("login.oidc", "alice", ["cg-operators"])


def test_a_callback_without_its_round_trip_is_refused(signin):
    with httpx.Client() as client:
        answer = client.get(f"{signin.url}/auth/oidc/callback", params={"code": "x", "state": "y"})
        assert answer.status_code == 400 and "no sign-in under way" in last_audit(signin).details["reason"]
        assert client.get(f"{signin.url}/auth/oidc/login").status_code == 303  # the sealed cookie is set now
        sealed = client.cookies["cg_oidc"]
        answer = client.get(f"{signin.url}/auth/oidc/callback", params={"code": "x", "state": "not-the-state"})
        assert answer.status_code == 400 and "wrong state" in last_audit(signin).details["reason"]
        client.get(f"{signin.url}/auth/oidc/login")
        lure = "access_denied <b>call 555-0100</b>"
        answer = client.get(f"{signin.url}/auth/oidc/callback", params={"error": lure, "state": "y"})
        assert (
            answer.status_code == 400
            and "(access_deniedbcall555-0100b)" in answer.text
            and "555-0100</b>" not in answer.text
        )
        assert last_audit(signin).details["reason"].startswith("the provider answered access_denied")
        forged = {"cg_oidc": sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB")}
        answer = httpx.get(f"{signin.url}/auth/oidc/callback", params={"state": "y"}, cookies=forged)
        assert answer.status_code == 400 and "no sign-in under way" in last_audit(signin).details["reason"]


def test_next_stays_on_this_site(signin):
    for evil in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        answer = sign_in_http(signin, "bob", next_path=evil)
        assert answer.headers["refresh"] == "0; url=/"
    answer = sign_in_http(signin, "bob", next_path="/events?camera=Café")
    assert answer.headers["refresh"] == "0; url=/events?camera=Caf%C3%A9"


# password login switched off, configuration ----------------------------------------------------------


def test_local_login_false_hides_and_refuses_password_login(console_video, tmp_path, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "s")
    config = tmp_path / "watch.yaml"
    config.write_text(
        console_yaml(console_video, tmp_path)
        + oidc_section("https://cameras.campus.example", "https://login.campus.example", local_login=False)
    )
    console = make_console(config, tmp_path)
    try:
        client = console.client()
        page = client.get("/login?next=/events").text
        assert '<form id="login-form" autocomplete="on" hidden>' in page
        assert 'href="/auth/oidc/login?next=%2Fevents"' in page
        refused = client.post("/api/v1/auth/login", json={"username": "ada", "password": "admin-pass-1"})
        assert refused.status_code == 403 and "sign in with Campus IdP" in refused.json()["detail"]
        assert client.get("/api/v1/auth/me", headers=console.bearer("ada")).status_code == 200  # tokens still work
    finally:
        console.runtime.stop()
        console.users.close()


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {
                "public_url": "https://c.example",
                "oidc": {"issuer": "http://idp.example", "client_id": "c", "role_map": {"g": "admin"}},
            },
            "must use https",
        ),
        (
            {"oidc": {"issuer": "https://idp.example", "client_id": "c", "role_map": {"g": "admin"}}},
            "public_url is needed",
        ),
        (
            {
                "public_url": "https://c.example",
                "oidc": {"issuer": "https://idp.example", "client_id": "c", "role_map": {}},
            },
            "role_map must map",
        ),
        (
            {
                "public_url": "https://c.example",
                "oidc": {
                    "issuer": "https://idp.example",
                    "client_id": "c",
                    "scopes": ["email"],
                    "role_map": {"g": "admin"},
                },
            },
            "must include openid",
        ),
        (
            {
                "public_url": "https://c.example",
                "oidc": {"issuer": "https://idp.example", "client_id": "c", "role_map": {"g": "root"}},
            },
            "role_map",
        ),
        ({"public_url": "https://c.example/console", "oidc": None}, "scheme, host and port only"),
        (
            {
                "public_url": "https://c.example",
                "oidc": {"issuer": "https://idp.example", "client_id": "c", "role_map": {"g": "admin"}, "unknown": 1},
            },
            "unknown",
        ),
    ],
)
def test_bad_console_sections_are_one_line_errors(section, message):
    with pytest.raises(ConfigError) as caught:
        parse_config("console: " + json.dumps(section) + "\n", "watch.yaml")
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith("watch.yaml:1: console")


def test_http_issuer_is_accepted_on_loopback_only_and_a_missing_secret_is_named():
    loaded = parse_config(oidc_section("http://127.0.0.1:8080", "http://localhost:9000"), "watch.yaml")
    assert loaded.config.console.oidc is not None
    with pytest.raises(InvalidInputError, match=f"{SECRET_ENV} is not set"):
        build_oidc(loaded.config.console, environ={})
    assert build_oidc(loaded.config.console, environ={SECRET_ENV: "s"}) is not None
    assert build_oidc(parse_config("", "w").config.console) is None


def test_key_cache_refetches_an_unknown_kid_at_most_once_per_interval():
    now = [1000.0]

    def oct_key(kid: str) -> dict[str, str]:  # 256-bit keys: the cache does not care about the type
        return {"kty": "oct", "k": base64.urlsafe_b64encode(kid.encode() * 32).decode().rstrip("="), "kid": kid}

    key_a = oct_key("a")
    served = [{"keys": [key_a]}]
    cache = KeyCache(lambda: served[-1], min_refetch_s=30.0, max_age_s=3600.0, clock=lambda: now[0])
    assert cache.key_for("a") is not None and cache.fetches == 1
    served.append({"keys": [key_a, oct_key("b")]})
    with pytest.raises(SignInRefused):
        cache.key_for("b")  # within 30 s of the last read: not read again
    assert cache.fetches == 1
    now[0] += 31
    assert cache.key_for("b") is not None and cache.fetches == 2  # a rotation: found on the refetch
    for _ in range(5):
        with pytest.raises(SignInRefused):
            cache.key_for("made-up")
    assert cache.fetches == 2
    now[0] += 3600
    cache.key_for("a")
    assert cache.fetches == 3  # old keys are read again after max_age_s


def test_serve_names_a_missing_client_secret_in_one_line(tmp_path, monkeypatch, capsys):
    from campusguard.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(SECRET_ENV, raising=False)
    config = tmp_path / "watch.yaml"
    config.write_text(
        f"storage:\n  sqlite: {tmp_path / 'events.db'}\n"
        + oidc_section("http://127.0.0.1:8080", "https://login.campus.example")
    )
    assert main(["serve", str(config), "--port", str(free_port())]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{SECRET_ENV} is not set" in err and len(err.splitlines()) == 1


# issue 44 -------------------------------------------------------------------------------------------


def test_discovery_endpoints_over_http_from_an_https_issuer_are_refused():
    from campusguard.app.console.identity.oidc import ProviderMetadata

    issuer = "https://login.campus.example"
    document = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "jwks_uri": f"{issuer}/jwks",
        "userinfo_endpoint": f"{issuer}/me",
    }
    assert ProviderMetadata.from_document(document, issuer).token_endpoint == f"{issuer}/token"
    for key in ("authorization_endpoint", "token_endpoint", "jwks_uri", "userinfo_endpoint", "end_session_endpoint"):
        plain = {**document, key: "http://login.campus.example/x"}
        with pytest.raises(SignInRefused, match=f"{key} uses http, not the issuer's https"):
            ProviderMetadata.from_document(plain, issuer)


def test_email_is_an_account_name_only_when_verified():
    loaded = parse_config(
        oidc_section("http://127.0.0.1:8080", "http://localhost:9000", username_claims=["email"]), "watch.yaml"
    )
    sign_in = build_oidc(loaded.config.console, environ={SECRET_ENV: "s"})
    assert sign_in is not None
    claims = {"iss": "http://localhost:9000", "sub": "s1", "email": "ada@campus.example", "groups": ["cg-admins"]}
    with pytest.raises(SignInRefused, match="email_verified") as caught:
        sign_in.identity(claims)
    assert caught.value.status == 403
    with pytest.raises(SignInRefused):
        sign_in.identity({**claims, "email_verified": "true"})  # a string is not the provider's true
    assert sign_in.identity({**claims, "email_verified": True}).name == "ada@campus.example"


def test_oidc_sessions_are_rechecked_and_end_when_no_group_maps_any_more(signin):
    sessions = signin.console.app.state.console.provider_sessions
    assert sessions is not None and sessions.recheck_s == 900.0  # the default: 15 minutes
    sessions.recheck_s = 1.0
    signin.provider.set_groups("alice", ["cg-operators"])
    try:
        answer = sign_in_http(signin, "alice")
        assert answer.status_code == 200 and answer.session
        cookies = {"cg_session": answer.session}
        with httpx.Client(base_url=signin.url, cookies=cookies, timeout=15) as client:
            assert client.get("/api/v1/auth/me").status_code == 200
            signin.provider.set_groups("alice", ["cg-admins"])  # promoted at the provider
            time.sleep(1.2)
            assert client.get("/api/v1/auth/me").json()["role"] == "admin"  # applied at the re-check
            signin.provider.set_groups("alice", ["staff"])  # no group maps any more
            assert client.get("/api/v1/auth/me").status_code == 200  # not yet due
            time.sleep(1.2)
            gone = client.get("/api/v1/auth/me")
            assert gone.status_code == 401 and "campus sign-in ended" in gone.text
            assert client.get("/api/v1/auth/me").status_code == 401  # revoked, not just refused once
        ended, _ = signin.console.users.audit_entries(limit=1, action="logout.oidc")
        assert ended and "no role" in ended[0].details["reason"]
    finally:
        sessions.recheck_s = 900.0
        signin.provider.set_groups("alice", ["cg-operators", "staff"])


def test_an_oidc_session_from_before_a_restart_ends_at_its_first_request(signin):
    answer = sign_in_http(signin, "alice")
    assert answer.status_code == 200 and answer.session
    sessions = signin.console.app.state.console.provider_sessions
    sessions.grants = MemoryGrants()  # what a restart of the console loses: the grants held in memory
    with httpx.Client(base_url=signin.url, cookies={"cg_session": answer.session}, timeout=15) as client:
        r = client.get("/api/v1/auth/me")
    assert r.status_code == 401 and "before the console restarted" in r.text
