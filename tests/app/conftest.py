"""Shared app test helpers: the `make_event` factory, and the PostgreSQL server the store tests use
(one fresh schema per test).

The server is the one ``CAMPUSGUARD_TEST_POSTGRES`` names (default: the project machines'
``postgresql://postgres@127.0.0.1:5432/test``; ``.ci/run`` starts one when none answers).
Without psycopg the PostgreSQL tests skip; a server that does not answer skips them too,
except under ``CI=true``, where it fails them.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from campusguard.app.events import Event


def _make_event(**overrides: Any) -> Event:
    fields: dict[str, Any] = {
        "event_id": "e1",
        "phase": "start",
        "camera_id": "cam0",
        "rule_name": "no entry",
        "rule_kind": "intrusion",
        "zone": "yard",
        "start_s": 12.5,
        "onset_s": 11.5,
        "start_frame": 125,
        "tracker_ids": (3, 7),
        "class_ids": (0,),
        "class_names": ("person",),
        "count": 2,
    }
    fields.update(overrides)
    return Event(**fields)


@pytest.fixture
def make_event() -> Callable[..., Event]:
    return _make_event


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


@contextlib.contextmanager
def _fresh_schema(postgres_server: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema of the test database, dropped on leaving."""
    import psycopg

    schema = f"cg_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(postgres_server, schema)
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped after the test: tests never share rows."""
    with _fresh_schema(postgres_server) as url:
        yield url


@pytest.fixture
def other_postgres_url(postgres_server: str) -> Iterator[str]:
    """Another fresh schema of the same database as `postgres_url`'s: a second site beside it."""
    with _fresh_schema(postgres_server) as url:
        yield url
