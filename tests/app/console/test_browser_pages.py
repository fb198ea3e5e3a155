"""The page routes over HTTP (FastAPI's test client, the real app; no browser): login redirects,
roles, security headers, escaping, and that every asset is served by the package (no CDN)."""

from __future__ import annotations

import re

import pytest

from campusguard.app.console.pages import STATIC_DIR

PAGES = ["/", "/events", "/events/abc123", "/noise", "/zones/cam1", "/users", "/audit"]


@pytest.mark.parametrize("path", PAGES)
def test_pages_redirect_to_login_without_a_session(console, path):
    response = console.client().get(path, follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == f"/login?next={path}"


@pytest.mark.parametrize("path", PAGES)
def test_pages_for_an_admin_with_security_headers(console, path):
    response = console.client().get(path, headers=console.bearer("ada"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert response.headers["x-frame-options"] == "DENY" and response.headers["cache-control"] == "no-store"
    assert 'data-user="ada" data-role="admin"' in response.text
    assert "<script>" not in response.text  # no inline script: the CSP forbids it


def test_login_page_is_public(console):
    response = console.client().get("/login")
    assert response.status_code == 200 and 'id="login-form"' in response.text
    assert "data-user" not in response.text and "Log out" not in response.text


def test_roles_on_pages(console):
    client = console.client()
    assert client.get("/users", headers=console.bearer("vera")).status_code == 403
    assert client.get("/users", headers=console.bearer("otto")).status_code == 403
    viewer_wall = client.get("/", headers=console.bearer("vera")).text
    assert 'href="/users"' not in viewer_wall and 'href="/users"' in client.get("/", headers=console.bearer("ada")).text


def test_page_data_is_escaped_and_unknown_camera_is_a_404_page(console):
    client = console.client()
    response = client.get('/events/x"><img src=x onerror=alert(1)>', headers=console.bearer("vera"))
    assert response.status_code == 200
    assert "<img src=x" not in response.text and "&quot;&gt;&lt;img src=x" in response.text
    missing = client.get("/zones/nope", headers=console.bearer("ada"))
    assert missing.status_code == 404 and "There is no camera &#x27;nope&#x27;." in missing.text


def test_every_asset_is_served_by_the_package_and_nothing_comes_from_elsewhere(console):
    client = console.client()
    html = client.get("/", headers=console.bearer("ada")).text
    refs = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert "/static/css/console.css" in refs and "/static/js/wall.js" in refs
    files = [p for p in STATIC_DIR.rglob("*") if p.is_file()]
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", text), (
            f"{path.name} loads something from the network"
        )
        for module in re.findall(r'from "\./([a-z]+\.js)"|import "\./([a-z]+\.js)"', text):
            name = next(m for m in module if m)
            assert (STATIC_DIR / "js" / name).is_file(), f"{path.name} imports a missing module {name}"
    for ref in refs + [f"/static/js/{p.name}" for p in (STATIC_DIR / "js").glob("*.js")]:
        response = client.get(ref)  # public, like the login page that needs them
        assert response.status_code == 200, ref
