"""Authentication and authorisation of the console: who is calling, may they, and login rate limits.

- A caller is identified by ``Authorization: Bearer <token>`` (a session or API token; no CSRF
  needed: a browser never adds that header by itself) or by the ``cg_session`` cookie. A
  cookie-authenticated write (any method but GET/HEAD/OPTIONS) must also send the session's CSRF
  value in ``X-CSRF-Token`` (403 otherwise); the cookie is ``SameSite=Strict`` too.
- `current_user` is the dependency of the protected API router (401 without valid credentials);
  `page_user` is the pages' (303 to ``/login``); `require_role` / `require_page_role` add the role check.
- `LoginLimiter` counts failed logins per (user name, address), per address, and per account from
  browsers without a device cookie (`devices`); past a few free failures each further one doubles
  the wait (429 with ``Retry-After``). A browser that signed in as the user before is not held back
  by the others' failures: an attacker elsewhere cannot lock the user out of their own browser.
- `client_address` is the connection's peer; ``X-Forwarded-For`` counts only from a proxy named in
  ``trusted_proxies`` (`resolve_client`: the right-most untrusted address of the chain).
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import secrets
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import APIKeyCookie, HTTPAuthorizationCredentials, HTTPBearer

from campusguard.app.console.identity.devices import DeviceCookies
from campusguard.app.console.identity.login_failures import FailureKey, Failures, FailureTable, MemoryFailures
from campusguard.app.console.identity.oidc_sessions import SessionEnded
from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import ROLES, Credential, User, role_at_least
from campusguard.app.console.media_audit import DownloadLog
from campusguard.errors import InvalidInputError

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
    "MEDIA_HEADERS",
    "ProxyNetwork",
    "address_key",
    "client_address",
    "parse_trusted_proxies",
    "resolve_client",
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
# incident and camera images and clips: never kept by a browser or proxy cache (a shared
# control-room browser would show them after logout); every media route sends these
MEDIA_HEADERS: Mapping[str, str] = MappingProxyType({"Cache-Control": "no-store"})

_bearer = HTTPBearer(auto_error=False, description="A session token (from login) or an API token.")
_cookie = APIKeyCookie(name=SESSION_COOKIE, auto_error=False, description="The login session cookie.")


class LoginLimiter:
    """Failed logins per (user name, address), per address, per account and per trusted browser, each
    answered by a growing delay.

    A key may fail ``free_*`` times without waiting; from that failure on, each failure makes
    the key wait before its next try: ``base_delay_s``, then twice that, four times, ... up to
    ``max_delay_s``. IPv6 addresses count by their /64 (one host usually holds a whole /64).

    Guessing from many addresses is slowed per account (OWASP device cookies): the failures of a
    user name from browsers without a valid device cookie for it (`devices.DeviceCookies`) count
    together; past ``free_per_account`` of them within ``account_window_s`` every further try from
    such a browser waits (``account_base_delay_s``, doubling). A browser that signed in as that user
    before (its device cookie's nonce, ``device``) is not held back by the account, its address or
    the pair: it has its own count (``free_per_pair`` free failures, then the same delays), so no
    attacker can lock the user out of their own browser.

    The counts are kept in a `FailureTable`: this process's memory by default, or the table that
    consoles sharing a PostgreSQL database share (`IdentityStore.login_failures`), so a guess
    spread over several nodes counts on all of them.

    Args:
        free_per_pair: failures of one user name from one address (or one trusted browser) after which the delays start.
        free_per_address: failures from one address, all user names together, after which the delays start.
        free_per_account: failures of one user name from untrusted browsers, all addresses together,
            within ``account_window_s``, after which the delays start.
        account_window_s: the window of the per-account count.
        base_delay_s: the first delay in seconds; each further failure doubles it.
        account_base_delay_s: the first per-account delay.
        max_delay_s: the longest delay.
        forget_after_s: a key without a failure for this long is forgotten (at least ``max_delay_s``).
        max_keys: keys remembered; past it the least recently failed key that is not waiting is forgotten
            first (a waiting one only when every key waits), so a flood of made-up names or addresses
            cannot exhaust memory nor free a blocked key.
        failures: where the counts are kept (default: a new `MemoryFailures`).
        clock: seconds (a parameter for tests; default: the table's clock, monotonic in memory).
    """

    def __init__(
        self,
        *,
        free_per_pair: int = 5,
        free_per_address: int = 20,
        free_per_account: int = 10,
        account_window_s: float = 900.0,
        base_delay_s: float = 1.0,
        account_base_delay_s: float = 2.0,
        max_delay_s: float = 900.0,
        forget_after_s: float = 3600.0,
        max_keys: int = 10_000,
        failures: FailureTable | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if min(free_per_pair, free_per_address, free_per_account) < 1:
            raise ValueError("free_* must be >= 1")
        if base_delay_s <= 0 or account_base_delay_s <= 0 or max_delay_s < max(base_delay_s, account_base_delay_s):
            raise ValueError("0 < base_delay_s, account_base_delay_s <= max_delay_s")
        if forget_after_s < max(max_delay_s, account_window_s) or max_keys < 2 or account_window_s <= 0:
            raise ValueError("forget_after_s must be >= max_delay_s and account_window_s > 0, and max_keys >= 2")
        self.free_per_pair = free_per_pair
        self.free_per_address = free_per_address
        self.free_per_account = free_per_account
        self.account_window_s = account_window_s
        self.base_delay_s = base_delay_s
        self.account_base_delay_s = account_base_delay_s
        self.max_delay_s = max_delay_s
        self.forget_after_s = forget_after_s
        self._max_keys = max_keys
        if failures is None:
            failures = MemoryFailures() if clock is None else MemoryFailures(clock=clock)
        self.failures = failures
        self._clock = clock or failures.clock
        self._account_locks = tuple(threading.Lock() for _ in range(64))

    def __len__(self) -> int:
        """Keys remembered now."""
        return len(self.failures)

    def attempt(self, user: str) -> threading.Lock:
        """A lock to hold around one login attempt of ``user``: check `retry_after`, verify the password,
        then count `failed` or `succeeded`, so that concurrent guesses cannot all pass the check before
        the first failure is counted (one of 64 locks, chosen by the name: bounded memory). The lock is
        this process's: consoles sharing their counts may each have one guess of a name under way."""
        return self._account_locks[hash(user[:64]) % len(self._account_locks)]

    @staticmethod
    def _keys(user: str, address: str, device: str | None = None) -> tuple[FailureKey, ...]:
        if device is not None:  # a browser that signed in as this user: only its own count
            return (("device", user[:64], device[:64]),)
        where = address_key(address)
        return ("pair", user[:64], where), ("address", where), ("account", user[:64])

    def retry_after(self, user: str, address: str, device: str | None = None) -> float | None:
        """Seconds until this user name may try again from this address (or trusted browser ``device``),
        or ``None`` when it may now."""
        now = self._clock()
        waits = [until - now for until in self.failures.blocked_until(self._keys(user, address, device))]
        wait = max(waits, default=0.0)
        return wait if wait > 0 else None

    def _over(self, key: FailureKey, entry: Failures, now: float) -> tuple[int, float]:
        """How many failures past the free ones this key is, and its first delay."""
        if key[0] == "account":
            times = entry.times
            if times is None or times.maxlen is None:
                times = entry.times = deque(times or (), maxlen=self.free_per_account + 64)
            times.append(now)
            while times and now - times[0] >= self.account_window_s:
                times.popleft()
            return len(times) - self.free_per_account, self.account_base_delay_s
        free = self.free_per_address if key[0] == "address" else self.free_per_pair
        return entry.count - free, self.base_delay_s

    def failed(self, user: str, address: str, device: str | None = None) -> float | None:
        """Count one failed login; the delay it starts (seconds), or ``None`` while failures are free."""
        now = self._clock()

        def step(key: FailureKey, entry: Failures) -> float | None:
            entry.count += 1
            entry.last = now
            over, base = self._over(key, entry, now)
            if over < 0:
                return None
            delay = min(base * 2.0 ** min(over, 62), self.max_delay_s)
            entry.blocked_until = max(entry.blocked_until, now + delay)
            return delay

        delays = self.failures.record(
            self._keys(user, address, device),
            step,
            now=now,
            forget_before=now - self.forget_after_s,
            max_keys=self._max_keys,
        )
        return max((d for d in delays if d is not None), default=None)

    def succeeded(self, user: str, address: str, device: str | None = None) -> None:
        """Forget the failures of this user name from this address or trusted browser (the address and
        the account keep their own counts: an attacker elsewhere goes on waiting)."""
        self.failures.forget(self._keys(user, address, device)[0])


def address_key(address: str) -> str:
    """What the limits count an address as: an IPv4 address, an IPv6 /64, or the text as given."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_trusted_proxies(values: Iterable[str]) -> tuple[ProxyNetwork, ...]:
    """Reverse-proxy addresses or networks (``10.0.0.1``, ``10.0.0.0/24``, ``::1``; comma-separated allowed).

    Raises:
        InvalidInputError: naming the value that is not an address or network.
    """
    networks: list[ProxyNetwork] = []
    for value in [values] if isinstance(values, str) else values:
        for part in value.split(","):
            text = part.strip()
            if not text:
                continue
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                raise InvalidInputError(
                    f"--trusted-proxy {text!r} is not an IP address or network (e.g. 127.0.0.1, 10.0.0.0/24, ::1)"
                ) from None
    return tuple(networks)


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _trusted(ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None, trusted: Sequence[ProxyNetwork]) -> bool:
    return ip is not None and any(ip.version == net.version and ip in net for net in trusted)


def resolve_client(peer: str, forwarded_for: Sequence[str], trusted: Sequence[ProxyNetwork]) -> str:
    """The client's address: ``peer``, or, when ``peer`` is a trusted proxy, the right-most untrusted address
    of ``X-Forwarded-For`` (every header line, in order).

    Each trusted proxy appends the address it saw, so the chain is read from the right; the first
    address not in ``trusted`` is the client, whatever the client itself wrote further left. An
    entry that is not an address ends the walk at the last trusted hop. Pure; no proxy is trusted
    unless named.
    """
    if not trusted or not _trusted(_ip(peer), trusted):
        return peer
    client = peer
    hops = [hop for line in forwarded_for for hop in line.split(",")]
    for hop in reversed(hops):
        ip = _ip(hop)
        if ip is None:
            break
        client = str(ip)
        if not _trusted(ip, trusted):
            break
    return client


@dataclass(frozen=True)
class ConsoleSettings:
    """Console options (from the `serve` command line).

    Attributes:
        session_ttl: how long a login session lasts.
        secure_cookies: mark cookies ``Secure`` (set when serving behind TLS).
        max_body_bytes: larger request bodies get 413.
        trusted_proxies: reverse proxies whose ``X-Forwarded-For`` is believed (none by default).
    """

    session_ttl: timedelta = timedelta(hours=12)
    secure_cookies: bool = False
    max_body_bytes: int = 1 << 20
    trusted_proxies: tuple[ProxyNetwork, ...] = ()


@dataclass
class ConsoleState:
    """What every request handler of one app needs; `create_app` puts it at ``app.state.console``."""

    runtime: ConsoleRuntime
    users: IdentityStore
    limiter: LoginLimiter
    settings: ConsoleSettings
    devices: DeviceCookies = field(default_factory=lambda: DeviceCookies(secrets.token_bytes(32)))
    downloads: DownloadLog = field(default_factory=DownloadLog)
    provider_sessions: Any = None
    """`campusguard.app.console.identity.oidc_sessions.ProviderSessions` when campus sign-in is configured."""


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
    sessions = console_state(request).provider_sessions
    if sessions is not None:  # a campus sign-in's session: the provider is asked again now and then
        try:
            credential = dataclasses.replace(credential, user=sessions.check(credential))
        except SessionEnded as exc:
            raise _unauthorised(f"your campus sign-in ended ({exc}); sign in again") from None
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
    """The client's address: the connection's peer, or behind a trusted proxy the address it forwarded.

    ``X-Forwarded-For`` counts only when the peer is one of ``ConsoleSettings.trusted_proxies``
    (`resolve_client`); the login limits and the audit log use this address.
    """
    cached = getattr(request.state, "client_address", None)
    if cached is not None:
        return str(cached)
    peer = request.client.host if request.client else "unknown"
    trusted = console_state(request).settings.trusted_proxies
    address = resolve_client(peer, request.headers.getlist("x-forwarded-for"), trusted)
    request.state.client_address = address
    return address


def audit(request: Request, action: str, target: str | None = None, **details: Any) -> None:
    """Record a state change by the calling user in the audit log."""
    user = getattr(request.state, "user", None)
    console_state(request).users.audit(None if user is None else user.name, action, target, **details)
