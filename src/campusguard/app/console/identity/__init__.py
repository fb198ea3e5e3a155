"""Who may use the console: sign-in, campus sign-in (OIDC), users, devices, sessions and tokens.

Modules (this ``__init__`` imports none of them):
    `auth`: the request dependencies (`current_user`, `require_role`, `page_user`), CSRF, `LoginLimiter`,
        the client address behind trusted proxies, and `ConsoleState` (what every handler reads).
    `store`: `IdentityStore`, what the console asks of its users store, and `open_identity_store`.
    `users`: `UserTables` (users with argon2 password hashes, hashed tokens, the audit log; the SQL once)
        and `UserStore`, in one SQLite file; `postgres`: `PostgresUserStore`, in the storage's
        PostgreSQL, shared by every node with the sign-in state (`PostgresFailures`, `PostgresGrants`).
    `devices`: signed ``cg_device`` cookies (browsers that signed in before).
    `login_failures`: where the login limits count (memory, or the shared table).
    `provider_grants`: where campus sign-in grants wait for their re-check.
    `oidc`: `OidcSignIn`, campus sign-in through an OpenID Provider (PKCE, state, nonce, ID-token checks);
        `oidc_pages`: its two public routes; `oidc_sessions`: its sessions re-checked with the provider.
    `streams`: `StreamGuard`, open streams (live view, events) that end with their caller's session.
"""
