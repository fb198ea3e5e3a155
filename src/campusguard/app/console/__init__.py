"""The operators' console: `campusguard serve` (HTTP API, auth, pages) on top of the watch pipeline.

Modules:
    `runtime`: `ConsoleRuntime`, the watch pipeline plus live view, clips, event push and metrics.
    `server`: `create_app(runtime, users_db=...)`, the FastAPI app (public routes listed in one place).
    `auth`: the auth dependencies (`current_user`, `require_role`, `page_user`), CSRF, login rate limits.
    `identity`: `IdentityStore`, what the console asks of its users store, and `open_identity_store`.
    `users`: `UserTables` (users with argon2 password hashes, hashed tokens, the audit log; the SQL once)
        and `UserStore`, in one SQLite file; `users_postgres`: `PostgresUserStore`, in the storage's
        PostgreSQL, shared by every node with the sign-in state (`login_failures`, `provider_grants`).
    `oidc`: `OidcSignIn`, campus sign-in through an OpenID Provider (PKCE, state, nonce, ID-token checks);
        `oidc_pages`: its two public routes.
    `api`: the `/api/v1` routers. `pages`: the page routes; `static/`: HTML, CSS and JS.

Needs the ``console`` extra (``pip install 'campusguard[console]'``); the core does not import it.
"""
