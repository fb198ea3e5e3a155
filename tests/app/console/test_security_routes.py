"""Protected by default: every route of the app, enumerated from ``app.routes``, needs credentials."""

from __future__ import annotations

import re

import pytest
from fastapi import APIRouter

from campusguard.app.console.server import PUBLIC_ROUTES, app_routes, check_routes_protected, route_kind

PATH_VALUES = {"name": "cam1", "event_id": "e1"}


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)(:[^}]*)?\}", lambda m: PATH_VALUES.get(m.group(1), "x"), path)


def all_routes(app):
    """(method, template path, is a page) of every route of the app."""
    from fastapi.routing import APIRoute
    from starlette.routing import Mount

    out = []
    for route in app_routes(app):
        kind = route_kind(route)
        if issubclass(kind, Mount):
            out.append(("GET", route.path, False))
        elif issubclass(kind, APIRoute):
            page = not route.path.startswith("/api/") and route.path != "/metrics"
            out += [(m, route.path, page) for m in sorted(route.methods)]
    return out


def test_every_route_needs_credentials(console):
    client = console.client(follow_redirects=False)
    routes = all_routes(console.app)
    assert len(routes) >= 25
    checked_api = checked_pages = 0
    for method, path, page in routes:
        if (method, path) in PUBLIC_ROUTES:
            continue
        url = concrete(path)
        response = client.request(method, url, json={} if method in ("POST", "PUT") else None)
        if page:
            assert response.status_code == 303, (method, path, response.status_code)
            assert response.headers["location"].startswith("/login?next="), (method, path)
            checked_pages += 1
        else:
            assert response.status_code == 401, (method, path, response.status_code, response.text)
            assert response.headers.get("www-authenticate") == "Bearer"
            checked_api += 1
    assert checked_api >= 20
    assert checked_pages >= 6  # /, /events, /events/{id}, /zones, /zones/{camera}, /users
    # and nothing but the public list answers without credentials
    for method, path in PUBLIC_ROUTES:
        if path == "/static" or not any(r[:2] == (method, path) for r in routes):
            continue
        response = client.request(method, path, json={"username": "nobody", "password": "wrong-password"})
        assert response.status_code != 303 and (response.status_code != 401 or path.endswith("/auth/login"))


def test_public_routes_are_only_health_login_and_static():
    assert {p for _, p in PUBLIC_ROUTES} == {
        "/healthz",
        "/readyz",
        "/login",
        "/api/v1/auth/login",
        "/auth/oidc/login",  # campus sign-in: to the provider and back
        "/auth/oidc/callback",
        "/static",
    }


def test_openapi_schema_needs_credentials_and_lists_the_api(console):
    client = console.client()
    assert client.get("/api/v1/openapi.json").status_code == 401
    assert client.get("/openapi.json").status_code in (401, 404)  # FastAPI's own is switched off
    assert client.get("/docs").status_code in (303, 401, 404)
    schema = client.get("/api/v1/openapi.json", headers=console.bearer("vera")).json()
    paths = set(schema["paths"])
    assert {"/api/v1/events", "/api/v1/events/{event_id}/ack", "/api/v1/cameras/{name}/zones", "/metrics"} <= paths
    assert "HTTPBearer" in schema["components"]["securitySchemes"]


def test_an_unprotected_route_is_refused(console):
    app = console.app
    check_routes_protected(app)  # the real app passes
    router = APIRouter()

    @router.get("/api/v1/oops")
    def oops() -> dict[str, str]:
        return {}

    app.include_router(router)
    with pytest.raises(RuntimeError, match="GET /api/v1/oops"):
        check_routes_protected(app)


def test_a_plain_starlette_route_is_refused(console):
    from starlette.responses import PlainTextResponse

    console.app.add_route("/raw", lambda request: PlainTextResponse("open"))
    with pytest.raises(RuntimeError, match="GET /raw"):
        check_routes_protected(console.app)


def test_security_headers_on_every_answer(console):
    client = console.client(follow_redirects=False)
    for path in ("/healthz", "/api/v1/events", "/api/v1/nope"):
        r = client.get(path)
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert client.get("/api/v1/events", headers=console.bearer("vera")).headers["cache-control"] == "no-store"
