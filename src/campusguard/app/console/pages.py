"""The console's pages: HTML shells from ``static/templates`` filled in on the server, with small
plain-JavaScript modules (``static/js``) that call the `/api/v1` API. No node build, no CDN.

`router` holds the pages that need a login; `campusguard.app.console.server` includes it under
the `page_user` dependency (303 to ``/login`` without a session), so ``request.state.user`` is
always set in its handlers. `login_router` holds the one public page, ``GET /login``.

Pages: ``/`` (camera wall), ``/events`` (incident timeline, live through server-sent events),
``/events/{id}`` (one incident with its clip; acknowledge / resolve), ``/health`` (each camera's
health and recent health incidents; an admin accepts a moved camera's view), ``/zones/{camera}``
(zone and line editor on the camera's snapshot; read-only below admin), ``/users`` and ``/audit`` (admin). A
lower role opening an admin page gets the 403 page (`forbidden_page`), not the API's JSON.

Every page is sent with a Content-Security-Policy that allows only this origin's scripts and
styles (no inline script), ``X-Frame-Options: DENY`` and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import functools
import html
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse

from campusguard.app.console.identity.auth import console_state, require_page_role
from campusguard.app.console.identity.users import ROLES, Account, role_at_least

__all__ = ["STATIC_DIR", "router", "login_router", "render_page", "forbidden_page"]

STATIC_DIR = Path(__file__).parent / "static"
TEMPLATES_DIR = STATIC_DIR / "templates"
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
        "media-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# (path, label, lowest role that sees the link)
NAV: tuple[tuple[str, str, str], ...] = (
    ("/", "Cameras", "viewer"),
    ("/events", "Incidents", "viewer"),
    ("/health", "Camera health", "viewer"),
    ("/noise", "Noise", "viewer"),
    ("/users", "Users", "admin"),
    ("/audit", "Audit log", "admin"),
)

router = APIRouter(tags=["pages"], include_in_schema=False)
login_router = APIRouter(tags=["pages"], include_in_schema=False)


@functools.cache
def _template(name: str) -> Template:
    return Template((TEMPLATES_DIR / name).read_text(encoding="utf-8"))


def _nav(active: str, user: Any) -> str:
    if user is None:
        return ""
    links = "".join(
        f'<a href="{path}"{" aria-current=page" if path == active else ""}>{label}</a>'
        for path, label, role in NAV
        if role_at_least(user.role, role)
    )
    who = f'<span class="who">{html.escape(user.name)} <small>{html.escape(user.role)}</small></span>'
    return f'<nav class="top"><a class="brand" href="/">CampusGuard</a>{links}{who}<button id="logout" type="button">Log out</button></nav>'


def render_page(
    request: Request,
    template: str,
    *,
    title: str,
    script: str,
    active: str = "",
    status_code: int = 200,
    fill: Mapping[str, str] | None = None,
    **data: str,
) -> HTMLResponse:
    """The page ``template`` (a body fragment in ``static/templates``) in the common layout.

    ``data`` becomes ``data-*`` attributes of ``<body>`` (HTML-escaped) for the page's script;
    the user's name and role are always there (``data-user``, ``data-role``), and for a user of the
    campus sign-in whose provider offers RP-initiated logout, where logout goes (``data-end-session``).
    ``fill``: HTML fragments, already escaped by the caller, put in the template's ``$name`` places.
    """
    user = getattr(request.state, "user", None)
    attrs = {"user": user.name, "role": user.role} if user is not None else {}
    end_session = _end_session_url(request, user)
    if end_session:
        attrs["end_session"] = end_session
    attrs.update(data)
    body_attrs = "".join(f' data-{k.replace("_", "-")}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    page = _template("layout.html").substitute(
        title=html.escape(title),
        body_attrs=body_attrs,
        nav=_nav(active, user),
        main=_template(template).substitute(fill or {}),
        script=html.escape(script, quote=True),
    )
    return HTMLResponse(page, status_code=status_code, headers=SECURITY_HEADERS)


def _end_session_url(request: Request, user: Any) -> str | None:
    """The provider's logout address for a user of the campus sign-in, when it offers one."""
    sign_in = getattr(request.app.state, "oidc", None)
    if sign_in is None or user is None:
        return None
    url = sign_in.end_session_url()
    if url is None or console_state(request).users.external_issuer(user.name) != sign_in.config.issuer:
        return None
    return str(url)


def _login_fill(request: Request) -> dict[str, str]:
    """The login page's "Sign in with <name>" link and whether the password form shows."""
    sign_in = getattr(request.app.state, "oidc", None)
    if sign_in is None:
        return {"signin": "", "local_hidden": ""}
    next_path = request.query_params.get("next", "/")
    href = "/auth/oidc/login?" + urlencode({"next": next_path})
    link = (
        f'<a id="oidc-login" class="button signin-provider" href="{html.escape(href, quote=True)}">'
        f"Sign in with {html.escape(sign_in.config.name)}</a>"
    )
    return {"signin": link, "local_hidden": "" if sign_in.config.local_login else " hidden"}


def _not_found(request: Request, message: str) -> HTMLResponse:
    return render_page(
        request,
        "missing.html",
        title="Not found",
        script="nav.js",
        status_code=status.HTTP_404_NOT_FOUND,
        message=message,
    )


def forbidden_page(request: Request, *, needed: str) -> HTMLResponse:
    """The 403 page: the page needs role ``needed``; says which role the user has and whom to ask."""
    user = getattr(request.state, "user", None)
    role = user.role if user is not None else "none"
    return render_page(
        request,
        "forbidden.html",
        title="Not allowed",
        script="nav.js",
        status_code=status.HTTP_403_FORBIDDEN,
        message=f"This page needs the {needed} role. You are logged in as {role}. Ask an admin if you need access.",
    )


@login_router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    """The login form (public)."""
    return render_page(request, "login.html", title="Log in", script="login.js", fill=_login_fill(request))


@router.get("/")
def wall_page(request: Request) -> HTMLResponse:
    """The camera wall: one tile per camera with its live view and status."""
    return render_page(request, "wall.html", title="Cameras", script="wall.js", active="/")


@router.get("/events")
def events_page(request: Request) -> HTMLResponse:
    """The incident timeline: filters, thumbnails, acknowledge; new incidents appear live."""
    return render_page(request, "events.html", title="Incidents", script="events.js", active="/events")


@router.get("/noise")
def noise_page(request: Request) -> HTMLResponse:
    """Where the alarms come from: per rule, zone, camera and hour, incidents per day and the share of
    false and nuisance alarms, worst first, each linking to its incidents."""
    return render_page(request, "noise.html", title="Noise", script="noise.js", active="/noise")


@router.get("/events/{event_id}")
def event_page(event_id: str, request: Request) -> HTMLResponse:
    """One incident: its clip, snapshot, details and review (acknowledge / resolve with a note)."""
    return render_page(
        request, "event.html", title="Incident", script="event.js", active="/events", event_id=event_id[:128]
    )


@router.get("/health")
def health_page(request: Request) -> HTMLResponse:
    """Camera health: each camera's state (can it see, and why not), its recent health incidents, and
    for an admin accepting a moved camera's new view."""
    return render_page(request, "health.html", title="Camera health", script="health.js", active="/health")


@router.get("/zones")
def zones_index(request: Request) -> RedirectResponse:
    """The zone editor of the first camera."""
    names = console_state(request).runtime.camera_names()
    return RedirectResponse(f"/zones/{names[0]}" if names else "/", status.HTTP_303_SEE_OTHER)


@router.get("/zones/{camera}")
def zones_page(camera: str, request: Request) -> HTMLResponse:
    """The zone and line editor on the camera's snapshot (saving needs the admin role)."""
    if camera not in console_state(request).runtime.camera_names():
        return _not_found(request, f"There is no camera {camera!r}.")
    return render_page(request, "zones.html", title=f"Zones of {camera}", script="zones.js", active="/", camera=camera)


def _utc(value: str | None) -> str:
    """An ISO 8601 UTC time as ``YYYY-MM-DD HH:MM UTC`` in a ``<time>`` element (``never`` for none)."""
    if not value:
        return '<span class="muted">never</span>'
    shown = value[:16].replace("T", " ") + " UTC"
    return f'<time datetime="{html.escape(value, quote=True)}">{html.escape(shown)}</time>'


def _account_row(account: Account, me: str, provider_names: Mapping[str, str]) -> str:
    """One row of the users table: name, role (a choice for others), where it signs in, last sign-in,
    created, and the actions (API token; password reset for local accounts; remove for others)."""
    name = html.escape(account.name, quote=True)
    if account.name == me:
        role = f'<span class="badge role-{account.role}">{account.role}</span> <small class="muted">(you)</small>'
    else:
        options = "".join(f'<option value="{r}"{" selected" if r == account.role else ""}>{r}</option>' for r in ROLES)
        role = f'<select class="role" data-action="role" aria-label="Role of {name}">{options}</select>'
    if account.issuer is None:
        source = "Password (local)"
    else:
        provider = html.escape(provider_names.get(account.issuer, "OpenID Provider"))
        groups = ", ".join(account.groups) or "none"
        source = (
            f'{provider} <small class="muted">(OIDC)</small><br><small class="muted source-id">'
            f"{html.escape(account.issuer)} · {html.escape(account.subject or '')}</small><br>"
            f'<small class="muted">role from groups: {html.escape(groups)}</small>'
        )
    actions = '<button type="button" class="quiet" data-action="token">API token</button>'
    if account.issuer is None and account.name != me:
        actions += '<button type="button" class="quiet" data-action="password">Reset password</button>'
    if account.name != me:
        actions += '<button type="button" class="danger" data-action="remove">Remove</button>'
    return (
        f'<tr data-user="{name}" data-source="{account.source}"><td>{html.escape(account.name)}</td>'
        f"<td>{role}</td><td>{source}</td><td>{_utc(account.last_sign_in_at)}</td>"
        f'<td>{_utc(account.created_at)}</td><td class="actions">{actions}</td></tr>'
    )


@router.get("/users", dependencies=[Depends(require_page_role("admin"))])
def users_page(request: Request) -> HTMLResponse:
    """Users (local and made by campus sign-in), their roles, where they sign in and API tokens (admin).

    The rows are rendered here (the page's script only acts on them, and reads them again after a change)."""
    sign_in = getattr(request.app.state, "oidc", None)
    providers = {sign_in.config.issuer: sign_in.config.name} if sign_in is not None else {}
    rows = "".join(
        _account_row(a, request.state.user.name, providers) for a in console_state(request).users.list_accounts()
    )
    return render_page(request, "users.html", title="Users", script="users.js", active="/users", fill={"rows": rows})


@router.get("/audit", dependencies=[Depends(require_page_role("admin"))])
def audit_page(request: Request) -> HTMLResponse:
    """The audit log (admin): filtered by user, action and time, paged, changes shown field by field."""
    return render_page(request, "audit.html", title="Audit log", script="audit.js", active="/audit")
