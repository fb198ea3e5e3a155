"""`PostgresEventStore`: the event store on a PostgreSQL server (psycopg 3), for many writers.

Same protocols (`EventStore`, `ReviewableEventStore`) and the same SQL as `SQLiteEventStore`
(`campusguard.app.events.sql`); the columns are native types (``timestamptz`` wall-clock
times, ``jsonb`` lists and details, ``double precision`` stream times).

Durability: one connection in autocommit mode with ``synchronous_commit = on``; each write is
one statement (an update with its row of the alert relay) or one transaction (a review), so it
is committed, its WAL flushed on the server, when the call returns.

Alerts: `record` also queues the update in the alert relay (`campusguard.app.events.relay`) in
the same statement, so the store relays (a `campusguard.app.events.recorder.RelayingRecorder`):
the event writer hands the updates to the sinks through `open_relay` (a relay thread, on every
node), never itself, and an update stored by a process killed before its alerts went out is
relayed by any live one.

Schema: table ``events`` and the version table ``campusguard_schema`` (one row per applied
migration) in the first schema of the connection's ``search_path``. The migrations are the one list
both stores apply (`campusguard.app.events.migrations`), in PostgreSQL's types, applied in one
transaction at open, under a transaction-level advisory lock, so several workers starting at once
migrate once. A database written by a newer schema is refused. The alert relay's table has a version table of
its own (`campusguard.app.events.relay.migrate_relay`), brought up to date at the same open.

Lost connections: every call runs under `RetryPolicy` (through
`campusguard.app.events.pgsession.PgSession`): when the connection fails (server restarted,
network cut) the call reconnects and runs again with exponential back-off until it succeeds or
the policy's budget is spent; then it raises `StoreUnavailableError` and nothing was committed
by it, so the caller keeps the event and tries again (the pipeline's event worker does; on a
shutdown `stop_retrying` cuts the wait short and the worker spools the event). Writes are
upserts on the deterministic ``event_id``, so a write whose commit was sent but whose answer was
lost is simply written again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from campusguard.app.events.migrations import POSTGRES_SCHEMA, SCHEMA_VERSION, render
from campusguard.app.events.pgsession import PgSession, RetryPolicy, apply_migrations
from campusguard.app.events.records import EventFilter, EventRecord, ReviewAction
from campusguard.app.events.relay import AlertRelay, migrate_relay, relay_args, with_relay
from campusguard.app.events.review import check_review_action, review_outcome
from campusguard.app.events.sql import Dialect
from campusguard.app.events.store import UpsertingEventStore, check_page
from campusguard.app.events.types import Event
from campusguard.app.events.urls import redact_url
from campusguard.errors import InvalidInputError, MissingDependencyError

try:
    import psycopg
    from psycopg.types.json import Jsonb
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        "psycopg is not installed; install it with: pip install 'campusguard[postgres]'"
    ) from _exc

__all__ = ["PostgresEventStore", "RetryPolicy", "VERSION_TABLE"]

T = TypeVar("T")

VERSION_TABLE = "campusguard_schema"
_MIGRATION_LOCK = 0x6367_6576_656E_7473 & 0x7FFF_FFFF_FFFF_FFFF  # "cgevents": the advisory lock of migrations


def _jsonb(value: Any) -> Jsonb:
    return Jsonb(value, dumps=_dumps)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)


_PG = Dialect(param="%s", encode_json=_jsonb, encode_time=lambda t: t, no_limit=None, schema=POSTGRES_SCHEMA)


class PostgresEventStore(UpsertingEventStore):
    """`ReviewableEventStore` on a PostgreSQL server; safe to share across threads (one connection, locked).

    Args:
        url: ``postgresql://user@host:port/database`` (libpq URL; the password comes from
            ``PGPASSWORD`` or ``~/.pgpass``; ``?options=-csearch_path%3Dname`` picks the schema).
        read_only: only read (``campusguard events``): no migration, a database without the
            current schema is refused.
        retry: the back-off of calls whose connection failed.

    Raises:
        StoreUnavailableError: the server does not answer (one attempt at open: a start-up error
            is reported at once).
        InvalidInputError: the URL is malformed, the database was written by a newer schema,
            holds an ``events`` table CampusGuard did not create, or the role may not create
            the tables.
    """

    dialect = _PG

    def __init__(self, url: str, *, read_only: bool = False, retry: RetryPolicy | None = None) -> None:
        self.url = url
        self.display = redact_url(url)
        self.read_only = read_only
        self.retry = retry or RetryPolicy()
        self._session = PgSession(url, what="PostgreSQL event store", retry=self.retry, read_only=read_only)
        self._session.open(self._migrate)

    # connection and retries -------------------------------------------------------------------
    def _run(self, what: str, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run ``op`` on a live connection, reconnecting with back-off (`RetryPolicy`) when it fails."""
        return self._session.run(what, op)

    def stop_retrying(self) -> None:
        """A call retrying a lost connection now gives up (`StoreUnavailableError`) at its next failed
        attempt, and later calls try once: on a shutdown the caller spools what the server did not
        take instead of waiting out the budget. Safe from any thread and from a signal handler."""
        self._session.stop_retrying()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._session.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # schema -----------------------------------------------------------------------------------
    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        """Check the schema version and apply missing migrations, all in one locked transaction; then
        the alert relay's table (read-write only)."""
        self._migrate_events(conn)
        if not self.read_only:
            migrate_relay(conn)

    def _migrate_events(self, conn: psycopg.Connection[Any]) -> None:
        """Refuse what is not ours to migrate (read-only, no schema, a foreign ``events`` table),
        then apply the missing migrations (`apply_migrations`), all in one transaction under the
        migrations' advisory lock."""
        with conn.transaction():
            if self.read_only:
                exists, _ = self._tables(conn)
                if not exists:
                    raise InvalidInputError(f"{self.display} holds no CampusGuard event store ({VERSION_TABLE})")
                self._check_version(self._version(conn))
                return
            # every opener waits here until the first has committed its migration
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            exists, events = self._tables(conn)
            if events and (not exists or self._version(conn) == 0):
                raise InvalidInputError(
                    f"{self.display} already has an events table not created by CampusGuard; "
                    "use another database or schema (search_path)"
                )
            apply_migrations(
                conn,
                version_table=VERSION_TABLE,
                lock=_MIGRATION_LOCK,
                migrations=render(self.dialect.schema),
                what=f"event store {self.display}",
            )

    def _tables(self, conn: psycopg.Connection[Any]) -> tuple[bool, bool]:
        """Whether the version table and an ``events`` table exist in the schema tables are created in."""
        schema = conn.execute("SELECT current_schema()").fetchone()
        if not schema or schema[0] is None:
            path = conn.execute("SHOW search_path").fetchone()
            raise InvalidInputError(
                f"PostgreSQL event store {self.display}: no schema of search_path "
                f"{path[0] if path else '?'} exists or may be used by this role"
            )
        row = conn.execute(
            "SELECT to_regclass(format('%%I.%%I', current_schema(), %s::text)) IS NOT NULL, "
            "to_regclass(format('%%I.events', current_schema())) IS NOT NULL",
            (VERSION_TABLE,),
        ).fetchone()
        return (bool(row[0]), bool(row[1])) if row else (False, False)

    @staticmethod
    def _version(conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(f"SELECT COALESCE(MAX(version), 0) FROM {VERSION_TABLE}").fetchone()
        return int(row[0]) if row else 0

    def _check_version(self, version: int) -> None:
        """Refuse, read-only, a database at another version than `SCHEMA_VERSION` (read-write,
        `apply_migrations` refuses a newer one and migrates an older one)."""
        if version > SCHEMA_VERSION:
            raise InvalidInputError(
                f"event store {self.display} has schema version {version}, newer than this CampusGuard ({SCHEMA_VERSION})"
            )
        if version < SCHEMA_VERSION:
            raise InvalidInputError(
                f"event store {self.display} has schema version {version}, older than this CampusGuard "
                f"({SCHEMA_VERSION}); open it once read-write (campusguard watch or serve) to migrate it"
            )

    # writes -----------------------------------------------------------------------------------
    @classmethod
    def _record_statement(cls, upsert: str) -> str:
        return with_relay(upsert)

    def record(self, event: Event) -> None:
        """Store one lifecycle update (see `UpsertingEventStore.record`) and queue it in the alert
        relay, in one statement (`with_relay`); committed when this returns."""
        row = self.dialect.event_row(event, datetime.now(UTC))
        self._execute(f"storing event {event.event_id}", self._upsert_sql, row + relay_args(event))

    def open_relay(self, send: Callable[[Event], None]) -> AlertRelay:
        """A relay (not started) handing this database's queued updates to ``send`` (the alert
        sinks); every node runs one while its sinks are open (`AlertRelay`)."""
        return AlertRelay(self.url, send, retry=self.retry)

    def _execute(self, what: str, sql: str, args: tuple[Any, ...]) -> None:
        self._run(what, lambda conn: conn.execute(sql, args))

    def _execute_count(self, what: str, sql: str, args: tuple[Any, ...]) -> int:
        return self._run(what, lambda conn: int(conn.execute(sql, args).rowcount))

    def _fetch(self, what: str, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._run(what, lambda conn: [tuple(r) for r in conn.execute(sql, args).fetchall()])

    def review(
        self,
        event_id: str,
        action: ReviewAction,
        *,
        user: str,
        note: str | None = None,
        outcome: str | None = None,
    ) -> EventRecord:
        """Acknowledge or resolve an incident (see `SQLiteEventStore.review`); committed when this returns."""
        check_review_action(action, outcome)
        args = _PG.review_args(action, event_id, user, note, datetime.now(UTC), outcome)
        sql = _PG.review_sql(action, outcome=outcome is not None)

        def op(conn: psycopg.Connection[Any]) -> tuple[int, str | None]:
            with conn.transaction():  # check and change in one transaction
                changed = conn.execute(sql, args).rowcount
                row = conn.execute(_PG.state_sql(), (event_id,)).fetchone()
            return changed, None if row is None else str(row[0])

        changed, current = self._run(f"reviewing event {event_id}", op)
        return review_outcome(self, event_id, action, changed, current)

    def _review_batch(
        self, what: str, update: tuple[str, tuple[Any, ...]], select: tuple[str, tuple[Any, ...]]
    ) -> tuple[set[str], list[tuple[Any, ...]]]:
        def op(conn: psycopg.Connection[Any]) -> tuple[set[str], list[tuple[Any, ...]]]:
            with conn.transaction():  # all or nothing; a retry after a lost connection redoes it all
                changed = {str(r[0]) for r in conn.execute(*update).fetchall()}
                return changed, [tuple(r) for r in conn.execute(*select).fetchall()]

        return self._run(what, op)

    # reads ------------------------------------------------------------------------------------
    def get_record(self, event_id: str) -> EventRecord | None:
        """One incident with its review state, or ``None``."""
        row = self._run(f"reading event {event_id}", lambda c: c.execute(_PG.select_sql(), (event_id,)).fetchone())
        return None if row is None else _PG.record(tuple(row))

    def query_records(
        self,
        where: EventFilter = EventFilter(),  # noqa: B008 - frozen, so a shared default is safe
        *,
        limit: int | None = 50,
        offset: int = 0,
        newest_first: bool = True,
    ) -> tuple[list[EventRecord], int]:
        """One page of incidents matching ``where`` and the number of all matching incidents
        (see `SQLiteEventStore.query_records`)."""
        check_page(limit, offset)
        page, page_args, count, count_args = _PG.page_sql(where, limit=limit, offset=offset, newest_first=newest_first)

        def op(conn: psycopg.Connection[Any]) -> tuple[list[Any], int]:
            with conn.transaction():
                rows = conn.execute(page, page_args).fetchall()
                total = conn.execute(count, count_args).fetchone()
            return rows, int(total[0]) if total else 0

        rows, total = self._run("querying events", op)
        return [_PG.record(tuple(r)) for r in rows], total
