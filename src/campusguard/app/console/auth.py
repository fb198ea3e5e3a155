"""Authentication and authorisation of the console: who is calling, may they, and login rate limits.

- A caller is identified by ``Authorization: Bearer <token>`` (a session or API token; no CSRF
  needed: a browser never adds that header by itself) or by the ``cg_session`` cookie. A
  cookie-authenticated write (any method but GET/HEAD/OPTIONS) must also send the session's CSRF
  value in ``X-CSRF-Token`` (403 otherwise); the cookie is ``SameSite=Strict`` too.
- `current_user` is the dependency of the protected API router (401 without valid credentials);
  `page_user` is the pages' (303 to ``/login``); `require_role` / `require_page_role` add the role check.
- `LoginLimiter` counts failed logins per user name and per client address in a sliding window;
  past the limit, logins answer 429 until the window has moved on.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from campusguard.app.console.users import ROLES, Credential, User, UserStore, role_at_least

if TYPE_CHECKING:
    from campusguard.app.console.runtime import ConsoleRuntime

__all__ = [
    "SESSION_COOKIE",
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "ConsoleSettings",
    "ConsoleState",
    "LoginLimiter",
    "LoginRequired",
    "PageForbidden",
    "console_state",
    "current_user",
    "page_user",
    "require_role",
    "require_page_role",
]

SESSION_COOKIE = "cg_session"
CSRF_COOKIE = "cg_csrf"
CSRF_HEADER = "X-CSRF-Token"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

_bearer = HTTPBearer(auto_error=False, description="A session token (from login) or an API token.")
_cookie = APIKeyCookie(name=SESSION_COOKIE, auto_error=False, description="The login session cookie.")


class LoginLimiter:
    """Failed-login counter per user name and per client address (sliding window, in memory).

    Args:
        max_per_user: failures of one user name within ``window_s`` after which it is blocked.
        max_per_address: failures from one address within ``window_s`` after which it is blocked.
        window_s: the window in seconds.
        max_keys: names and addresses remembered (the oldest are forgotten first), so a flood of
            made-up names cannot exhaust memory.
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self,
        *,
        max_per_user: int = 5,
        max_per_address: int = 20,
        window_s: float = 300.0,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_per_user = max_per_user
        self.max_per_address = max_per_address
        self.window_s = window_s
        self._max_keys = max_keys
        self._clock = clock
        self._failures: OrderedDict[tuple[str, str], deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return times

    def retry_after(self, user: str, address: str) -> float | None:
        """Seconds until this user name and address may try again, or ``None`` when they may now."""
        now = self._clock()
        waits = []
        with self._lock:
            for key, limit in ((("user", user), self.max_per_user), (("address", address), self.max_per_address)):
                times = self._recent(key, now)
                if len(times) >= limit:
                    waits.append(times[-limit] + self.window_s - now)
        return max(waits) if waits else None

    def failed(self, user: str, address: str) -> None:
        """Count one failed login."""
        now = self._clock()
        with self._lock:
            for key in (("user", user), ("address", address)):
                times = self._failures.setdefault(key, deque())
                times.append(now)
                self._failures.move_to_end(key)
            while len(self._failures) > self._max_keys:
                self._failures.popitem(last=False)

    def succeeded(self, user: str) -> None:
        """Forget the user name's failures (the address keeps its count)."""
        with self._lock:
            self._failures.pop(("user", user), None)


@dataclass(frozen=True)
class ConsoleSettings:
    """Console options (from the `serve` command line).

    Attributes:
        session_ttl: how long a login session lasts.
        secure_cookies: mark cookies ``Secure`` (set when serving behind TLS).
        max_body_bytes: larger request bodies get 413.
    """

    session_ttl: timedelta = timedelta(hours=12)
    secure_cookies: bool = False
    max_body_bytes: int = 1 << 20


@dataclass
class ConsoleState:
    """What every request handler of one app needs; `create_app` puts it at ``app.state.console``."""

    runtime: ConsoleRuntime
    users: UserStore
    limiter: LoginLimiter
    settings: ConsoleSettings


def console_state(request: Request) -> ConsoleState:
    """The `ConsoleState` of the app serving this request."""
    return request.app.state.console


class LoginRequired(Exception):
    """A page needs a login; the app answers 303 to ``/login?next=<path>``."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.location = "/login?next=" + quote(next_path, safe="/")


def _unauthorised(detail: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, detail, headers={"WWW-Authenticate": "Bearer"})


def _authenticate(request: Request, bearer: HTTPAuthorizationCredentials | None, cookie: str | None) -> Credential:
    """The caller's valid credential (bearer first, then the session cookie), CSRF checked for cookie writes.

    Raises:
        HTTPException: 401 without a valid credential, 403 on a cookie write without the CSRF header.
    """
    users = console_state(request).users
    if bearer is not None:
        credential = users.resolve(bearer.credentials)
        if credential is None:
            raise _unauthorised("invalid or expired token")
    elif cookie:
        credential = users.resolve(cookie)
        if credential is None or credential.kind != "session":
            raise _unauthorised("invalid or expired session; log in again")
        if request.method not in _SAFE_METHODS:
            sent = request.headers.get(CSRF_HEADER, "")
            if not credential.csrf or not hmac.compare_digest(sent.encode(), credential.csrf.encode()):
                raise HTTPException(status.HTTP_403_FORBIDDEN, f"missing or wrong {CSRF_HEADER} header")
    else:
        raise _unauthorised("not authenticated: log in or send Authorization: Bearer <token>")
    request.state.user = credential.user
    request.state.credential = credential
    return credential


def _caller(request: Request, bearer: HTTPAuthorizationCredentials | None, cookie: str | None) -> User:
    """The authenticated user of this request (authenticated once, then kept on ``request.state``)."""
    cached = getattr(request.state, "user", None)
    if cached is not None:
        return cached
    return _authenticate(request, bearer, cookie).user


def current_user(
    request: Request,
    bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
    cookie: str | None = Depends(_cookie),
) -> User:
    """The calling user (dependency of every protected API route): 401 without credentials."""
    return _caller(request, bearer, cookie)


def page_user(
    request: Request,
    bearer: HTTPAuthorizationCredentials | None = Depends(_bearer),
    cookie: str | None = Depends(_cookie),
) -> User:
    """The logged-in user of a page (dependency of every page route): 303 to /login otherwise."""
    try:
        return _caller(request, bearer, cookie)
    except HTTPException as exc:
        if exc.status_code == status.HTTP_401_UNAUTHORIZED:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            raise LoginRequired(target) from exc
        raise


class PageForbidden(Exception):
    """A page needs a higher role than the user's; the app answers with the HTML 403 page."""

    def __init__(self, needed: str, role: str) -> None:
        super().__init__(f"needs role {needed} or higher; you are {role}")
        self.needed = needed
        self.role = role


def _role_check(role: str, who: Callable[..., User], name: str, *, page: bool = False) -> Callable[..., User]:
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}")

    def check(user: User = Depends(who)) -> User:
        if not role_at_least(user.role, role):
            if page:
                raise PageForbidden(role, user.role)
            raise HTTPException(status.HTTP_403_FORBIDDEN, f"needs role {role} or higher; you are {user.role}")
        return user

    check.__name__ = name
    return check


def require_role(role: str) -> Callable[..., User]:
    """A dependency that lets through users of ``role`` or higher (403 otherwise) and returns the user."""
    return _role_check(role, current_user, f"require_{role}")


def require_page_role(role: str) -> Callable[..., User]:
    """Like `require_role` for pages: a lower role gets the 403 page (`PageForbidden`), no login 303 to /login."""
    return _role_check(role, page_user, f"require_page_{role}", page=True)


def client_address(request: Request) -> str:
    """The client's address as the server sees it (behind a proxy: what uvicorn's proxy headers say)."""
    return request.client.host if request.client else "unknown"


def audit(request: Request, action: str, target: str | None = None, **details: Any) -> None:
    """Record a state change by the calling user in the audit log."""
    user = getattr(request.state, "user", None)
    console_state(request).users.audit(None if user is None else user.name, action, target, **details)
