"""The console's identity: users, sessions, API tokens, the audit log, and what sign-in needs besides.

`IdentityStore` is what the console asks of it; two stores give it:

- `campusguard.app.console.identity.users.UserStore`: one SQLite file (``--users-db``), for one console.
  Device cookies are signed with a key kept beside the file; failed logins and the campus
  sign-in's grants are counted and kept in the process's memory.
- `campusguard.app.console.identity.postgres.PostgresUserStore`: the tables on the PostgreSQL server
  of the config's ``storage.postgresql``, shared by every console (node) of the site. A session
  made on one node works on all of them, so a plain load balancer may send a browser anywhere;
  the device-cookie key, the key that seals the campus sign-in's round trip, the failed-login
  counts and the sign-in's grants are shared too.

`open_identity_store` chooses by the config's storage, once, for ``serve`` and the ``users`` commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self

from campusguard.app.console.identity.login_failures import FailureTable
from campusguard.app.console.identity.provider_grants import GrantTable
from campusguard.app.console.identity.users import (
    Account,
    AuditEntry,
    Credential,
    ExternalSignIn,
    TokenInfo,
    User,
    UserStore,
)
from campusguard.app.events.urls import postgres_url_problem
from campusguard.errors import InvalidInputError

if TYPE_CHECKING:
    from campusguard.app.events.settings import StorageSettings

__all__ = ["IdentityStore", "open_identity_store", "identity_location"]


class IdentityStore(Protocol):
    """Users, their credentials and the audit log (see `campusguard.app.console.identity.users.UserTables`
    for each operation), and the shared state of sign-in.

    Attributes:
        display: where the identity is, for messages (a file path, or a URL without its password).
    """

    display: str

    # users
    def add_user(self, name: str, role: str, password: str) -> User: ...
    def remove_user(self, name: str) -> None: ...
    def set_role(self, name: str, role: str) -> User: ...
    def set_password(self, name: str, password: str, *, keep_token_hash: str | None = None) -> None: ...
    def get_user(self, name: str) -> User | None: ...
    def list_users(self) -> list[User]: ...
    def list_accounts(self) -> list[Account]: ...
    def verify_password(self, name: str, password: str) -> User | None: ...
    def sign_in_external(
        self, issuer: str, subject: str, name: str, role: str, *, groups: Sequence[str] = ()
    ) -> ExternalSignIn: ...
    def external_issuer(self, name: str) -> str | None: ...

    # credentials
    def create_session(self, name: str, *, ttl: timedelta = ...) -> tuple[str, str]: ...
    def create_api_token(self, name: str, *, label: str | None = None, ttl: timedelta = ...) -> str: ...
    def resolve(self, token: str) -> Credential | None: ...
    def credential(self, token_hash: str) -> Credential | None: ...
    def revoke(self, token_hash: str) -> bool: ...
    def api_tokens(self, name: str | None = None) -> list[TokenInfo]: ...
    def revoke_api_token(self, token_id: str) -> TokenInfo | None: ...
    def purge_expired(self) -> int: ...

    # audit
    def audit(self, user: str | None, action: str, target: str | None = None, **details: Any) -> None: ...
    def audit_many(self, user: str | None, entries: list[tuple[str, str | None, dict[str, Any]]]) -> None: ...
    def audit_entries(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        user: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> tuple[list[AuditEntry], int]: ...
    def audit_about(self, targets: Sequence[str], *, batch: int = 500) -> list[dict[str, Any]]: ...
    def audit_facets(self) -> tuple[list[str], list[str]]: ...

    # sign-in state
    def device_key(self) -> bytes:
        """The key device cookies are signed with (made at the first call, then kept)."""
        ...

    def sign_in_seal_key(self) -> bytes | None:
        """The key the campus sign-in's round-trip cookie is sealed with, or ``None``: this process's own."""
        ...

    def login_failures(self) -> FailureTable | None:
        """Where failed logins are counted, or ``None``: in this process's memory."""
        ...

    def provider_grants(self) -> GrantTable | None:
        """Where the campus sign-in's grants are kept, or ``None``: in this process's memory."""
        ...

    # lifetime
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *exc: object) -> None: ...


def identity_location(storage: StorageSettings | None, users_db: Path | None, default_db: Path) -> str:
    """Where `open_identity_store` finds the identity: the storage's PostgreSQL URL, else the SQLite
    file (``users_db``, else ``default_db``).

    Raises:
        InvalidInputError: both a PostgreSQL storage and ``users_db`` (the identity of a site with a
            shared database is in that database; a file beside one node would split it).
    """
    if storage is not None and storage.postgresql:
        if users_db is not None:
            raise InvalidInputError(
                "--users-db does not apply: the config's storage.postgresql holds the console's users "
                "(shared by every node); leave --users-db out"
            )
        return storage.postgresql
    return str(users_db or default_db)


def open_identity_store(
    storage: StorageSettings | None,
    *,
    users_db: Path | None,
    default_db: Path,
    password_hasher: Any = None,
) -> IdentityStore:
    """The identity store of a site: in PostgreSQL when ``storage`` names a server
    (`PostgresUserStore`, with the storage's ``retry`` settings), else in the SQLite file
    ``users_db`` (default ``default_db``).

    Raises:
        InvalidInputError: as `identity_location`; a bad URL or file; a schema newer than this code.
        IdentityUnavailableError: the PostgreSQL server does not answer.
        MissingDependencyError: PostgreSQL without psycopg (the ``postgres`` extra), or no argon2.
    """
    where = identity_location(storage, users_db, default_db)
    if storage is None or not storage.postgresql:
        return UserStore(where, password_hasher=password_hasher)
    problem = postgres_url_problem(where)
    if problem is not None:
        raise InvalidInputError(f"PostgreSQL URL {problem}")
    from campusguard.app.console.identity.postgres import PostgresUserStore
    from campusguard.app.events.postgres import RetryPolicy

    r = storage.retry
    policy = RetryPolicy(
        budget_s=r.budget_s,
        initial_s=r.initial_s,
        max_s=r.max_s,
        factor=r.factor,
        connect_timeout_s=r.connect_timeout_s,
    )
    return PostgresUserStore(where, password_hasher=password_hasher, retry=policy)
