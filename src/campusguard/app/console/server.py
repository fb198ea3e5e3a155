"""The console's FastAPI app: `create_app(runtime, users_db=...)`.

Protected by default. The only routes open without credentials are listed in `PUBLIC_ROUTES`, and
they are the only ones outside the two protected routers: every API route (and ``/metrics``) sits
under ``APIRouter(dependencies=[Depends(current_user)])`` (401 without credentials), every page
under ``Depends(page_user)`` (303 to ``/login``). `create_app` refuses to build an app in which any
other route is reachable without one of those dependencies, so a new route cannot be left open.

Handlers are thin and blocking work (SQLite, argon2, JPEG, files) runs in the thread pool (sync
routes, ``run_in_threadpool``). Bodies over ``max_body_bytes`` get 413; malformed JSON 422; unknown
errors a one-line 500 without a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from starlette.routing import Mount

from campusguard.app.console import api, pages
from campusguard.app.console.identity import oidc_pages
from campusguard.app.console.identity.auth import (
    SESSION_COOKIE,
    ConsoleSettings,
    ConsoleState,
    LoginLimiter,
    LoginRequired,
    PageForbidden,
    console_state,
    current_user,
    page_user,
    parse_trusted_proxies,
)
from campusguard.app.console.identity.devices import DeviceCookies
from campusguard.app.console.identity.oidc import CALLBACK_PATH, LOGIN_PATH, build_oidc
from campusguard.app.console.identity.oidc_sessions import ProviderSessions
from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import IdentityUnavailableError, User, UserStore
from campusguard.app.console.schemas import Health, Ready
from campusguard.app.events.protocols import StoreUnavailableError

if TYPE_CHECKING:
    from campusguard.app.console.runtime import ConsoleRuntime

__all__ = ["create_app", "PUBLIC_ROUTES", "API_PREFIX", "BodySizeLimit", "check_routes_protected", "app_routes"]

log = logging.getLogger(__name__)

API_PREFIX = "/api/v1"
# the one list of what answers without credentials: (method, path); /static/* is the static mount
PUBLIC_ROUTES: frozenset[tuple[str, str]] = frozenset(
    {
        ("GET", "/healthz"),
        ("GET", "/readyz"),
        ("GET", "/login"),
        ("POST", f"{API_PREFIX}/auth/login"),
        ("GET", LOGIN_PATH),  # campus sign-in (OIDC): to the provider ...
        ("GET", CALLBACK_PATH),  # ... and back
        ("GET", "/static"),
    }
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodySizeLimit:
    """ASGI middleware: 413 for a request body over ``max_bytes`` (declared or streamed), 400 for a bad length."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None:
            if not declared.isdigit():
                await JSONResponse({"detail": "invalid Content-Length"}, status.HTTP_400_BAD_REQUEST)(
                    scope, receive, send
                )
                return
            if int(declared) > self.max_bytes:
                await self._too_large(scope, receive, send)
                return
        received = 0
        started = rejected = False

        async def counting_receive() -> Message:
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    # answer 413 now; the app sees the client gone and its own answer is dropped
                    rejected = True
                    if not started:
                        await self._too_large(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if rejected:
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except Exception:
            if not rejected:
                raise

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse({"detail": f"request body larger than {self.max_bytes} bytes"}, 413)
        await response(scope, receive, send)


# sent with every answer that does not set them itself (pages set a stricter policy of their own)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)


HSTS = (b"strict-transport-security", b"max-age=31536000")
"""Sent when the console's ``public_url`` is https: browsers then never try it over plain http."""


class SecurityHeaders:
    """ASGI middleware: `SECURITY_HEADERS` on every HTTP response (and `HSTS` with ``hsts``), and
    ``no-store`` on API JSON."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], hsts: bool = False) -> None:
        self.app = app
        self.headers = (*SECURITY_HEADERS, HSTS) if hsts else SECURITY_HEADERS

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_api = str(scope.get("path", "")).startswith(API_PREFIX)

        async def add_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in self.headers if k not in present]
                if is_api and b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, add_headers)


def _health_router() -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    def healthz() -> Health:
        """The process is up (public)."""
        return Health()

    @router.get(
        "/readyz",
        responses={503: {"model": Ready, "description": "No camera produces frames, or a disk is full."}},
    )
    def readyz(request: Request) -> Response:
        """Some camera produced a frame in the last few seconds and no volume written to is full:
        200, else 503. Public, and then it says only ``{"ready": true|false}``: the camera ids and
        the brokers' addresses are a map of the site. A signed-in caller (session or token) also
        gets the reasons, the cameras that are not live (offline, reconnecting, ...) and each MQTT
        sink's broker with whether it is connected; an operator or admin also each full volume's
        path, free bytes and last error (others read ``disk full``)."""
        runtime = console_state(request).runtime
        problems = [] if runtime.ready() else ["no camera produced a frame recently"]
        disk = runtime.disk_problems()
        role = _caller_role(request)
        if disk:
            problems += disk if role in ("operator", "admin") else ["disk full"]
        ready = not problems
        code = status.HTTP_200_OK if ready else status.HTTP_503_SERVICE_UNAVAILABLE
        if role is None:
            return JSONResponse({"ready": ready}, code)
        body = Ready(
            ready=ready,
            problems=problems,
            mqtt_connected=runtime.mqtt_connected() or None,
            cameras_down=runtime.cameras_down() or None,
        )
        return JSONResponse(body.model_dump(exclude_defaults=True), code)

    return router


def _caller_role(request: Request) -> str | None:
    """The role of a public route's caller with a valid bearer token or session cookie, else ``None``."""
    header = request.headers.get("authorization", "")
    token = header[7:].strip() if header[:7].lower() == "bearer " else request.cookies.get(SESSION_COOKIE, "")
    credential = console_state(request).users.resolve(token) if token else None
    return None if credential is None else credential.user.role


def _root_protected_router() -> APIRouter:
    """Protected routes outside /api/v1: metrics and the OpenAPI schema."""
    router = APIRouter()

    @router.get("/metrics", tags=["metrics"], response_class=Response, responses={200: {"content": {"text/plain": {}}}})
    def metrics(request: Request, user: User = Depends(current_user)) -> Response:
        """Prometheus metrics (``campusguard_*``); needs auth (a bearer API token works). A viewer's
        scrape names full volumes by number, an operator's or admin's by their path."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        runtime = console_state(request).runtime
        registry = runtime.registry if user.role in ("operator", "admin") else runtime.viewer_registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    @router.get(f"{API_PREFIX}/openapi.json", include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        return JSONResponse(request.app.openapi())

    return router


def app_routes(app: FastAPI) -> list[Any]:
    """Every route of the app, flattened, with its effective path, methods and dependencies.

    Recent FastAPI versions keep an included router as one nested entry of ``app.routes``;
    `fastapi.routing.iter_route_contexts` (where it exists) flattens them.
    """
    import fastapi.routing

    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    return list(flatten(app.routes)) if flatten is not None else list(app.routes)


def route_kind(route: Any) -> type:
    """The class of the route as declared (`APIRoute`, `Mount`, ...), seen through FastAPI's route contexts."""
    return type(getattr(route, "original_route", route))


def check_routes_protected(app: FastAPI) -> None:
    """Raise if a route answers without auth but is not in `PUBLIC_ROUTES` (called by `create_app`)."""
    guards = {current_user, page_user}
    open_routes = []
    for route in app_routes(app):
        kind = route_kind(route)
        if issubclass(kind, Mount):
            if ("GET", route.path) not in PUBLIC_ROUTES:
                open_routes.append(f"mount {route.path}")
            continue
        # a plain Starlette route (or websocket) has no FastAPI dependencies: it is open unless listed
        if issubclass(kind, APIRoute) and {d.dependency for d in route.dependencies} & guards:
            continue
        methods = sorted(getattr(route, "methods", None) or {"GET"})
        open_routes += [f"{m} {route.path}" for m in methods if (m, route.path) not in PUBLIC_ROUTES]
    if open_routes:
        raise RuntimeError(f"routes without auth that are not in PUBLIC_ROUTES: {', '.join(open_routes)}")


def _error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, exc: LoginRequired) -> Response:
        return RedirectResponse(exc.location, status.HTTP_303_SEE_OTHER)

    @app.exception_handler(PageForbidden)
    async def page_forbidden(request: Request, exc: PageForbidden) -> Response:
        return pages.forbidden_page(request, needed=exc.needed)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        # never echo the input back: it may be a password
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
            for e in exc.errors()
        ]
        return JSONResponse({"detail": errors}, 422)

    @app.exception_handler(StoreUnavailableError)
    async def store_unavailable(request: Request, exc: StoreUnavailableError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {"detail": "the event store is unavailable; try again shortly"},
            status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(IdentityUnavailableError)
    async def identity_unavailable(request: Request, exc: IdentityUnavailableError) -> Response:
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {"detail": "the users database is unavailable; try again shortly"},
            status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc, exc_info=exc)
        return JSONResponse({"detail": "internal error"}, status.HTTP_500_INTERNAL_SERVER_ERROR)


def create_app(
    runtime: ConsoleRuntime,
    *,
    users_db: str | Path | IdentityStore,
    session_ttl: timedelta = timedelta(hours=12),
    secure_cookies: bool = False,
    max_body_bytes: int = 1 << 20,
    limiter: LoginLimiter | None = None,
    password_hasher: Any = None,
    trusted_proxies: Sequence[str] = (),
) -> FastAPI:
    """The console app over a (started or not) runtime.

    Args:
        runtime: the `ConsoleRuntime` (pipeline, store, live view, zones, metrics).
        users_db: the users database file, or an open `IdentityStore` (`open_identity_store`: the
            site's PostgreSQL when its storage is one, shared with the other nodes).
        session_ttl: login session lifetime.
        secure_cookies: send cookies only over HTTPS (set when behind a TLS proxy); on by itself,
            with HSTS, when the config's ``console.public_url`` is https.
        max_body_bytes: request body limit (413 above).
        limiter: failed-login limits (default: 5 free failures per user name and address, 20 per
            address, then a delay that doubles with each failure, from 1 s up to 15 minutes; 10 per
            account within 15 minutes from browsers without its device cookie, then from 2 s).
            Failures are counted where the identity store keeps them (in PostgreSQL, shared by the
            nodes); the device-cookie key too (SQLite: beside the file, ``<users db>.device-key``).
        password_hasher: an argon2 ``PasswordHasher`` for a new `UserStore` (tests use cheap parameters).
        trusted_proxies: addresses or networks of reverse proxies whose ``X-Forwarded-For`` is believed
            (``--trusted-proxy``); none by default, not even 127.0.0.1.

    Campus sign-in (OIDC) is configured by the config's ``console`` section (`build_oidc`).

    Raises:
        InvalidInputError: a trusted proxy that is not an address or network, or the OIDC client
            secret's environment variable is not set.
    """
    proxies = parse_trusted_proxies(trusted_proxies)
    public_url = runtime.loaded.config.console.public_url
    https = public_url is not None and public_url.lower().startswith("https://")
    secure_cookies = secure_cookies or https
    users = UserStore(users_db, password_hasher=password_hasher) if isinstance(users_db, str | Path) else users_db
    # the console section's campus sign-in, if any (its round trip sealed with the nodes' shared key, if any)
    oidc = build_oidc(runtime.loaded.config.console, seal_key=users.sign_in_seal_key())
    app = FastAPI(
        title="CampusGuard console API",
        version="1",
        description="Cameras, incidents, zones and users of a CampusGuard watch. Every route but login, "
        "/healthz and /readyz needs `Authorization: Bearer <token>` or the session cookie "
        "(with `X-CSRF-Token` on writes).",
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.console = ConsoleState(
        runtime=runtime,
        users=users,
        # "is None", not "or": a limiter with no key yet has len() 0 and would be replaced
        limiter=limiter if limiter is not None else LoginLimiter(failures=users.login_failures()),
        settings=ConsoleSettings(
            session_ttl=session_ttl,
            secure_cookies=secure_cookies,
            max_body_bytes=max_body_bytes,
            trusted_proxies=proxies,
        ),
        devices=DeviceCookies(users.device_key()),
    )
    app.state.oidc = oidc
    if oidc is not None:
        app.state.console.provider_sessions = ProviderSessions(
            oidc, users, recheck_s=oidc.config.recheck_s, grants=users.provider_grants()
        )
    _error_handlers(app)

    # public: PUBLIC_ROUTES and nothing else
    app.include_router(_health_router())
    app.include_router(api.public_router, prefix=API_PREFIX, dependencies=[Depends(oidc_pages.password_login_allowed)])
    app.include_router(pages.login_router)
    app.include_router(oidc_pages.router)
    app.mount("/static", StaticFiles(directory=pages.STATIC_DIR), name="static")

    # protected: everything else
    protected = APIRouter(dependencies=[Depends(current_user)])
    protected.include_router(api.router, prefix=API_PREFIX)
    protected.include_router(_root_protected_router())
    app.include_router(protected)
    app.include_router(pages.router, dependencies=[Depends(page_user)])

    check_routes_protected(app)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes)
    app.add_middleware(SecurityHeaders, hsts=https)
    return app
