"""The one list of schema migrations (`campusguard.app.events.migrations`), rendered for SQLite and
PostgreSQL, builds what the two hand-written lists before it built.

Each test runs on a SQLite file and on fresh schemas of the PostgreSQL test server, and compares
what the database's own catalog says (SQLite's ``sqlite_master`` and pragmas, PostgreSQL's
``information_schema`` and ``pg_catalog``), never the rendered text: a database made by the old SQL
(`events_schema_v6`, a frozen copy) against one the store makes now, fresh or migrated from v3.
"""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import events_schema_v6
import pytest

from campusguard.app.events import Event, open_event_store
from campusguard.app.events.migrations import TABLES
from campusguard.app.events.sql import COLUMNS, SQLITE
from campusguard.app.infra.sqlitedb import apply_migrations

T0 = datetime(2026, 1, 10, 22, 0, tzinfo=UTC)
V1_COLUMNS = tuple(c for c in COLUMNS if c != "media_blur")  # the pipeline's columns of schema v1
Catalog = dict[str, list[tuple[Any, ...]]]


# SQLite ---------------------------------------------------------------------------------------------
def sqlite_catalog(path: Path) -> Catalog:
    """What SQLite's catalog says of a file: every table's columns, indexes (with their columns) and
    foreign keys, each object's stored SQL (CHECK constraints live only there), and the version."""
    conn = sqlite3.connect(path)
    try:
        objects = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
        ).fetchall()
        tables = [name for kind, name, _, _ in objects if kind == "table"]
        catalog: Catalog = {
            "objects": [(kind, name, table, " ".join((sql or "").split())) for kind, name, table, sql in objects],
            "version": conn.execute("PRAGMA user_version").fetchall(),
        }
        for table in tables:
            catalog[f"{table}.columns"] = conn.execute(f"PRAGMA table_xinfo({table})").fetchall()
            catalog[f"{table}.foreign_keys"] = conn.execute(f"PRAGMA foreign_key_list({table})").fetchall()
            indexes = sorted(conn.execute(f"PRAGMA index_list({table})").fetchall(), key=lambda r: r[1])
            catalog[f"{table}.indexes"] = [
                (*row[1:], conn.execute(f"PRAGMA index_info({row[1]})").fetchall()) for row in indexes
            ]
        return catalog
    finally:
        conn.close()


def old_sqlite(path: Path, upto: int) -> None:
    """A SQLite file as the old store made it at schema ``upto`` (its migrations 1..upto, the same runner)."""
    conn = sqlite3.connect(path)
    try:
        apply_migrations(conn, {v: events_schema_v6.SQLITE_V6[v] for v in range(1, upto + 1)}, 0)
    finally:
        conn.close()


# PostgreSQL ------------------------------------------------------------------------------------------
@pytest.fixture
def fresh_schema(postgres_server: str) -> Iterator[Callable[[], str]]:
    """Make fresh schemas on the test server: each call a URL whose search_path is a new one (dropped after)."""
    import psycopg

    made: list[str] = []

    def make() -> str:
        schema = f"cg_mig_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        made.append(schema)
        sep = "&" if "?" in postgres_server else "?"
        return f"{postgres_server}{sep}options={quote(f'-csearch_path={schema}')}"

    yield make
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for schema in made:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def postgres_catalog(url: str) -> Catalog:
    """What PostgreSQL's catalog says of the connection's schema: every table's columns (type, null,
    default), indexes, constraints (checks, keys, references) and the event store's applied versions.
    The schema's own name is left out, so two schemas compare."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()[0]  # type: ignore[index]
        columns = conn.execute(
            "SELECT table_name, ordinal_position, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns WHERE table_schema = %s ORDER BY table_name, ordinal_position",
            (schema,),
        ).fetchall()
        indexes = conn.execute(
            "SELECT tablename, indexname, replace(indexdef, %s, '') FROM pg_indexes WHERE schemaname = %s "
            "ORDER BY tablename, indexname",
            (f"{schema}.", schema),
        ).fetchall()
        constraints = conn.execute(
            "SELECT c.relname, k.conname, k.contype, pg_get_constraintdef(k.oid) FROM pg_constraint k "
            "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s ORDER BY c.relname, k.conname",
            (schema,),
        ).fetchall()
        versions = conn.execute("SELECT version FROM campusguard_schema ORDER BY version").fetchall()
    return {"columns": columns, "indexes": indexes, "constraints": constraints, "versions": versions}


def old_postgres(url: str, upto: int) -> None:
    """A schema as the old store made it at version ``upto``: its version table, migrations 1..upto
    (its SQL of the day) and the alert relay's table (whose code did not change)."""
    import psycopg

    from campusguard.app.events.relay import migrate_relay

    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(
                "CREATE TABLE campusguard_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            for version in range(1, upto + 1):
                for statement in events_schema_v6.POSTGRES_V6[version].split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO campusguard_schema (version) VALUES (%s)", (version,))
        migrate_relay(conn)


# both ------------------------------------------------------------------------------------------------
def insert_v3_event(target: str, event: Event) -> None:
    """Store ``event``, kept by olga, in a schema v3 database (the v1 columns and v3's ``kept``)."""
    postgres = target.startswith("postgresql://")
    if postgres:
        from campusguard.app.events.postgres import _PG as dialect
    else:
        dialect = SQLITE
    row = dict(zip(COLUMNS, dialect.event_row(event, T0), strict=True))
    p = dialect.param
    insert = f"INSERT INTO events ({', '.join(V1_COLUMNS)}) VALUES ({', '.join([p] * len(V1_COLUMNS))})"
    keep = f"UPDATE events SET kept = {'true' if postgres else '1'}, kept_by = 'olga' WHERE event_id = {p}"
    if postgres:
        import psycopg

        with psycopg.connect(target, autocommit=True) as pg:
            pg.execute(insert, tuple(row[c] for c in V1_COLUMNS))
            pg.execute(keep, (event.event_id,))
        return
    conn = sqlite3.connect(target)
    try:
        conn.execute(insert, tuple(row[c] for c in V1_COLUMNS))
        conn.execute(keep, (event.event_id,))
        conn.commit()
    finally:
        conn.close()


@dataclass
class Database:
    """One database under test: where a new store goes, how the old code built its schema there, and
    what the catalog says of it."""

    new_target: Callable[[], str]
    build_old: Callable[[str, int], None]
    catalog: Callable[[str], Catalog]
    tables: Callable[[Catalog], set[str]]


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    if request.param == "sqlite":
        files = (str(tmp_path / f"events{i}.db") for i in itertools.count())
        return Database(
            new_target=lambda: next(files),
            build_old=lambda target, upto: old_sqlite(Path(target), upto),
            catalog=lambda target: sqlite_catalog(Path(target)),
            tables=lambda catalog: {name for kind, name, *_ in catalog["objects"] if kind == "table"},
        )
    return Database(
        new_target=request.getfixturevalue("fresh_schema"),
        build_old=old_postgres,
        catalog=postgres_catalog,
        tables=lambda catalog: {table for table, *_ in catalog["columns"]},
    )


def test_the_rendered_migrations_build_the_catalog_the_old_sql_built(database: Database) -> None:
    old, new = database.new_target(), database.new_target()
    database.build_old(old, 6)
    open_event_store(new).close()
    before, after = database.catalog(old), database.catalog(new)
    assert after == before
    assert database.tables(after) >= TABLES


def test_a_v3_database_migrates_to_the_newest_schema_and_keeps_its_incident(
    database: Database, make_event: Callable[..., Event]
) -> None:
    old, fresh = database.new_target(), database.new_target()
    database.build_old(old, 3)
    event = make_event(started_at=T0)
    insert_v3_event(old, event)
    with open_event_store(old) as store:  # type: ignore[attr-defined]
        record = store.get_record("e1")
        assert record is not None and record.event == event and record.kept and record.kept_by == "olga"
        assert record.outcome is None and record.event.media_blur is None
    open_event_store(fresh).close()
    assert database.catalog(old) == database.catalog(fresh)


def test_both_databases_get_the_same_tables_columns_and_indexes(
    tmp_path: Path, fresh_schema: Callable[[], str]
) -> None:
    """One list: the names SQLite's catalog and PostgreSQL's list are the same (only the types differ)."""
    sqlite_target, pg_target = tmp_path / "events.db", fresh_schema()
    open_event_store(sqlite_target).close()
    open_event_store(pg_target).close()
    lite, pg = sqlite_catalog(sqlite_target), postgres_catalog(pg_target)
    lite_columns = {(t, c[1]) for t in TABLES for c in lite[f"{t}.columns"]}
    pg_columns = {(t, c) for t, _, c, *_ in pg["columns"] if t in TABLES}
    assert lite_columns == pg_columns and len(lite_columns) > len(COLUMNS)
    lite_indexes = {(t, i[0]) for t in TABLES for i in lite[f"{t}.indexes"] if i[2] == "c"}  # created, not implied
    pg_indexes = {(t, i) for t, i, _ in pg["indexes"] if t in TABLES and not i.endswith("_pkey")}
    assert lite_indexes == pg_indexes and ("events", "events_outcome_time") in lite_indexes
