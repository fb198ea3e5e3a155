"""`PgSession`: one PostgreSQL connection shared by a component's threads, that reconnects with
back-off when it is lost; `RetryPolicy`, how long a call keeps trying; `apply_migrations`, numbered
schema migrations in a version table of the caller's own, applied once under an advisory lock.

Every PostgreSQL component (the event store, the alert relay, the alerts' outboxes, ledger and
escalation deadlines, the console's shared identity) runs its calls through a `PgSession`, so a
server restart or a cut network is handled (and logged: one line when it starts, one when it ends)
in one place.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.settings import RetrySettings
from campusguard.app.events.urls import one_line, redact_url
from campusguard.app.infra.backoff import Backoff
from campusguard.app.infra.throttle import OutageLog
from campusguard.errors import CampusGuardError, InvalidInputError, MissingDependencyError

try:
    import psycopg
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "psycopg is not installed; install it with: pip install 'campusguard[postgres]'"
    ) from _exc

__all__ = ["RETRYABLE", "PgSession", "RetryPolicy", "advisory_key", "apply_migrations"]

log = logging.getLogger("campusguard.app.events.pgsession")

T = TypeVar("T")

RETRYABLE = (psycopg.OperationalError, psycopg.InterfaceError)
"""What a lost connection raises: the call is run again on a new one."""


@dataclass(frozen=True)
class RetryPolicy:
    """How long a call keeps trying when the connection to the server fails.

    Attributes:
        budget_s: give up (`StoreUnavailableError`) once the next attempt would start later than
            this many seconds after the first; 0 tries once.
        initial_s: delay before the second attempt, seconds.
        max_s: longest delay between attempts, seconds.
        factor: each failed attempt multiplies the delay by this.
        connect_timeout_s: longest wait for one connection attempt, seconds (libpq counts whole
            seconds, at least 2).
    """

    budget_s: float = 30.0
    initial_s: float = 0.1
    max_s: float = 2.0
    factor: float = 2.0
    connect_timeout_s: float = 5.0

    @classmethod
    def of(cls, settings: RetrySettings) -> RetryPolicy:
        """The policy a config's ``storage.retry`` section gives."""
        return cls(
            budget_s=settings.budget_s,
            initial_s=settings.initial_s,
            max_s=settings.max_s,
            factor=settings.factor,
            connect_timeout_s=settings.connect_timeout_s,
        )

    def delays(self) -> Iterator[float]:
        """The delays between attempts: ``initial_s``, times ``factor`` each time, capped at ``max_s`` (`Backoff`)."""
        return Backoff(self.initial_s, self.max_s, self.factor).delays()


class PgSession:
    """One locked connection (autocommit, ``synchronous_commit = on``) and the retries around it.

    Args:
        url: the libpq URL (shown redacted).
        what: how log lines and errors name the owner (``"PostgreSQL event store"``).
        retry: the back-off of calls whose connection failed.
        read_only: every transaction of the connection is read-only.
        unavailable: what a call raises when the server cannot be reached within ``retry`` (the
            owner's own error: the console's identity raises its ``IdentityUnavailableError``).
        application_name: how the server lists the connection (``pg_stat_activity``).

    The first connection is made by `open` (one attempt: a start-up error is reported at once) or
    by the first call.
    """

    def __init__(
        self,
        url: str,
        *,
        what: str,
        retry: RetryPolicy | None = None,
        read_only: bool = False,
        unavailable: type[CampusGuardError] = StoreUnavailableError,
        application_name: str = "campusguard",
    ) -> None:
        self.url = url
        self.display = redact_url(url)
        self.what = what
        self.retry = retry or RetryPolicy()
        self.read_only = read_only
        self.unavailable = unavailable
        self.application_name = application_name
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._stop_retrying = threading.Event()
        self._outage = OutageLog(log, f"{what} {self.display}")

    def connect(self) -> psycopg.Connection[Any]:
        """A new connection of this session's kind (the caller owns it); psycopg's errors as they come."""
        conn = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(2, round(self.retry.connect_timeout_s)),
            application_name=self.application_name,
        )
        try:
            conn.execute("SET synchronous_commit TO on")  # durable on return, whatever the server default
            if self.read_only:
                conn.execute("SET default_transaction_read_only TO on")
        except BaseException:
            conn.close()
            raise
        return conn

    def open(self, setup: Callable[[psycopg.Connection[Any]], None] | None = None) -> None:
        """Connect once now and run ``setup`` (migrations) on the connection.

        Raises:
            InvalidInputError: libpq rejects the URL, or ``setup`` fails with a non-connection error
                (e.g. no CREATE privilege).
            StoreUnavailableError: the server does not answer, or the connection is lost in ``setup``
                (``unavailable``, as every such error of the session).
        """
        try:
            conn = self.connect()
        except psycopg.ProgrammingError as exc:  # libpq rejected the URL itself
            raise InvalidInputError(f"PostgreSQL URL {self.display} is not valid: {one_line(exc)}") from None
        except psycopg.Error as exc:
            raise self.unavailable(f"PostgreSQL at {self.display} cannot be reached: {one_line(exc)}") from None
        try:
            if setup is not None:
                setup(conn)
        except RETRYABLE as exc:
            conn.close()
            raise self.unavailable(f"PostgreSQL at {self.display} was lost at open: {one_line(exc)}") from None
        except psycopg.Error as exc:
            conn.close()
            raise InvalidInputError(f"{self.what} {self.display} cannot be opened: {one_line(exc)}") from None
        except BaseException:
            conn.close()
            raise
        with self._lock:
            self._conn = conn

    def run(self, what: str, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``op`` on the live connection, reconnecting with back-off (`RetryPolicy`) when it fails.
        ``op`` may run more than once: it is one statement, or its own transaction.

        Raises:
            StoreUnavailableError: the connection failed for the whole budget (or `stop_retrying`
                was called); nothing ``op`` did in a transaction was committed by the failed attempt.
            InvalidInputError: the session is closed.
        """
        with self._lock:
            return self._retrying(what, op)

    @contextlib.contextmanager
    def transaction(self, what: str, *, advisory_lock: int | None = None) -> Iterator[psycopg.Connection[Any]]:
        """One transaction whose statements the caller runs in turn, the session held until it ends:
        committed on leaving the block, rolled back on an error.

        ``BEGIN`` (and, with ``advisory_lock``, that transaction-level advisory lock) is retried as `run`
        retries a call. Once it has begun, a lost connection cannot be retried from here (the caller's
        statements are not a function to run again): it raises, and the caller tries again.

        Raises:
            StoreUnavailableError: as `run`, or the connection was lost inside the transaction or at its
                commit (then it may have committed).
        """

        def begin(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
            conn.execute("BEGIN")
            try:
                if advisory_lock is not None:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_lock,))
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                raise
            return conn

        with self._lock:
            conn = self._retrying(what, begin)
            try:
                yield conn
            except BaseException as exc:
                try:
                    conn.execute("ROLLBACK")
                except psycopg.Error:
                    self._discard()
                if isinstance(exc, RETRYABLE):
                    self._discard()
                    raise self.unavailable(
                        f"{self.what} {self.display}: the connection was lost in a transaction: {one_line(exc)}"
                    ) from None
                raise
            try:
                conn.execute("COMMIT")
            except RETRYABLE as exc:
                self._discard()
                raise self.unavailable(
                    f"{self.what} {self.display}: the connection was lost at commit: {one_line(exc)}"
                ) from None

    def _retrying(self, what: str, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        """`run`'s loop; the caller holds the session's lock."""
        start = time.monotonic()
        delays = self.retry.delays()
        attempts = 0
        while True:
            if self._closed:
                raise InvalidInputError(f"{self.what} {self.display} is closed")
            attempts += 1
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self.connect()
                result = op(self._conn)
                self._outage.up("reachable again")
                return result
            except RETRYABLE as exc:
                self._discard()
                delay = next(delays)
                waited = time.monotonic() - start
                if not self._outage.down(f"{what} failed ({one_line(exc)}); retrying with back-off"):
                    log.debug("%s %s: %s failed again (%s)", self.what, self.display, what, one_line(exc))
                if waited + delay > self.retry.budget_s or self._stop_retrying.is_set():
                    raise self.unavailable(
                        f"{self.what} {self.display}: {what} failed {attempts} time(s) "
                        f"over {waited:.1f} s: {one_line(exc)}"
                    ) from None
                self._stop_retrying.wait(delay)

    def stop_retrying(self) -> None:
        """A call retrying a lost connection gives up at its next failed attempt, and later calls
        try once. Safe from any thread and from a signal handler."""
        self._stop_retrying.set()

    def _discard(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = None

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise `InvalidInputError`."""
        with self._lock:
            self._closed = True
            self._discard()


def apply_migrations(
    conn: psycopg.Connection[Any], *, version_table: str, lock: int, migrations: Mapping[int, str], what: str
) -> int:
    """Bring the tables of ``migrations`` (N: the statements, ``;``-separated, from version N-1 to N)
    to the newest version, in one transaction under the transaction-level advisory lock ``lock``,
    so several processes opening at once migrate once; each applied version is a row of
    ``version_table`` (in the first schema of the ``search_path``). Returns the version found.

    Raises:
        InvalidInputError: the database is at a newer version than ``migrations`` know.
    """
    newest = max(migrations)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock,))
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {version_table} "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {version_table}").fetchone()
        version = int(row[0]) if row else 0
        if version > newest:
            raise InvalidInputError(f"{what} has schema version {version}, newer than this CampusGuard ({newest})")
        for target in range(version + 1, newest + 1):
            for statement in migrations[target].split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(f"INSERT INTO {version_table} (version) VALUES (%s)", (target,))
    if version < newest:
        log.info("%s migrated from schema %d to %d", what, version, newest)
    return version


def advisory_key(name: str) -> int:
    """A stable 63-bit advisory lock key from an ASCII ``name`` (its first 8 bytes)."""
    return int.from_bytes(name.encode("ascii")[:8].ljust(8, b"\0"), "big") & 0x7FFF_FFFF_FFFF_FFFF
