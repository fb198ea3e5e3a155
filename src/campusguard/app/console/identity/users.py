"""The console's users, credentials and audit log: `UserTables` (the SQL, once), `UserStore` (one SQLite file).

- Users have a name, a role (`ROLES`, lowest first) and an argon2id password hash (argon2-cffi).
- Credentials are random bearer tokens of two kinds: ``session`` (from a login, short-lived, with a
  CSRF value for cookie-authenticated writes) and ``api`` (for integrations, long-lived). Only the
  SHA-256 of a token is stored, so a copy of the file does not log anyone in; tokens carry 256 random
  bits, so a fast hash is enough (the slow hash is for low-entropy passwords). Each has an expiry.
- The audit log records every state change: who, when (UTC), what, on which target.

Schema changes are numbered migrations (``PRAGMA user_version``), like the event store. The same
tables on a PostgreSQL server, shared by several consoles, are
`campusguard.app.console.identity.postgres.PostgresUserStore`; `campusguard.app.console.identity.store`
chooses between them.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import hashlib
import json
import re
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal, Protocol, cast, get_args

from campusguard.app.console.identity.devices import device_key_beside
from campusguard.app.infra.sqlitedb import (
    SQLiteFile,
    apply_migrations,
    connect_durable,
    schema_version,
    write_transaction,
)
from campusguard.errors import CampusGuardError, InvalidInputError, require

__all__ = [
    "ROLES",
    "Role",
    "TokenKind",
    "User",
    "Account",
    "ExternalSignIn",
    "Credential",
    "AuditEntry",
    "UserTables",
    "UserStore",
    "IdentityUnavailableError",
    "SqlDialect",
    "SQLITE",
    "Spelled",
    "Statements",
    "Rows",
    "role_at_least",
    "check_user_name",
    "check_password",
    "SCHEMA_VERSION",
    "MIN_PASSWORD_LENGTH",
]

Role = Literal["viewer", "operator", "admin"]
ROLES: tuple[str, ...] = get_args(Role)  # lowest first: each role can do everything the ones before it can
TokenKind = Literal["session", "api"]
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_TOKEN_PREFIX: dict[str, str] = {"session": "cgs_", "api": "cga_"}

_SCHEMA_V1 = """
CREATE TABLE users (
    name          TEXT PRIMARY KEY,
    role          TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'admin')),
    password_hash TEXT NOT NULL,
    created_at    TEXT NOT NULL
);
CREATE TABLE tokens (
    token_hash TEXT PRIMARY KEY,
    user_name  TEXT NOT NULL REFERENCES users (name) ON DELETE CASCADE,
    kind       TEXT NOT NULL CHECK (kind IN ('session', 'api')),
    label      TEXT,
    csrf       TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX tokens_user ON tokens (user_name);
CREATE TABLE audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    time      TEXT NOT NULL,
    user_name TEXT,
    action    TEXT NOT NULL,
    target    TEXT,
    details   TEXT NOT NULL
);
CREATE INDEX audit_time ON audit (time);
"""
# 2: accounts made by a campus sign-in (OIDC), tied to the provider's issuer and subject, not to the name
_SCHEMA_V2 = """
CREATE TABLE oidc_links (
    issuer    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    user_name TEXT NOT NULL UNIQUE REFERENCES users (name) ON DELETE CASCADE,
    linked_at TEXT NOT NULL,
    PRIMARY KEY (issuer, subject)
);
"""
# 3: when each user last signed in, and which values of the provider's role claim mapped to its role then
_SCHEMA_V3 = """
ALTER TABLE users ADD COLUMN last_sign_in_at TEXT;
ALTER TABLE oidc_links ADD COLUMN mapped_groups TEXT NOT NULL DEFAULT '[]'
"""
_MIGRATIONS: dict[int, str] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}
# the password hash of an account that signs in only through its provider: argon2 cannot verify it
NO_PASSWORD = "!oidc"
SCHEMA_VERSION = max(_MIGRATIONS)


def role_at_least(role: str, needed: str) -> bool:
    """True when ``role`` may do what ``needed`` may (viewer < operator < admin)."""
    return ROLES.index(role) >= ROLES.index(needed)


def check_user_name(name: str) -> str:
    """The name if valid (1-64 of letters, digits, ``_ . @ -``, starting with a letter or digit).

    Raises:
        InvalidInputError: naming the problem.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidInputError(
            f"user name {name!r} is not valid: use 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit"
        )
    return name


def check_password(password: str) -> str:
    """The password if long enough (`MIN_PASSWORD_LENGTH` to 1024 characters)."""
    if not MIN_PASSWORD_LENGTH <= len(password) <= MAX_PASSWORD_LENGTH:
        raise InvalidInputError(
            f"password must have {MIN_PASSWORD_LENGTH} to {MAX_PASSWORD_LENGTH} characters, got {len(password)}"
        )
    return password


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def hash_token(token: str) -> str:
    """What the database keeps of a token (and `Credential.token_hash`): its SHA-256, hex."""
    return _token_hash(token)


@dataclass(frozen=True)
class User:
    """A console user."""

    name: str
    role: Role
    created_at: str


@dataclass(frozen=True)
class Account:
    """A user as the users page lists it: where it signs in and when it last did.

    Attributes:
        name, role, created_at: as `User`.
        last_sign_in_at: UTC time of the last session started (password login or campus sign-in);
            ``None`` when it never signed in since schema 3.
        issuer, subject: the provider user the account belongs to (``None`` for a local account).
        groups: the values of the provider's role claim that mapped to ``role`` at the last sign-in.
    """

    name: str
    role: Role
    created_at: str
    last_sign_in_at: str | None = None
    issuer: str | None = None
    subject: str | None = None
    groups: tuple[str, ...] = ()

    @property
    def source(self) -> Literal["local", "oidc"]:
        """``local`` (a console password) or ``oidc`` (signs in through its provider, no password)."""
        return "local" if self.issuer is None else "oidc"


@dataclass(frozen=True)
class ExternalSignIn:
    """The outcome of a sign-in through an identity provider (`UserStore.sign_in_external`).

    Attributes:
        user: the console user, with the role just applied.
        created: the account was made by this sign-in.
        previous_role: the role before this sign-in (``None`` when created).
    """

    user: User
    created: bool
    previous_role: str | None


@dataclass(frozen=True)
class Credential:
    """A valid (unexpired) token and whom it belongs to.

    Attributes:
        user: the owner.
        kind: ``session`` (login) or ``api`` (integration token).
        token_hash: SHA-256 of the token (identifies it for logout/revocation).
        csrf: the session's CSRF value (``None`` for API tokens).
        expires_at: UTC expiry.
    """

    user: User
    kind: TokenKind
    token_hash: str
    csrf: str | None
    expires_at: datetime


@dataclass(frozen=True)
class TokenInfo:
    """An API token as an admin sees it (never the token itself).

    Attributes:
        id: the first 16 hex digits of the token's SHA-256 (what `UserStore.revoke_api_token` takes).
        user, label, created_at, expires_at: whose, what for, when made and until when (UTC ISO).
    """

    id: str
    user: str
    label: str | None
    created_at: str
    expires_at: str


TOKEN_ID_LENGTH = 16


@dataclass(frozen=True)
class AuditEntry:
    """One recorded state change."""

    id: int
    time: str
    user: str | None
    action: str
    target: str | None
    details: dict[str, Any]


class Rows(Protocol):
    """What running one statement gives (a DB-API cursor): its rows and how many rows it changed."""

    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Statements(Protocol):
    """A connection inside one transaction, as `UserTables` runs its statements on it."""

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Rows: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], /) -> None: ...


@dataclass(frozen=True)
class SqlDialect:
    """How the one SQL text of each `UserTables` operation is spelled for a database.

    The statements are written once with ``?`` markers and ``{users}``-style table names;
    the dialect puts in its parameter marker and its tables' names (SQLite keeps the names of
    its first schema; PostgreSQL's are prefixed ``console_``, beside the event store's tables).
    Every value stays a bound parameter.
    """

    param: str
    tables: tuple[tuple[str, str], ...]

    def __call__(self, text: str) -> str:
        return _spell(self, text)


@functools.lru_cache(maxsize=512)
def _spell(dialect: SqlDialect, text: str) -> str:
    return text.format_map(dict(dialect.tables)).replace("?", dialect.param)


SQLITE = SqlDialect("?", (("users", "users"), ("tokens", "tokens"), ("audit", "audit"), ("oidc_links", "oidc_links")))


class Spelled:
    """A DB-API connection or cursor whose statements are spelled by a `SqlDialect` (`Statements`)."""

    def __init__(self, conn: Any, dialect: SqlDialect) -> None:
        self._conn = conn
        self._dialect = dialect

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Rows:
        return cast(Rows, self._conn.execute(self._dialect(sql), tuple(args)))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]], /) -> None:
        self._conn.cursor().executemany(self._dialect(sql), [tuple(r) for r in rows])


class IdentityUnavailableError(CampusGuardError):
    """The shared identity database cannot be reached now (its retry budget is spent): try again shortly
    (the console answers 503, a command exits 2). The failed call was not committed, unless the
    connection was lost in its very commit."""


class UserTables(abc.ABC):
    """Users, hashed tokens, provider links and the audit log as SQL tables: every operation of the
    console's identity, written once for any database (`SqlDialect`).

    A subclass gives the connection: `_transaction` (one write transaction, committed on leaving;
    ``serial``: also serialised with every other ``serial`` one of every process, for the checks
    that read before they write, such as "not the last admin"), `_read` (one statement's rows), and
    the exceptions its driver raises for a broken constraint (`_integrity_errors`).

    Args:
        password_hasher: an ``argon2.PasswordHasher`` (default: argon2-cffi's RFC 9106 low-memory
            profile). Tests may pass cheaper parameters; the algorithm stays argon2id.

    Raises:
        MissingDependencyError: argon2-cffi is not installed (the ``console`` extra).
    """

    display: str
    _integrity_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, *, password_hasher: Any = None) -> None:
        argon2 = require("argon2", "console")
        self._hasher = password_hasher or argon2.PasswordHasher()
        self._verify_errors = (argon2.exceptions.VerifyMismatchError, argon2.exceptions.InvalidHashError)
        # verifying against this when the user does not exist costs the same time as a wrong password
        self._dummy_hash = self._hasher.hash(secrets.token_urlsafe(16))

    @abc.abstractmethod
    def _transaction(self, *, serial: bool = False) -> contextlib.AbstractContextManager[Statements]:
        """One write transaction (see the class)."""

    @abc.abstractmethod
    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """The rows of one statement (``?`` markers, ``{users}``-style table names)."""

    # users ------------------------------------------------------------------------------------
    def add_user(self, name: str, role: str, password: str) -> User:
        """Create a user with an argon2id hash of the password.

        Raises:
            InvalidInputError: bad name, role or password, or the name is taken.
        """
        check_user_name(name)
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        check_password(password)
        digest = self._hasher.hash(password)
        created = _iso(_now())
        try:
            with self._transaction() as conn:
                conn.execute(
                    "INSERT INTO {users} (name, role, password_hash, created_at) VALUES (?, ?, ?, ?)",
                    (name, role, digest, created),
                )
        except self._integrity_errors as exc:
            raise InvalidInputError(f"user {name!r} already exists") from exc
        return User(name, role, created)  # type: ignore[arg-type]

    def remove_user(self, name: str) -> None:
        """Delete a user and every token of theirs.

        Raises:
            KeyError: no such user.
            InvalidInputError: it is the last admin (the console would have nobody to manage it).
        """
        with self._transaction(serial=True) as conn:
            self._check_not_last_admin(conn, name, "removed")
            conn.execute("DELETE FROM {users} WHERE name = ?", (name,))

    @staticmethod
    def _check_not_last_admin(conn: Statements, name: str, change: str) -> str:
        """The user's role; raises `KeyError` if unknown, `InvalidInputError` if the last admin would go."""
        row = conn.execute("SELECT role FROM {users} WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise KeyError(name)
        if row[0] == "admin" and conn.execute("SELECT COUNT(*) FROM {users} WHERE role = 'admin'").fetchone()[0] <= 1:
            raise InvalidInputError(f"user {name!r} is the last admin and cannot be {change}; add another admin first")
        return str(row[0])

    def set_role(self, name: str, role: str) -> User:
        """Change a user's role (their sessions and tokens carry the new role at once).

        Raises:
            KeyError: no such user.
            InvalidInputError: unknown role, or demoting the last admin.
        """
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        with self._transaction(serial=True) as conn:
            if role != "admin":
                self._check_not_last_admin(conn, name, "demoted")
            elif conn.execute("SELECT 1 FROM {users} WHERE name = ?", (name,)).fetchone() is None:
                raise KeyError(name)
            conn.execute("UPDATE {users} SET role = ? WHERE name = ?", (role, name))
        user = self.get_user(name)
        assert user is not None
        return user

    def set_password(self, name: str, password: str, *, keep_token_hash: str | None = None) -> None:
        """Set a new password and end every login session of the user (but ``keep_token_hash``'s).

        API tokens stay valid (revoke them by removing and re-adding the user, or let them expire).

        Raises:
            KeyError: no such user.
            InvalidInputError: the password is too short or too long, or the account signs in through an
                identity provider (it has no console password; giving it one would open a second way in).
        """
        digest = self._hasher.hash(check_password(password))
        with self._transaction() as conn:
            link = conn.execute("SELECT issuer FROM {oidc_links} WHERE user_name = ?", (name,)).fetchone()
            if link is not None:
                raise InvalidInputError(
                    f"user {name!r} signs in through {link[0]} and has no console password; "
                    "change it at the identity provider"
                )
            if conn.execute("UPDATE {users} SET password_hash = ? WHERE name = ?", (digest, name)).rowcount == 0:
                raise KeyError(name)
            sessions = "DELETE FROM {tokens} WHERE user_name = ? AND kind = 'session'"
            if keep_token_hash is None:
                conn.execute(sessions, (name,))
            else:
                conn.execute(sessions + " AND token_hash <> ?", (name, keep_token_hash))

    def get_user(self, name: str) -> User | None:
        rows = self._read("SELECT name, role, created_at FROM {users} WHERE name = ?", (name,))
        return User(*rows[0]) if rows else None

    def list_users(self) -> list[User]:
        return [User(*r) for r in self._read("SELECT name, role, created_at FROM {users} ORDER BY name")]

    def list_accounts(self) -> list[Account]:
        """Every user, local or made by a campus sign-in, with its provider link and last sign-in (by name)."""
        rows = self._read(
            "SELECT u.name, u.role, u.created_at, u.last_sign_in_at, l.issuer, l.subject, l.mapped_groups "
            "FROM {users} u LEFT JOIN {oidc_links} l ON l.user_name = u.name ORDER BY u.name"
        )
        return [
            Account(
                name=r[0],
                role=r[1],
                created_at=r[2],
                last_sign_in_at=r[3],
                issuer=r[4],
                subject=r[5],
                groups=tuple(json.loads(r[6])) if r[6] else (),
            )
            for r in rows
        ]

    def verify_password(self, name: str, password: str) -> User | None:
        """The user if the password is right, else ``None`` (same cost whether or not the user exists)."""
        rows = self._read("SELECT password_hash FROM {users} WHERE name = ?", (name,)) if isinstance(name, str) else []
        if rows and rows[0][0] == NO_PASSWORD:
            rows = []  # an account of a provider: no password, at the same cost as a wrong one
        digest = rows[0][0] if rows else self._dummy_hash
        try:
            self._hasher.verify(digest, password)
        except self._verify_errors:
            return None
        if not rows:
            return None
        if self._hasher.check_needs_rehash(digest):
            with self._transaction() as conn:
                conn.execute("UPDATE {users} SET password_hash = ? WHERE name = ?", (self._hasher.hash(password), name))
        return self.get_user(name)

    def sign_in_external(
        self, issuer: str, subject: str, name: str, role: str, *, groups: Sequence[str] = ()
    ) -> ExternalSignIn:
        """The account of the provider's user ``(issuer, subject)``, made at the first sign-in, with ``role`` applied.

        The account is found by issuer and subject, so a user renamed at the provider keeps it (and its
        name); ``name`` is used only to make it. The provider is the authority on the role: it is set
        at every sign-in, even when that demotes the last admin (`campusguard users` can add one). The
        account has no password. ``groups``: the role claim's values that mapped to ``role`` (kept for
        the users page). An account an admin removed is made again at its next sign-in (the provider's
        role map still lets the person in); an admin's change of its role lasts until then.

        Raises:
            InvalidInputError: bad name or role, or ``name`` is already taken by an account not tied to this
                provider user (a local account, or another provider user): it is never taken over.
        """
        if role not in ROLES:
            raise InvalidInputError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        now = _iso(_now())
        mapped = json.dumps(sorted(set(groups)))
        with self._transaction(serial=True) as conn:
            row = conn.execute(
                "SELECT u.name, u.role FROM {oidc_links} l JOIN {users} u ON u.name = l.user_name "
                "WHERE l.issuer = ? AND l.subject = ?",
                (issuer, subject),
            ).fetchone()
            if row is not None:
                conn.execute("UPDATE {users} SET role = ? WHERE name = ?", (role, row[0]))
                conn.execute(
                    "UPDATE {oidc_links} SET mapped_groups = ? WHERE issuer = ? AND subject = ?",
                    (mapped, issuer, subject),
                )
                created, previous, name = False, str(row[1]), str(row[0])
            else:
                check_user_name(name)
                if conn.execute("SELECT 1 FROM {users} WHERE name = ?", (name,)).fetchone() is not None:
                    raise InvalidInputError(
                        f"the user name {name!r} belongs to another console account; an admin must rename or remove it"
                    )
                conn.execute(
                    "INSERT INTO {users} (name, role, password_hash, created_at) VALUES (?, ?, ?, ?)",
                    (name, role, NO_PASSWORD, now),
                )
                conn.execute(
                    "INSERT INTO {oidc_links} (issuer, subject, user_name, linked_at, mapped_groups) VALUES (?, ?, ?, ?, ?)",
                    (issuer, subject, name, now, mapped),
                )
                created, previous = True, None
        user = self.get_user(name)
        assert user is not None
        return ExternalSignIn(user, created, previous)

    def external_issuer(self, name: str) -> str | None:
        """The issuer of the provider the user signs in through, or ``None`` for a local account."""
        rows = self._read("SELECT issuer FROM {oidc_links} WHERE user_name = ?", (name,))
        return str(rows[0][0]) if rows else None

    # tokens -----------------------------------------------------------------------------------
    def _issue(self, name: str, kind: TokenKind, ttl: timedelta, label: str | None, csrf: str | None) -> str:
        token = _TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)
        now = _now()
        try:
            with self._transaction() as conn:
                conn.execute(
                    "INSERT INTO {tokens} (token_hash, user_name, kind, label, csrf, created_at, expires_at) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (_token_hash(token), name, kind, label, csrf, _iso(now), _iso(now + ttl)),
                )
                if kind == "session":  # a session is made only by a sign-in (password or provider)
                    conn.execute("UPDATE {users} SET last_sign_in_at = ? WHERE name = ?", (_iso(now), name))
        except self._integrity_errors as exc:  # the foreign key: no such user
            raise KeyError(name) from exc
        return token

    def create_session(self, name: str, *, ttl: timedelta = timedelta(hours=12)) -> tuple[str, str]:
        """A new login session: ``(token, csrf)``. Raises `KeyError` for an unknown user."""
        csrf = secrets.token_urlsafe(24)
        return self._issue(name, "session", ttl, None, csrf), csrf

    def create_api_token(self, name: str, *, label: str | None = None, ttl: timedelta = timedelta(days=365)) -> str:
        """A new API token for integrations (shown once; only its hash is kept). Raises `KeyError`."""
        return self._issue(name, "api", ttl, label, None)

    def resolve(self, token: str) -> Credential | None:
        """Whose token this is, or ``None`` when it is unknown, malformed or expired."""
        if not isinstance(token, str) or not token.startswith(tuple(_TOKEN_PREFIX.values())) or len(token) > 200:
            return None
        rows = self._read(
            "SELECT u.name, u.role, u.created_at, t.kind, t.token_hash, t.csrf, t.expires_at "
            "FROM {tokens} t JOIN {users} u ON u.name = t.user_name WHERE t.token_hash = ?",
            (_token_hash(token),),
        )
        return self._credential(rows)

    def credential(self, token_hash: str) -> Credential | None:
        """The credential of a token known by its hash (what a request resolved before), or ``None``
        once it is revoked, expired, or its user removed: open streams re-check their caller with it."""
        rows = self._read(
            "SELECT u.name, u.role, u.created_at, t.kind, t.token_hash, t.csrf, t.expires_at "
            "FROM {tokens} t JOIN {users} u ON u.name = t.user_name WHERE t.token_hash = ?",
            (token_hash,),
        )
        return self._credential(rows)

    @staticmethod
    def _credential(rows: list[tuple[Any, ...]]) -> Credential | None:
        if not rows:
            return None
        name, role, created, kind, digest, csrf, expires = rows[0]
        expires_at = datetime.fromisoformat(expires)
        if expires_at <= _now():
            return None
        return Credential(User(name, role, created), kind, digest, csrf, expires_at)

    def revoke(self, token_hash: str) -> bool:
        """Delete one token by its hash (logout); True if it existed."""
        with self._transaction() as conn:
            return conn.execute("DELETE FROM {tokens} WHERE token_hash = ?", (token_hash,)).rowcount > 0

    def api_tokens(self, name: str | None = None) -> list[TokenInfo]:
        """The unexpired API tokens (of user ``name``, or of all), newest first."""
        sql = "SELECT token_hash, user_name, label, created_at, expires_at FROM {tokens} WHERE kind = 'api' AND expires_at > ?"
        args: tuple[Any, ...] = (_iso(_now()),)
        if name is not None:
            sql += " AND user_name = ?"
            args += (name,)
        rows = self._read(sql + " ORDER BY created_at DESC", args)
        return [TokenInfo(str(h)[:TOKEN_ID_LENGTH], u, lbl, c, e) for h, u, lbl, c, e in rows]

    def revoke_api_token(self, token_id: str) -> TokenInfo | None:
        """Delete the API token whose id (`TokenInfo.id`) this is; the token deleted, or ``None`` when
        there is none (an id that is not 16 hex digits matches nothing)."""
        if len(token_id) != TOKEN_ID_LENGTH or any(c not in "0123456789abcdef" for c in token_id):
            return None
        with self._transaction() as conn:
            rows = conn.execute(
                "SELECT token_hash, user_name, label, created_at, expires_at FROM {tokens} "
                "WHERE kind = 'api' AND substr(token_hash, 1, ?) = ?",
                (TOKEN_ID_LENGTH, token_id),
            ).fetchall()
            if len(rows) != 1:
                return None
            digest, user, label, created, expires = rows[0]
            conn.execute("DELETE FROM {tokens} WHERE token_hash = ?", (digest,))
        return TokenInfo(token_id, user, label, created, expires)

    def purge_expired(self) -> int:
        """Delete expired tokens; the number deleted."""
        with self._transaction() as conn:
            return conn.execute("DELETE FROM {tokens} WHERE expires_at <= ?", (_iso(_now()),)).rowcount

    # audit ------------------------------------------------------------------------------------
    def audit(self, user: str | None, action: str, target: str | None = None, **details: Any) -> None:
        """Record one state change (committed when this returns)."""
        with self._transaction() as conn:
            conn.execute(
                "INSERT INTO {audit} (time, user_name, action, target, details) VALUES (?, ?, ?, ?, ?)",
                (_iso(_now()), user, action, target, json.dumps(details, default=str, sort_keys=True)),
            )

    def audit_many(self, user: str | None, entries: list[tuple[str, str | None, dict[str, Any]]]) -> None:
        """Record several state changes ``(action, target, details)`` at once (one commit)."""
        now = _iso(_now())
        with self._transaction() as conn:
            conn.executemany(
                "INSERT INTO {audit} (time, user_name, action, target, details) VALUES (?, ?, ?, ?, ?)",
                [(now, user, a, t, json.dumps(d, default=str, sort_keys=True)) for a, t, d in entries],
            )

    def audit_entries(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        user: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> tuple[list[AuditEntry], int]:
        """A page of the audit log, newest first, and the number of entries matching the filters.

        Args:
            user: only this user's entries.
            action: only this action (``event.acknowledge``), or every action under a prefix ending
                in a dot (``event.``).
            since: at or after this time; until: before this time (naive = UTC).
        """
        clauses: list[str] = []
        args: list[Any] = []
        if user is not None:
            clauses.append("user_name = ?")
            args.append(user)
        if action is not None and action.endswith("."):
            clauses.append("substr(action, 1, ?) = ?")
            args += [len(action), action]
        elif action is not None:
            clauses.append("action = ?")
            args.append(action)
        for bound, op in ((since, ">="), (until, "<")):
            if bound is not None:
                clauses.append(f"time {op} ?")
                args.append(_iso(bound if bound.tzinfo else bound.replace(tzinfo=UTC)))
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._read(
            f"SELECT id, time, user_name, action, target, details FROM {{audit}}{where} ORDER BY id DESC LIMIT ? OFFSET ?",
            (*args, int(limit), int(offset)),
        )
        total = int(self._read(f"SELECT COUNT(*) FROM {{audit}}{where}", tuple(args))[0][0])
        entries = [
            AuditEntry(id=r[0], time=r[1], user=r[2], action=r[3], target=r[4], details=json.loads(r[5])) for r in rows
        ]
        return entries, total

    def audit_about(self, targets: Sequence[str], *, batch: int = 500) -> list[dict[str, Any]]:
        """Every audit entry whose target is one of ``targets`` (oldest first), as dicts
        (``id``, ``time``, ``user``, ``action``, ``target``, ``details``): an evidence export's audit trail."""
        ids = list(dict.fromkeys(targets))
        out: list[dict[str, Any]] = []
        for i in range(0, len(ids), batch):
            chunk = tuple(ids[i : i + batch])
            rows = self._read(
                "SELECT id, time, user_name, action, target, details FROM {audit} "
                f"WHERE target IN ({', '.join('?' * len(chunk))}) ORDER BY id",
                chunk,
            )
            out += [
                {"id": r[0], "time": r[1], "user": r[2], "action": r[3], "target": r[4], "details": json.loads(r[5])}
                for r in rows
            ]
        return sorted(out, key=lambda e: e["id"])

    def audit_facets(self) -> tuple[list[str], list[str]]:
        """The users and the actions the audit log names (sorted): the choices of its filters."""
        users = [str(r[0]) for r in self._read("SELECT DISTINCT user_name FROM {audit} WHERE user_name IS NOT NULL")]
        actions = [str(r[0]) for r in self._read("SELECT DISTINCT action FROM {audit}")]
        return sorted(users), sorted(actions)


class UserStore(UserTables, SQLiteFile):
    """The console's identity (`UserTables`) in one SQLite file; safe to share across threads.

    Device cookies are signed with a key kept beside the file (`device_key`); the campus
    sign-in's grants and failed logins stay in the process's memory.

    Args:
        path: the database file (created with its folder if missing).
        password_hasher: as `UserTables`.

    Raises:
        InvalidInputError: the file is not a CampusGuard users database or is newer than this code.
        MissingDependencyError: argon2-cffi is not installed (the ``console`` extra).
    """

    _integrity_errors = (sqlite3.IntegrityError,)

    def __init__(self, path: str | Path, *, password_hasher: Any = None) -> None:
        super().__init__(password_hasher=password_hasher)
        self.path = Path(path)
        self.display = str(self.path)
        self._lock = threading.Lock()
        try:
            self._conn = connect_durable(self.path, foreign_keys=True)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise InvalidInputError(f"users database {self.path} cannot be opened: {exc}") from exc

    def _migrate(self) -> None:
        version = schema_version(self._conn)
        if version > SCHEMA_VERSION:
            raise InvalidInputError(
                f"users database {self.path} has schema version {version}, newer than this CampusGuard ({SCHEMA_VERSION})"
            )
        if version == SCHEMA_VERSION:
            return
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if version == 0 and tables:
            raise InvalidInputError(f"{self.path} is not a CampusGuard users database (it holds other tables)")
        apply_migrations(self._conn, _MIGRATIONS, version)

    @contextlib.contextmanager
    def _transaction(self, *, serial: bool = False) -> Iterator[Statements]:
        """One write transaction under the store's lock, committed (fsync'd) on leaving, rolled back on
        error (``BEGIN IMMEDIATE``: every write transaction of the file is already serial)."""
        with self._lock, write_transaction(self._conn) as conn:
            yield Spelled(conn, SQLITE)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._conn.execute(SQLITE(sql), args).fetchall()

    def device_key(self) -> bytes:
        """The device-cookie key: in a file beside the database (`device_key_beside`)."""
        return device_key_beside(self.path)

    def sign_in_seal_key(self) -> bytes | None:
        """``None``: the campus sign-in's round trip is sealed with a key of this process only."""
        return None

    def login_failures(self) -> None:
        """``None``: failed logins are counted in this process's memory."""
        return None

    def provider_grants(self) -> None:
        """``None``: the campus sign-in's grants stay in this process's memory, never on disk."""
        return None
