"""The operators' console: `campusguard serve` (HTTP API, auth, pages) on top of the watch pipeline.

Modules:
    `runtime`: `ConsoleRuntime`, the watch pipeline plus live view, clips, event push and metrics.
    `server`: `create_app(runtime, users_db=...)`, the FastAPI app (public routes listed in one place).
    `identity/`: who may use it: sign-in, campus sign-in (OIDC), users (SQLite or the storage's
        PostgreSQL), devices, sessions and tokens, and the auth dependencies (`identity.auth`).
    `api`: the `/api/v1` routers. `pages`: the page routes; `static/`: HTML, CSS and JS.

Needs the ``console`` extra (``pip install 'campusguard[console]'``); the core does not import it.
"""
