"""Login, logout and who am I.

Failed logins (and wrong present passwords) are counted by the app's `LoginLimiter` for the
client's address (`client_address`: X-Forwarded-For only from a trusted proxy), the account, or the
browser's device cookie (`devices`: set at each successful login) and written to the audit log with
the name tried, the address and the reason, never the password tried.
"""

from __future__ import annotations

import logging
import math

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status

from campusguard.app.console.identity.auth import (
    CSRF_COOKIE,
    SESSION_COOKIE,
    ConsoleState,
    audit,
    client_address,
    console_state,
    current_user,
)
from campusguard.app.console.identity.devices import DEVICE_COOKIE
from campusguard.app.console.identity.users import User, check_user_name
from campusguard.app.console.schemas import LoginRequest, LoginResponse, PasswordChange, UserOut
from campusguard.errors import InvalidInputError

log = logging.getLogger("campusguard.app.console.identity.auth")
DEVICE_COOKIE_PATH = "/api/v1/auth"  # sent only where it counts: login and password change
public_router = APIRouter(tags=["auth"])
router = APIRouter(tags=["auth"])


@public_router.post(
    "/auth/login",
    responses={401: {"description": "Wrong user name or password."}, 429: {"description": "Too many failed logins."}},
)
def login(body: LoginRequest, request: Request, response: Response) -> LoginResponse:
    """Log in: sets the session cookie (HttpOnly, SameSite=Strict), the CSRF cookie and the device
    cookie (``cg_device``, 90 days: this browser signed in as this user); returns the session values.

    A browser with a valid device cookie for the user is not delayed by failures elsewhere."""
    state = console_state(request)
    address = client_address(request)
    device = state.devices.trusted(request.cookies.get(DEVICE_COOKIE), body.username)
    with state.limiter.attempt(body.username):  # concurrent guesses of one name: checked and counted in turn
        _refuse_while_limited(state, body.username, address, "failed logins", device)
        user = state.users.verify_password(body.username, body.password)
        if user is None:
            delay = state.limiter.failed(body.username, address, device)
        else:
            state.limiter.succeeded(body.username, address, device)
    if user is None:
        reason = "wrong password" if state.users.get_user(body.username) is not None else "unknown user"
        _audit_failure(state, "login.failed", body.username, address, reason, delay, device)
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "wrong user name or password")
    state.users.purge_expired()
    token, csrf = state.users.create_session(user.name, ttl=state.settings.session_ttl)
    request.state.user = user
    audit(request, "login", user.name, address=address, known_browser=device is not None)
    max_age = int(state.settings.session_ttl.total_seconds())
    secure = state.settings.secure_cookies
    response.set_cookie(
        SESSION_COOKIE, token, max_age=max_age, httponly=True, samesite="strict", secure=secure, path="/"
    )
    response.set_cookie(CSRF_COOKIE, csrf, max_age=max_age, httponly=False, samesite="strict", secure=secure, path="/")
    response.set_cookie(
        DEVICE_COOKIE,
        state.devices.after_login(request.cookies.get(DEVICE_COOKIE), user.name),
        max_age=state.devices.ttl_s,
        httponly=True,
        samesite="strict",
        secure=secure,
        path=DEVICE_COOKIE_PATH,
    )
    return LoginResponse(token=token, csrf=csrf, user=UserOut(name=user.name, role=user.role))


def _audit_failure(
    state: ConsoleState,
    action: str,
    name: str,
    address: str,
    reason: str,
    delay: float | None,
    device: str | None = None,
) -> None:
    """Record a failed attempt (the name tried, the address, why, whether from a browser that signed
    in as that user before; never the password) and log it."""
    shown = name if _is_user_name(name) else "(not a user name)"
    details: dict[str, object] = {"address": address, "reason": reason, "known_browser": device is not None}
    if delay is not None:
        details["retry_after_s"] = math.ceil(delay)
    state.users.audit(None, action, shown, **details)
    log.warning("%s for %r from %s: %s", action, shown, address, reason)


def _is_user_name(name: str) -> bool:
    try:
        check_user_name(name)
    except InvalidInputError:
        return False
    return True


def _refuse_while_limited(state: ConsoleState, name: str, address: str, what: str, device: str | None) -> None:
    """429 with Retry-After while the limiter holds back ``name`` from ``address`` or this browser
    (``what`` names the failures)."""
    wait = state.limiter.retry_after(name, address, device)
    if wait is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            f"too many {what}; try again in {math.ceil(wait)} s",
            headers={"Retry-After": str(math.ceil(wait))},
        )


@router.post("/auth/logout", status_code=status.HTTP_204_NO_CONTENT)
def logout(request: Request, response: Response, user: User = Depends(current_user)) -> None:
    """End this session (or revoke this API token) and clear the cookies."""
    state = console_state(request)
    state.users.revoke(request.state.credential.token_hash)
    if state.provider_sessions is not None:
        state.provider_sessions.forget(request.state.credential.token_hash)
    audit(request, "logout", user.name, kind=request.state.credential.kind)
    response.delete_cookie(SESSION_COOKIE, path="/")
    response.delete_cookie(CSRF_COOKIE, path="/")


@router.get("/auth/me")
def me(user: User = Depends(current_user)) -> UserOut:
    """The calling user."""
    return UserOut(name=user.name, role=user.role, created_at=user.created_at)


@router.post(
    "/auth/password",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={403: {"description": "The present password is wrong."}},
)
def change_password(body: PasswordChange, request: Request, user: User = Depends(current_user)) -> None:
    """Change your own password; your other login sessions end, this one stays."""
    state = console_state(request)
    address = client_address(request)
    device = state.devices.trusted(request.cookies.get(DEVICE_COOKIE), user.name)
    with state.limiter.attempt(user.name):
        _refuse_while_limited(state, user.name, address, "failed attempts", device)
        wrong = state.users.verify_password(user.name, body.current) is None
        delay = state.limiter.failed(user.name, address, device) if wrong else None
    if wrong:
        _audit_failure(state, "password.failed", user.name, address, "wrong present password", delay, device)
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the present password is wrong")
    credential = request.state.credential
    state.users.set_password(user.name, body.new, keep_token_hash=credential.token_hash)
    audit(request, "password.change", user.name)
