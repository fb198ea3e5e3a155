"""Test helpers for events: a store target over SQLite and the PostgreSQL server (whose fixtures,
`postgres_server` and `postgres_url`, are in tests/app/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from campusguard.app.events import open_event_store
from campusguard.app.events.store import UpsertingEventStore


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
