"""`PostgresUserStore`: the console's identity on a PostgreSQL server, shared by every console of a site.

When the config's storage is PostgreSQL, every node (``campusguard serve CONFIG --node NAME``)
keeps its users, sessions, API tokens and audit log in the same database, so a session made on
one node resolves on every other one, a revocation on one is seen by all at their next request,
and a plain load balancer may send a browser to any node. What sign-in needs besides is shared
too: the device-cookie key and the key that seals the campus sign-in's round trip
(``console_secrets``), the failed-login counts (`PostgresFailures`: a guess spread over the
nodes is limited as one), and the campus sign-in's grants (`PostgresGrants`). The grants hold
the provider's access and refresh tokens: in this mode they are in the database (a restart no
longer ends those sessions); a refresh token of a confidential client is useless without the
client secret, which stays in each node's environment.

The operations are `UserTables`' (the same SQL text as SQLite's, spelled by `POSTGRES`); times
are ISO-8601 UTC text as in SQLite, so both stores read rows the same way.

Schema: tables ``console_*`` beside the event store's (``events``, ``event_steps``,
``campusguard_schema``) in the first schema of the ``search_path``, and the version table
``identity_schema_version`` (one row per applied migration). Migrations are applied in one
transaction at open under an advisory lock of their own, so nodes starting together migrate
once; a database written by a newer schema is refused.

Connection: one `PgSession` (as every PostgreSQL component's: one connection in autocommit mode,
``synchronous_commit = on``, shared by the store's threads). A read, or a transaction that could not
begin, reconnects and tries again with the storage's back-off (`RetryPolicy`) until its budget is
spent, then raises `IdentityUnavailableError` (the console answers 503). A transaction whose
connection is lost after it began is not repeated: it raises `IdentityUnavailableError` and the
caller tries again.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from campusguard.app.console.identity.login_failures import FailureKey, Failures, FailureStep
from campusguard.app.console.identity.oidc import Identity, ProviderGrant
from campusguard.app.console.identity.provider_grants import TrackedGrant
from campusguard.app.console.identity.users import IdentityUnavailableError, Spelled, SqlDialect, Statements, UserTables
from campusguard.app.events.pgsession import PgSession, RetryPolicy, apply_migrations
from campusguard.errors import InvalidInputError, MissingDependencyError

try:
    import psycopg
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "psycopg is not installed; install it with: pip install 'campusguard[postgres]'"
    ) from _exc

__all__ = [
    "PostgresUserStore",
    "PostgresFailures",
    "PostgresGrants",
    "POSTGRES",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "VERSION_TABLE",
]

T = TypeVar("T")

VERSION_TABLE = "identity_schema_version"
_MIGRATION_LOCK = 0x6367_6964_656E_7469  # "cgidenti": the advisory lock of the identity's migrations
_SERIAL_LOCK = 0x6367_7573_6572_7321  # "cgusers!": the advisory lock of checks that read, then write

POSTGRES = SqlDialect(
    "%s",
    (
        ("users", "console_users"),
        ("tokens", "console_tokens"),
        ("audit", "console_audit"),
        ("oidc_links", "console_oidc_links"),
    ),
)

_SCHEMA_V1 = """
CREATE TABLE console_users (
    name            TEXT PRIMARY KEY,
    role            TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash   TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    last_sign_in_at TEXT
);
CREATE TABLE console_tokens (
    token_hash TEXT PRIMARY KEY,
    user_name  TEXT NOT NULL REFERENCES console_users (name) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'api')),
    label      TEXT,
    csrf       TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX console_tokens_user ON console_tokens (user_name);
CREATE INDEX console_tokens_expires ON console_tokens (expires_at);
CREATE TABLE console_audit (
    id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    time      TEXT NOT NULL,
    user_name TEXT,
    action    TEXT NOT NULL,
    target    TEXT,
    details   TEXT NOT NULL
);
CREATE INDEX console_audit_time ON console_audit (time);
CREATE INDEX console_audit_target ON console_audit (target);
CREATE TABLE console_oidc_links (
    issuer        TEXT NOT NULL,
    subject       TEXT NOT NULL,
    user_name     TEXT NOT NULL UNIQUE REFERENCES console_users (name) ON DELETE CASCADE,
    linked_at     TEXT NOT NULL,
    mapped_groups TEXT NOT NULL DEFAULT '[]',
    PRIMARY KEY (issuer, subject)
);
CREATE TABLE console_secrets (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE console_login_failures (
    key           TEXT PRIMARY KEY,
    count         BIGINT NOT NULL,
    last          DOUBLE PRECISION NOT NULL,
    blocked_until DOUBLE PRECISION NOT NULL,
    times         DOUBLE PRECISION[]
);
CREATE INDEX console_login_failures_last ON console_login_failures (last);
CREATE TABLE console_oidc_grants (
    token_hash TEXT PRIMARY KEY REFERENCES console_tokens (token_hash) ON DELETE CASCADE,
    identity   TEXT NOT NULL,
    next_check DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)
"""

MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1}
"""Migration N brings the identity tables from schema N-1 to N (numbered on their own: SQLite's
users file counts 3 for the same users, tokens, audit and links, which PostgreSQL has from 1)."""
SCHEMA_VERSION = max(MIGRATIONS)

_DEVICE_KEY = "device-cookies"
_SEAL_KEY = "oidc-transaction-seal"


class PostgresUserStore(UserTables):
    """The console's identity (`UserTables`) on a PostgreSQL server; safe to share across threads
    (one connection, locked) and across processes and machines (the database is the one truth).

    Args:
        url: ``postgresql://user@host:port/database`` (as ``storage.postgresql``; the password from
            ``PGPASSWORD`` or ``~/.pgpass``; ``?options=-csearch_path%3Dname`` picks the schema).
        password_hasher: as `UserTables`.
        retry: the back-off of calls whose connection failed (the storage's ``retry``).

    Raises:
        IdentityUnavailableError: the server does not answer (one attempt at open).
        InvalidInputError: the URL is malformed, the tables were written by a newer schema, a
            ``console_users`` table exists that CampusGuard did not create, or the role may not
            create the tables.
    """

    _integrity_errors = (psycopg.IntegrityError,)

    def __init__(self, url: str, *, password_hasher: Any = None, retry: RetryPolicy | None = None) -> None:
        super().__init__(password_hasher=password_hasher)
        self._session = PgSession(
            url,
            what="PostgreSQL identity store",
            retry=retry,
            unavailable=IdentityUnavailableError,
            application_name="campusguard-console",
        )
        self.url, self.display = url, self._session.display
        self._keys: dict[str, bytes] = {}
        self._session.open(self._migrate)

    def _run(self, what: str, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`PgSession.run`: ``op`` may run more than once, so it is one statement or its own transaction
        (``with conn.transaction()``)."""
        return self._session.run(what, op)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._session.close()

    def __enter__(self) -> PostgresUserStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # what UserTables runs on ------------------------------------------------------------------
    @contextlib.contextmanager
    def _transaction(self, *, serial: bool = False) -> Iterator[Statements]:
        """One transaction, committed on leaving; ``serial``: under the advisory lock every node's
        serial transactions take (a check that reads, then writes, such as "not the last admin")."""
        lock = _SERIAL_LOCK if serial else None
        with self._session.transaction("starting a transaction", advisory_lock=lock) as conn:
            yield Spelled(conn, POSTGRES)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        text = POSTGRES(sql)
        return self._run("reading console users", lambda c: [tuple(r) for r in c.execute(text, args).fetchall()])

    # schema -----------------------------------------------------------------------------------
    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Refuse a schema that is not ours, then apply the missing migrations (`apply_migrations`),
        all in one transaction under the migrations' advisory lock."""
        where = f"console users in {self.display}"
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))  # one opener migrates
            row = conn.execute(
                "SELECT current_schema(), to_regclass(format('%%I.%%I', current_schema(), %s::text)) IS NOT NULL, "
                "to_regclass(format('%%I.console_users', current_schema())) IS NOT NULL",
                (VERSION_TABLE,),
            ).fetchone()
            if row is None or row[0] is None:
                raise InvalidInputError(f"{where}: no schema of the search_path exists or may be used by this role")
            has_versions, has_users = bool(row[1]), bool(row[2])
            if not has_versions and has_users:
                raise InvalidInputError(
                    f"{self.display} already has a console_users table not created by CampusGuard; "
                    "use another database or schema (search_path)"
                )
            apply_migrations(conn, version_table=VERSION_TABLE, lock=_MIGRATION_LOCK, migrations=MIGRATIONS, what=where)

    # shared sign-in state ---------------------------------------------------------------------
    def _shared_key(self, name: str) -> bytes:
        """The 32-byte key ``name`` of ``console_secrets``: made by the first node that asks, then kept."""
        if name not in self._keys:

            def op(conn: psycopg.Connection[Any]) -> bytes:
                conn.execute(
                    "INSERT INTO console_secrets (name, value) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                    (name, secrets.token_bytes(32)),
                )
                row = conn.execute("SELECT value FROM console_secrets WHERE name = %s", (name,)).fetchone()
                assert row is not None
                return bytes(row[0])

            self._keys[name] = self._run(f"reading the key {name}", op)
        return self._keys[name]

    def device_key(self) -> bytes:
        """The device-cookie key every node signs and checks with (``console_secrets``)."""
        return self._shared_key(_DEVICE_KEY)

    def sign_in_seal_key(self) -> bytes:
        """The key every node seals the campus sign-in's round trip with: a sign-in begun on one node
        may come back to another."""
        return self._shared_key(_SEAL_KEY)

    def login_failures(self) -> PostgresFailures:
        """The failed-login counts every node shares."""
        return PostgresFailures(self)

    def provider_grants(self) -> PostgresGrants:
        """The campus sign-in's grants every node shares."""
        return PostgresGrants(self)


def _key_text(key: FailureKey) -> str:
    return json.dumps(list(key), separators=(",", ":"))


class PostgresFailures:
    """The sign-in limiter's `FailureTable` in ``console_login_failures``: every node counts into it,
    on the wall clock. A failure's keys are changed in one transaction, their rows locked in key
    order (two nodes counting the same keys wait for each other, never deadlock); forgetting old
    keys skips rows another node holds."""

    def __init__(self, store: PostgresUserStore, *, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.clock = clock

    def __len__(self) -> int:
        row = self._store._run(
            "counting failed logins", lambda c: c.execute("SELECT COUNT(*) FROM console_login_failures").fetchone()
        )
        return int(row[0]) if row else 0

    def blocked_until(self, keys: Sequence[FailureKey]) -> list[float]:
        texts = [_key_text(k) for k in keys]
        rows = self._store._run(
            "reading failed logins",
            lambda c: c.execute(
                "SELECT blocked_until FROM console_login_failures WHERE key = ANY(%s)", (texts,)
            ).fetchall(),
        )
        return [float(r[0]) for r in rows]

    def record(
        self, keys: Sequence[FailureKey], step: FailureStep, *, now: float, forget_before: float, max_keys: int
    ) -> list[float | None]:
        order = sorted(range(len(keys)), key=lambda i: _key_text(keys[i]))

        def op(conn: psycopg.Connection[Any]) -> list[float | None]:
            answers: list[float | None] = [None] * len(keys)
            with conn.transaction():
                # a count lost with the server's last instants costs an attacker's guess a shorter wait,
                # not a session: not worth a WAL flush per failed login
                conn.execute("SET LOCAL synchronous_commit TO off")
                for i in order:
                    text = _key_text(keys[i])
                    conn.execute(
                        "INSERT INTO console_login_failures (key, count, last, blocked_until) VALUES (%s, 0, 0, 0) "
                        "ON CONFLICT (key) DO NOTHING",
                        (text,),
                    )
                    row = conn.execute(
                        "SELECT count, last, blocked_until, times FROM console_login_failures "
                        "WHERE key = %s FOR UPDATE",
                        (text,),
                    ).fetchone()
                    assert row is not None
                    entry = Failures(
                        int(row[0]), float(row[1]), float(row[2]), None if row[3] is None else deque(row[3])
                    )
                    answers[i] = step(keys[i], entry)
                    conn.execute(
                        "UPDATE console_login_failures SET count = %s, last = %s, blocked_until = %s, times = %s "
                        "WHERE key = %s",
                        (
                            entry.count,
                            entry.last,
                            entry.blocked_until,
                            None if entry.times is None else list(entry.times),
                            text,
                        ),
                    )
                conn.execute(
                    "DELETE FROM console_login_failures WHERE key IN (SELECT key FROM console_login_failures "
                    "WHERE last <= %s FOR UPDATE SKIP LOCKED)",
                    (forget_before,),
                )
                self._evict(conn, max_keys, now)
            return answers

        return self._store._run("counting a failed login", op)

    @staticmethod
    def _evict(conn: psycopg.Connection[Any], max_keys: int, now: float) -> None:
        """Past ``max_keys``: forget the least recently failed keys that do not wait; waiting ones last."""
        row = conn.execute("SELECT COUNT(*) FROM console_login_failures").fetchone()
        excess = (int(row[0]) if row else 0) - max_keys
        for waiting in ("blocked_until <= %s", "TRUE"):
            if excess <= 0:
                return
            args: tuple[Any, ...] = (now, excess) if waiting != "TRUE" else (excess,)
            excess -= conn.execute(
                "DELETE FROM console_login_failures WHERE key IN (SELECT key FROM console_login_failures "
                f"WHERE {waiting} ORDER BY last LIMIT %s FOR UPDATE SKIP LOCKED)",
                args,
            ).rowcount

    def forget(self, key: FailureKey) -> None:
        text = _key_text(key)
        self._store._run(
            "forgetting failed logins",
            lambda c: c.execute("DELETE FROM console_login_failures WHERE key = %s", (text,)),
        )


def _identity_json(identity: Identity) -> str:
    grant = identity.grant
    return json.dumps(
        {
            "issuer": identity.issuer,
            "subject": identity.subject,
            "name": identity.name,
            "role": identity.role,
            "values": list(identity.values),
            "grant": {
                "access_token": grant.access_token,
                "refresh_token": grant.refresh_token,
                "expires_at": grant.expires_at,
            },
        }
    )


def _identity_of(text: str) -> Identity:
    data = json.loads(text)
    grant = data["grant"]
    return Identity(
        data["issuer"],
        data["subject"],
        data["name"],
        data["role"],
        tuple(data["values"]),
        ProviderGrant(grant["access_token"], grant["refresh_token"], grant["expires_at"]),
    )


class PostgresGrants:
    """The campus sign-in's `GrantTable` in ``console_oidc_grants``: a row per session, gone with its
    token (revoked, expired and purged, or its user removed)."""

    def __init__(self, store: PostgresUserStore) -> None:
        self._store = store

    def remember(self, token_hash: str, grant: TrackedGrant, *, now: float) -> None:
        text = _identity_json(grant.identity)

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                conn.execute("DELETE FROM console_oidc_grants WHERE expires_at <= %s", (now,))
                conn.execute(
                    "INSERT INTO console_oidc_grants (token_hash, identity, next_check, expires_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (token_hash) DO UPDATE SET identity = EXCLUDED.identity, "
                    "next_check = EXCLUDED.next_check, expires_at = EXCLUDED.expires_at",
                    (token_hash, text, grant.next_check, grant.expires_at),
                )

        self._store._run("keeping a campus sign-in", op)

    def get(self, token_hash: str) -> TrackedGrant | None:
        row = self._store._run(
            "reading a campus sign-in",
            lambda c: c.execute(
                "SELECT identity, next_check, expires_at FROM console_oidc_grants WHERE token_hash = %s", (token_hash,)
            ).fetchone(),
        )
        return None if row is None else TrackedGrant(_identity_of(row[0]), float(row[1]), float(row[2]))

    def claim(self, token_hash: str, seen_next_check: float, until: float) -> bool:
        changed = self._store._run(
            "claiming a campus sign-in's check",
            lambda c: (
                c.execute(
                    "UPDATE console_oidc_grants SET next_check = %s WHERE token_hash = %s AND next_check = %s",
                    (until, token_hash, seen_next_check),
                ).rowcount
            ),
        )
        return changed == 1

    def update(self, token_hash: str, identity: Identity, next_check: float) -> None:
        text = _identity_json(identity)
        self._store._run(
            "updating a campus sign-in",
            lambda c: c.execute(
                "UPDATE console_oidc_grants SET identity = %s, next_check = %s WHERE token_hash = %s",
                (text, next_check, token_hash),
            ),
        )

    def forget(self, token_hash: str) -> None:
        self._store._run(
            "forgetting a campus sign-in",
            lambda c: c.execute("DELETE FROM console_oidc_grants WHERE token_hash = %s", (token_hash,)),
        )
