"""Test helpers for events: the PostgreSQL server the store tests use, one fresh schema per test.

The server is the one ``CAMPUSGUARD_TEST_POSTGRES`` names (default: the project machines'
``postgresql://postgres@127.0.0.1:5432/test``; ``.ci/run`` starts one when none answers).
Without psycopg the PostgreSQL tests skip; a server that does not answer skips them too,
except under ``CI=true``, where it fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from campusguard.app.events import open_event_store
from campusguard.app.events.store import UpsertingEventStore

DEFAULT_TEST_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_test_server_url() -> str:
    """The test server's URL (``CAMPUSGUARD_TEST_POSTGRES`` or the default)."""
    return os.environ.get("CAMPUSGUARD_TEST_POSTGRES") or DEFAULT_TEST_POSTGRES


def with_search_path(url: str, schema: str) -> str:
    """``url`` with ``options=-csearch_path=<schema>`` (tables are created in and read from it)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The test server's URL once it answered; skip (fail under CI=true) when it does not."""
    psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg: pip install -e '.[postgres]'")
    url = postgres_test_server_url()
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        message = f"no PostgreSQL server answers at {url} (set CAMPUSGUARD_TEST_POSTGRES): {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return url


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped after the test: tests never share rows."""
    import psycopg

    schema = f"cg_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An event store target: a SQLite file, then a fresh PostgreSQL schema (the real server)."""
    if request.param == "sqlite":
        return str(tmp_path / "events.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(target: str) -> Iterator[UpsertingEventStore]:
    """The upserting store at `target`, closed after (the contract suite defines its own over more backends)."""
    s = open_event_store(target)
    assert isinstance(s, UpsertingEventStore)
    try:
        yield s
    finally:
        s.close()
