"""The two public routes of campus sign-in, and the switch that turns password login off.

- ``GET /auth/oidc/login?next=/path``: sets the sealed ``cg_oidc`` cookie (``SameSite=Lax``,
  HttpOnly, ten minutes, path ``/auth/oidc/``) and answers 303 to the provider.
- ``GET /auth/oidc/callback``: the provider's redirect back, a cross-site navigation: the browser
  sends the Lax ``cg_oidc`` cookie but would withhold the Strict session cookie, on this request
  and on any redirect that follows it. So the callback sets the session cookies and answers a small
  page that moves on with a fresh, same-site navigation (``Refresh`` and a link), on which the
  session cookie is sent. A refusal answers a page that says why (403 when the person has no role).

Each sign-in is audited as ``login.oidc`` (with the role, whether the account was made, the claim
values that mapped), each refusal as ``login.oidc.refused`` with the reason and the address.
"""

from __future__ import annotations

import html
import logging

from fastapi import APIRouter, HTTPException, Query, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from campusguard.app.console.identity.auth import CSRF_COOKIE, SESSION_COOKIE, client_address, console_state
from campusguard.app.console.identity.oidc import (
    CALLBACK_PATH,
    LOGIN_PATH,
    OIDC_COOKIE,
    TRANSACTION_TTL_S,
    OidcSignIn,
    SignInRefused,
)
from campusguard.app.console.identity.users import hash_token
from campusguard.app.console.pages import render_page
from campusguard.errors import InvalidInputError

__all__ = ["router", "oidc_of", "password_login_allowed", "COOKIE_PATH"]

log = logging.getLogger(__name__)
router = APIRouter(tags=["auth"], include_in_schema=False)
COOKIE_PATH = "/auth/oidc/"


def oidc_of(request: Request) -> OidcSignIn | None:
    """The app's campus sign-in, or ``None`` when ``console.oidc`` is not configured."""
    return getattr(request.app.state, "oidc", None)


def password_login_allowed(request: Request) -> None:
    """Dependency of the password login: 403 when ``console.oidc.local_login`` is false."""
    sign_in = oidc_of(request)
    if sign_in is not None and not sign_in.config.local_login:
        raise HTTPException(
            status.HTTP_403_FORBIDDEN, f"password login is off on this console; sign in with {sign_in.config.name}"
        )


def _message_page(request: Request, title: str, message: str, status_code: int) -> HTMLResponse:
    return render_page(
        request,
        "signin_message.html",
        title=title,
        script="nav.js",
        status_code=status_code,
        fill={"heading": html.escape(title), "message": html.escape(message)},
    )


def _not_configured(request: Request) -> HTMLResponse:
    return _message_page(request, "Not found", "Campus sign-in is not configured on this console.", 404)


@router.get(LOGIN_PATH)
def oidc_login(request: Request, next_path: str = Query("/", alias="next", max_length=2048)) -> Response:
    """Start a campus sign-in (public): 303 to the provider, with the sealed round-trip cookie."""
    sign_in = oidc_of(request)
    if sign_in is None:
        return _not_configured(request)
    try:
        url, sealed = sign_in.begin(next_path)
    except SignInRefused as exc:
        return _refuse(request, exc)
    response = RedirectResponse(url, status.HTTP_303_SEE_OTHER)
    response.set_cookie(
        OIDC_COOKIE,
        sealed,
        max_age=TRANSACTION_TTL_S,
        httponly=True,
        samesite="lax",
        secure=console_state(request).settings.secure_cookies,
        path=COOKIE_PATH,
    )
    return response


@router.get(CALLBACK_PATH)
def oidc_callback(request: Request) -> Response:
    """The provider's redirect back (public): verify, make or update the user, start a session."""
    sign_in = oidc_of(request)
    if sign_in is None:
        return _not_configured(request)
    state = console_state(request)
    try:
        identity, transaction = sign_in.finish(dict(request.query_params), request.cookies.get(OIDC_COOKIE))
        try:
            mapped = sorted(v for v in identity.values if v in sign_in.config.role_map)
            outcome = state.users.sign_in_external(
                identity.issuer, identity.subject, identity.name, identity.role, groups=mapped
            )
        except InvalidInputError as exc:
            raise SignInRefused(
                str(exc),
                f"You signed in as {identity.name}, but that name belongs to another console account "
                "(a local one, or another person's). Ask the console's administrator.",
                status=403,
                user=identity.name,
            ) from None
    except SignInRefused as exc:
        return _refuse(request, exc)
    token, csrf = state.users.create_session(outcome.user.name, ttl=state.settings.session_ttl)
    if state.provider_sessions is not None:  # re-checked with the provider every console.oidc.recheck_s
        state.provider_sessions.remember(hash_token(token), identity, ttl_s=state.settings.session_ttl.total_seconds())
    request.state.user = outcome.user
    details: dict[str, object] = {
        "address": client_address(request),
        "issuer": identity.issuer,
        "role": outcome.user.role,
        "created": outcome.created,
        "mapped": mapped,
    }
    if outcome.previous_role is not None and outcome.previous_role != outcome.user.role:
        details["previous_role"] = outcome.previous_role
    state.users.audit(outcome.user.name, "login.oidc", outcome.user.name, **details)
    target = transaction.next_path
    response = render_page(
        request,
        "signin_continue.html",
        title="Signed in",
        script="nav.js",
        fill={"target": html.escape(target, quote=True)},
    )
    # a fresh navigation from this page is same-site: the Strict session cookie goes with it
    response.headers["Refresh"] = f"0; url={target}"
    max_age = int(state.settings.session_ttl.total_seconds())
    secure = state.settings.secure_cookies
    response.set_cookie(
        SESSION_COOKIE, token, max_age=max_age, httponly=True, samesite="strict", secure=secure, path="/"
    )
    response.set_cookie(CSRF_COOKIE, csrf, max_age=max_age, httponly=False, samesite="strict", secure=secure, path="/")
    response.delete_cookie(OIDC_COOKIE, path=COOKIE_PATH)
    return response


def _refuse(request: Request, exc: SignInRefused) -> HTMLResponse:
    """The refusal page (why, and the way back), audited with the reason."""
    address = client_address(request)
    console_state(request).users.audit(None, "login.oidc.refused", exc.user, address=address, reason=exc.reason)
    log.warning("campus sign-in refused%s from %s: %s", f" for {exc.user!r}" if exc.user else "", address, exc.reason)
    response = _message_page(request, "Sign-in refused", exc.message, exc.status)
    response.delete_cookie(OIDC_COOKIE, path=COOKIE_PATH)
    return response
